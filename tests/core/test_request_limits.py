"""Request limits (core/limits.py): a body over its endpoint's limit is a 413 before a byte of it
is read, a chunked one a 411, an address too long a JSON 414; the events parsers never read past the
limit; `bench/abuse_bench.py --quick` holds the same under gunicorn with three floods at once."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from core import limits
from tests.builders import make_user
from tests.live.helpers import event, runner_client, spine
from trials.live.api import TrialEvents
from trials.live.parsers import FastJSONParser, JSONLinesParser
from trials.models import Import, RuntimeEvent

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]


class Unreadable(io.RawIOBase):
    """A request body that fails the test if anything reads it."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        raise AssertionError("the body was read")


@pytest.fixture
def runner_and_trial():
    runner = runner_client()[0]
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    return runner, pk


def test_an_events_body_over_its_limit_is_refused_413_without_being_read(runner_and_trial, settings):
    runner, pk = runner_and_trial
    settings.LIVE_MAX_BODY_BYTES = 1000
    answer = runner.generic(
        "POST",
        f"/api/trials/{pk}/events/",
        CONTENT_TYPE="application/json",
        **{"wsgi.input": Unreadable(), "CONTENT_LENGTH": str(100 * 1024 * 1024)},
    )
    assert answer.status_code == 413 and answer["Content-Type"] == "application/json"
    assert "1,000 bytes" in answer.json()["detail"]
    assert not RuntimeEvent.objects.filter(type="tool.progress").exists()


def test_an_events_body_within_its_limit_is_stored(runner_and_trial, settings):
    runner, pk = runner_and_trial
    settings.LIVE_MAX_BODY_BYTES = 1000
    answer = runner.post(f"/api/trials/{pk}/events/", {"events": [event(1)]}, format="json")
    assert answer.status_code == 200 and answer.json()["events"] == 1


@pytest.mark.parametrize("parser", [FastJSONParser, JSONLinesParser])
def test_the_events_parsers_read_no_further_than_one_byte_past_the_limit(parser, settings):
    settings.LIVE_MAX_BODY_BYTES = 10
    context = {"view": TrialEvents()}
    stream = io.BytesIO(b'{"events":[]}' + b" " * 1000)
    with pytest.raises(limits.BodyTooLarge):
        parser().parse(stream, parser_context=context)
    assert stream.tell() == 11
    assert parser().parse(io.BytesIO(b'{"a":1}'), parser_context=context) in ({"a": 1}, b'{"a":1}')


def test_a_chunked_body_is_refused_411_instead_of_being_read_as_empty(runner_and_trial):
    runner, pk = runner_and_trial
    answer = runner.generic(
        "POST",
        f"/api/trials/{pk}/events/",
        CONTENT_TYPE="application/json",
        **{"wsgi.input": Unreadable(), "CONTENT_LENGTH": "", "HTTP_TRANSFER_ENCODING": "chunked"},
    )
    assert answer.status_code == 411 and "Content-Length" in answer.json()["detail"]


def test_every_other_write_endpoint_refuses_a_body_over_max_body_bytes(client, settings, failed):
    settings.MAX_BODY_BYTES = 1000
    client.force_login(make_user("tina", "triager"))
    big = {"wsgi.input": Unreadable(), "CONTENT_LENGTH": "1001"}
    for url in (f"/api/trials/{failed[0].pk}/feedback/", "/api/comparisons/save/", "/triage/assign/"):
        answer = client.generic("POST", url, CONTENT_TYPE="application/json", **big)
        assert answer.status_code == 413, url
    page = client.generic("POST", f"/trials/{failed[0].pk}/comments/", CONTENT_TYPE="text/plain", **big)
    assert page.status_code == 413 and page["Content-Type"].startswith("text/plain")


def test_an_upload_may_be_larger_than_max_body_bytes_up_to_its_own_limit(client_logged_in, settings, tmp_path):
    settings.MAX_BODY_BYTES = 100
    settings.IMPORT_MAX_UPLOAD_BYTES = 100_000
    pack = tmp_path / "trajectory.json"
    pack.write_text('{"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {"name": "a"}, "steps": []}')
    with pack.open("rb") as handle:
        answer = client_logged_in.post("/api/imports/", {"file": handle})
    assert answer.status_code == 202 and Import.objects.count() == 1
    big = {"wsgi.input": Unreadable(), "CONTENT_LENGTH": "100001"}
    for url in ("/api/imports/", "/imports/"):
        answer = client_logged_in.generic("POST", url, CONTENT_TYPE="multipart/form-data; boundary=x", **big)
        assert answer.status_code == 413, url


def test_an_address_over_the_limit_is_a_json_414_below_gunicorns_own(client_logged_in, settings):
    too_long = "/api/trials/?name=" + "x" * settings.MAX_REQUEST_LINE_BYTES
    answer = client_logged_in.get(too_long)
    assert answer.status_code == 414 and answer["Content-Type"] == "application/json"
    assert "at most" in answer.json()["detail"]
    assert settings.MAX_REQUEST_LINE_BYTES + len("DELETE  HTTP/1.1") < 4094  # gunicorn's limit_request_line
    assert client_logged_in.get("/api/trials/?name=" + "x" * 100).status_code == 200
