"""A live trial goes through the importer's redaction: a redacted item a step carries is withheld
on every surface, whichever of the redaction and the step is posted first (issue 31)."""

from __future__ import annotations

import io
import json
import zipfile

import orjson
import pytest

from tests.imports.export_helpers import URL as EXPORT_URL
from tests.live.helpers import event, runner_client, spine, step
from trials.models import Blob, RuntimeEvent, StepText, ToolCall, Trial
from trials.storage.backend import blob_storage

# (transactional: a released blob's file is deleted once its transaction commits)
pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "LEAKCANARY-LIVE"
ITEM = {"item_id": "item-1", "content": SECRET}
REDACTION = {
    "type": "context.redaction.applied",
    "eventId": "evt_redaction",
    "sequence": 5,
    "sessionId": "sess_1",
    "timestamp": "2026-05-17T09:00:05Z",
    "payload": {"redaction_id": "red_1", "item_id": "item-1", "reason": "pii"},
}


def carrying_step() -> dict:
    """An agent step whose tool call and whose message (as JSON text) carry the item."""
    return {
        "step_id": 2,
        "source": "agent",
        "message": f"using the context {json.dumps(ITEM)}",
        "tool_calls": [{"tool_call_id": "c1", "function_name": "use_context", "arguments": dict(ITEM)}],
        "observation": {"results": [{"source_call_id": "c1", "content": "noted the context"}]},
    }


def post(runner, pk: int, body: dict) -> None:
    response = runner.post(f"/api/trials/{pk}/events/", body, format="json")
    assert response.status_code == 200, response.content


ORDERS = {
    "redaction first": [{"events": [REDACTION]}, {"steps": [step(1, "user"), carrying_step()]}],
    "step first": [{"steps": [step(1, "user"), carrying_step()]}, {"events": [event(3, "tool.progress"), REDACTION]}],
    "both in one POST": [{"events": [REDACTION], "steps": [step(1, "user"), carrying_step()]}],
}


def surfaces(client, pk: int) -> dict[str, bytes]:
    """What a reader gets of the trial: its page and tabs, the steps API, the ATIF download, search."""
    bodies = {
        tab: client.get(f"/trials/{pk}/", {"tab": tab}).content
        for tab in ("trajectory", "events", "context", "logs", "exception")
    }
    bodies["steps api"] = client.get(f"/api/trials/{pk}/steps/").content
    bodies["step api"] = client.get(f"/api/trials/{pk}/steps/2/").content
    bodies["trial search api"] = client.get(f"/api/trials/{pk}/search/", {"q": "leakcanary"}).content
    bodies["search api"] = client.get("/api/search/", {"q": "leakcanary"}).content
    bodies["search page"] = client.get("/search/", {"q": "leakcanary"}).content
    download = client.get(f"/api/trials/{pk}/trajectory/")
    if download.status_code == 200:
        bodies["atif download"] = b"".join(download.streaming_content)
    return bodies


def stored_bytes() -> bytes:
    """Every blob's bytes as stored: segments, compacted files, scrubbed copies."""
    storage = blob_storage()
    return b"".join(blob.read() for blob in Blob.objects.all()) + b"".join(
        storage.open(name).read() for name in _files(storage, "")
    )


def _files(storage, folder: str) -> list[str]:
    folders, files = storage.listdir(folder or ".")
    found = [f"{folder}{name}" for name in files]
    for name in folders:
        found += _files(storage, f"{folder}{name}/")
    return found


def assert_withheld(client, pk: int) -> dict[str, bytes]:
    bodies = surfaces(client, pk)
    for name, body in bodies.items():
        assert SECRET.encode() not in body, name  # (the needle a search echoes is lower-case)
    assert client.get(f"/api/trials/{pk}/search/", {"q": "leakcanary"}).json()["matches"] == []
    assert client.get("/api/search/", {"q": "leakcanary"}).json()["results"] == []
    assert SECRET.encode() not in stored_bytes()
    assert not [row for row in ToolCall.objects.filter(trial_id=pk) if SECRET in json.dumps(row.arguments)]
    assert not [e for e in RuntimeEvent.objects.filter(trial_id=pk) if SECRET in json.dumps([e.raw, e.payload])]
    assert not StepText.objects.filter(trial_id=pk, text__icontains="leakcanary").exists()
    return bodies


