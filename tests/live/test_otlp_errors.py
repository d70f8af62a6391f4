"""Every error of `POST /v1/traces` is an OTLP Status in the request's encoding (the OTLP/HTTP
specification): the view's, DRF's, the body limits' and the server's own 503 in an outage."""

from __future__ import annotations

import orjson
import pytest
from django.db import close_old_connections, connection
from django.test import Client
from google.rpc import status_pb2

from core.locks import own_connection
from tests.live.helpers import runner_client
from trials.models import Trial

PROTOBUF = "application/x-protobuf"


def status_of(answer) -> tuple[int, str]:
    """(code, message) of an OTLP Status body, protobuf or JSON by its Content-Type."""
    if answer["Content-Type"] == PROTOBUF:
        status = status_pb2.Status()
        status.ParseFromString(answer.content)
        return status.code, status.message
    assert answer["Content-Type"] == "application/json"
    body = orjson.loads(answer.content)
    return body["code"], body["message"]


@pytest.fixture
def token(transactional_db) -> str:
    return runner_client()[1]


@pytest.mark.parametrize("content_type", [PROTOBUF, "application/json"])
def test_an_outage_is_a_503_otlp_status_with_retry_after_not_an_html_page(
    token, database_unreachable, fresh_outage, content_type
):
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token}")
    answer = client.post("/v1/traces", b"{}" if content_type != PROTOBUF else b"", content_type=content_type)
    assert answer.status_code == 503 and answer["Retry-After"] == "1", answer.content
    code, message = status_of(answer)
    assert code == 14 and "unreachable" in message  # UNAVAILABLE: an exporter retries it


@pytest.mark.parametrize("content_type", [PROTOBUF, "application/json"])
def test_drfs_and_the_limits_refusals_are_otlp_statuses_too(db, content_type, settings):
    client = Client()
    answer = client.post("/v1/traces", b"{}", content_type=content_type)
    assert answer.status_code == 401 and answer.has_header("WWW-Authenticate")
    assert status_of(answer)[0] == 16  # UNAUTHENTICATED
    _, token = runner_client()
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    settings.OTLP_MAX_BODY_BYTES = 10
    answer = client.post("/v1/traces", b"x" * 11, content_type=content_type)
    code, message = status_of(answer)
    assert answer.status_code == 413 and code == 8 and "10 bytes" in message
    answer = client.post("/v1/traces", b"{}", content_type="text/plain")
    assert answer.status_code == 415 and status_of(answer)[1].startswith("POST /v1/traces: ")


def test_a_body_of_more_spans_than_the_request_path_writes_in_time_is_refused_whole(db, settings):
    _, token = runner_client()
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    settings.OTLP_MAX_SPANS_PER_REQUEST = 3
    chat = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]
    spans = [
        {"traceId": "ab" * 16, "spanId": f"{i:016x}", "name": "chat", "startTimeUnixNano": "1", "attributes": chat}
        for i in range(4)
    ]

    def body(of: list) -> bytes:
        return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": of}]}]})

    answer = client.post("/v1/traces", body(spans), content_type="application/json")
    code, message = status_of(answer)
    assert answer.status_code == 413 and code == 8 and "4 spans in one body, over the limit of 3" in message
    assert Trial.objects.count() == 0  # nothing stored
    answer = client.post("/v1/traces", body(spans[:3]), content_type="application/json")
    assert answer.status_code == 200 and Trial.objects.count() == 1  # at the limit: written


def test_a_kept_connection_is_not_checked_first_and_one_the_database_dropped_costs_one_batch_a_503(
    transactional_db, fresh_outage, settings, monkeypatch
):
    """A batch makes no `SELECT 1` first (Django's health check, a round trip): after a database restart
    its batch is a 503, which an exporter sends again, and the broken connection is closed after it."""
    if connection.vendor != "postgresql":
        pytest.skip("a kept connection the server drops is PostgreSQL's")
    settings.IMPORTS_IN_THREAD = False
    _, token = runner_client()
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token}")
    usable, checks = connection.is_usable, []
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append(1) is None and usable())
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 600)  # (kept between requests, as deployed)

    def batch(n: int) -> int:
        span = {"traceId": "ab" * 16, "spanId": f"{n + 1:016x}", "name": "chat"}
        body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
        status = client.post("/v1/traces", orjson.dumps(body), content_type="application/json").status_code
        close_old_connections()  # (the end of a request, which the test client skips)
        return status

    assert batch(1) == 200
    assert client.get("/api/trials/").status_code == 200 and len(checks) == 1  # (another view checks it)
    close_old_connections()
    assert batch(2) == 200 and len(checks) == 1
    with own_connection() as other, other.cursor() as cursor:  # (the server restarted: the connection gone)
        cursor.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    assert batch(3) == 503 and connection.connection is None  # (checked once it failed, and closed)
    assert batch(4) == 200 and Trial.objects.count() == 1