@pytest.mark.parametrize("order", list(ORDERS))
def test_a_redacted_item_a_live_step_carries_is_withheld_everywhere_whichever_comes_first(client_logged_in, order):
    runner, _ = runner_client()
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    for body in ORDERS[order]:
        post(runner, pk, body)

    running = assert_withheld(client_logged_in, pk)  # while it runs
    assert b"[redacted]" in running["step api"]
    assert StepText.objects.filter(trial_id=pk).count() == 2  # its steps are in the index
    assert client_logged_in.get("/api/search/", {"q": "use_context"}).json()["results"]  # and search finds them

    completion = {"trial_id": pk, "status": "completed"}
    done = runner.post("/api/commands/complete_benchmark_trial/", completion, format="json")
    assert done.status_code == 200, done.content
    bodies = assert_withheld(client_logged_in, pk)  # and once complete
    trial = Trial.objects.get(pk=pk)
    trajectory = trial.trajectories.get()
    assert trajectory.withheld
    assert orjson.loads(bodies["atif download"])["steps"][1]["tool_calls"][0]["arguments"] == {
        "item_id": "item-1",
        "content": "[redacted]",
    }
    response = client_logged_in.get(EXPORT_URL, {"trial": pk})
    assert response.status_code == 200, response.content
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    exported = {name: archive.read(name) for name in archive.namelist()}
    assert any(name.endswith("trajectory.json") for name in exported)
    for name, data in exported.items():
        assert SECRET.encode() not in data, name


def test_a_redaction_posted_after_the_completion_scrubs_the_trials_file_too(client_logged_in):
    runner, _ = runner_client()
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    post(runner, pk, {"steps": [step(1, "user"), carrying_step()]})
    runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "completed"}, format="json")
    assert SECRET.encode() in Trial.objects.get(pk=pk).trajectories.get().blob.read()  # not redacted yet

    post(runner, pk, {"events": [REDACTION]})
    assert_withheld(client_logged_in, pk)
    trajectory = Trial.objects.get(pk=pk).trajectories.get()
    assert trajectory.blob_id == trajectory.step_bodies_id and Blob.objects.count() == 1  # one scrubbed copy
    assert [s["step_id"] for s in orjson.loads(trajectory.blob.read())["steps"]] == [1, 2]


def test_a_redaction_that_names_no_item_is_refused_and_nothing_of_its_post_is_stored():
    runner, _ = runner_client()
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    post(runner, pk, {"steps": [step(1, "user")]})
    nameless = {**REDACTION, "payload": {"redaction_id": "red_2", "item_id": " ", "reason": "pii"}}
    response = runner.post(
        f"/api/trials/{pk}/events/", {"events": [event(1), nameless], "steps": [carrying_step()]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "path": "events[1]",
            "error": "a redaction must name the item it redacts (payload.item_id, target_ref or item_refs); "
            "none is named",
        }
    ]
    trial = Trial.objects.get(pk=pk)
    assert trial.step_count == 1 and trial.events.count() == 1  # only what was there: its start
    assert SECRET.encode() not in stored_bytes()


def test_a_failed_live_trial_joins_its_failure_cluster_when_it_completes():
    runner, _ = runner_client()
    pks = []
    for name in ("trial-a", "trial-b"):
        pk = runner.post("/api/commands/start_benchmark_trial/", spine(name), format="json").json()["trial_id"]
        post(runner, pk, {"steps": [step(1, "user")]})
        failure = {"trial_id": pk, "status": "failed", "failureCategory": "tool-result-missing", "reason": "no result"}
        assert runner.post("/api/commands/complete_benchmark_trial/", failure, format="json").status_code == 200
        pks.append(pk)
    a, b = Trial.objects.filter(pk__in=pks).order_by("pk")
    assert a.cluster_id is not None and a.cluster_id == b.cluster_id  # without sign_failures being run
