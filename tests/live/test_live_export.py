"""A trial written live, exported and imported into an empty instance (or the one it came from), is the same trial."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.management import call_command

from tests.builders import HANG_GUARD, import_path, make_user
from tests.imports.export_helpers import exported, members, same_trial, stored_counts
from tests.live.helpers import event, runner_client, runtime_events, spine, step
from trials.models import RuntimeEvent, Trial
from trials.models.qc import AuditEntry, QCItem

# (the empty instance is a flush: on PostgreSQL, outside a transaction)
pytestmark = pytest.mark.django_db(transaction=True)
FINISHED = ("benchmark.trial.completed", "benchmark.trial.failed")


def file_qc_item(client, trial_pk: int) -> dict:
    """A QC item filed on the trial through the triage API, by a triager."""
    client.force_login(make_user("tina", "triager"))
    body = {"kind": "release-blocker", "category": "runtime", "severity": "P0", "code": "stream-stuck",
            "evidence_refs": ["step:2"], "note": "stuck after the tool call"}  # fmt: skip
    response = client.post(f"/api/trials/{trial_pk}/feedback/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def live_trial_with_steps(client) -> Trial:
    """Started, two POSTs of events and ATIF steps, a reward with a criterion, a QC item, completed: by the API."""
    runner = runner_client()[0]
    start = {**spine(), "attempt": 2, "agent": {"name": "claude-code", "version": "2.1", "model_name": "opus"}}
    pk = runner.post("/api/commands/start_benchmark_trial/", start, format="json").json()["trial_id"]
    sent = {"events": [event(n, "tool.progress", note=f"n{n}") for n in (1, 2)], "steps": [step(1, "user"), step(2)]}
    assert runner.post(f"/api/trials/{pk}/events/", sent, format="json").status_code == 200
    more = {"events": [event(3, "runtime.warning", message="slow disk")], "steps": [step(3)]}
    assert runner.post(f"/api/trials/{pk}/events/", more, format="json").status_code == 200
    reward = {"benchmark": {"trialId": "trial-live-1"}, "reward": 0.75,
              "criteria": [{"name": "tests-pass", "score": 0.75}], "verifierStatus": "passed"}  # fmt: skip
    assert runner.post("/api/commands/record_benchmark_reward/", reward, format="json").status_code == 200
    file_qc_item(client, pk)
    done = {"trial_id": pk, "status": "completed"}
    assert runner.post("/api/commands/complete_benchmark_trial/", done, format="json").status_code == 200
    return Trial.objects.get(pk=pk)


def events_only_trial() -> Trial:
    """A live trial of runtime events and no steps, failed by its runner: its trajectory is derived."""
    runner = runner_client()[0]
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    assert runner.post(f"/api/trials/{pk}/events/", {"events": runtime_events()}, format="json").status_code == 200
    done = {"trial_id": pk, "status": "failed", "failureCategory": "timeout", "reason": "no output for 5 min"}
    assert runner.post("/api/commands/complete_benchmark_trial/", done, format="json").status_code == 200
    return Trial.objects.get(pk=pk)


def export_to(client, trial: Trial, path) -> dict:
    """The trial's export zip written to `path`; its members."""
    archive = exported(client, trial)
    path.write_bytes(archive.fp.getvalue())  # type: ignore[union-attr]
    return members(archive)


def flush_and_import(client, zipped) -> Trial:
    """The trial the zip gives an empty instance, read by a reviewer there."""
    call_command("flush", interactive=False)  # an empty instance
    assert not Trial.objects.exists()
    again = import_path(zipped)
    assert again.status == "done", again.problems
    assert [p for p in again.problems if p["severity"] == "error"] == []
    client.force_login(make_user("rita", "reviewer"))
    return Trial.objects.get()


def test_a_live_trial_with_steps_a_reward_and_a_qc_item_is_the_same_trial_after_export_and_import(client, tmp_path):
    trial = live_trial_with_steps(client)
    assert not trial.trajectories.get().derived  # sent as ATIF steps, not made from events
    before = same_trial(client, trial)
    assert client.get(f"/api/trials/{trial.pk}/").json()["source"] == "live"
    files = export_to(client, trial, tmp_path / "live-export.zip")

    again = flush_and_import(client, tmp_path / "live-export.zip")

    assert same_trial(client, again) == before
    assert before["configuration"][:2] == ("candidate-live", "candidate")
    assert before["dataset"] == ("lime-tasks", "2026-05")
    assert before["job"][:3] == ("live:jobs/live-candidate", "live-candidate", "live") and before["attempt"] == 2
    assert before["ids"][2] == spine()["runtimeCorrelation"] and before["status"][0] == "partial"  # (0.75)
    assert [s["message"] for s in before["atif"]["steps"]] == [f"step {n} says hello" for n in (1, 2, 3)]
    assert before["criteria"] == [("tests-pass", 0.75, None, "", [])] and len(before["events"]) >= 6
    # The QC item is a triage item again (in the queue, audited), not a document of the trial.
    assert before["qc_items"][0][:4] == ("release-blocker", "runtime", "stream-stuck", "P0")
    assert "qc_items" not in again.documents and b"stuck after the tool call" in files["qc-items.json"]
    assert AuditEntry.objects.filter(item__trial=again, action="imported from an export").count() == 1
    assert again.source == "live (imported from an export)"
    assert client.get(f"/api/trials/{again.pk}/").json()["source"] == "live (imported from an export)"
    assert "live (imported from an export)" in client.get(f"/trials/{again.pk}/").content.decode()


def test_an_events_only_live_trial_is_the_same_trial_after_export_and_import(client, tmp_path):
    trial = events_only_trial()
    assert trial.trajectories.get().derived
    client.force_login(make_user("vic", "viewer"))
    before = same_trial(client, trial)
    export_to(client, trial, tmp_path / "events-export.zip")

    again = flush_and_import(client, tmp_path / "events-export.zip")

    assert same_trial(client, again) == before
    assert before["atif"]["extra"]["derived_from"] == "runtime events" and len(before["atif"]["steps"]) == 3
    assert {"benchmark.trial.started", "turn.submitted", "benchmark.trial.failed"} <= {e[0] for e in before["events"]}
    # The files have no reward and no exception type: the status and category are the runner's.
    assert before["status"] == ("timeout", "timeout", "", "no output for 5 min")
    assert again.source == "live (imported from an export)"


def test_a_bundle_imported_into_the_instance_it_came_from_changes_nothing(client, tmp_path):
    trial = live_trial_with_steps(client)
    before, counts = same_trial(client, trial), stored_counts()
    export_to(client, trial, tmp_path / "back-home.zip")

    imp = import_path(tmp_path / "back-home.zip")

    assert imp.status == "done", imp.problems
    assert [o["outcome"] for o in imp.outcomes if o["kind"] == "harbor-trial"] == ["already imported"]
    assert imp.problems == []  # (recognised as the same trial, not "imported before from other bytes")
    assert stored_counts() == counts and same_trial(client, trial) == before
    assert Trial.objects.get().source == "live"


def test_the_same_trial_imported_twice_from_two_exports_is_one_trial(client, tmp_path):
    trial = live_trial_with_steps(client)
    before = same_trial(client, trial)
    first = export_to(client, trial, tmp_path / "first.zip")
    second = export_to(client, trial, tmp_path / "second.zip")
    assert first["export-manifest.json"] != second["export-manifest.json"]  # (two exports: other bytes)

    again = flush_and_import(client, tmp_path / "first.zip")
    counts = stored_counts()
    imp = import_path(tmp_path / "second.zip")

    assert imp.status == "done" and imp.problems == []
    assert stored_counts() == counts and Trial.objects.get().pk == again.pk
    assert same_trial(client, again) == before


@pytest.mark.parametrize("runner_first", [True, False], ids=["runner-event-first", "command-first"])
def test_a_completion_that_repeats_an_earlier_one_is_stored_once(runner_first):
    runner = runner_client()[0]
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    own = {"events": [{**event(1, "benchmark.trial.completed", status="completed"), "eventId": "runner-done-1"}]}
    done = {"trial_id": pk, "status": "completed"}
    calls = [("/api/trials/{}/events/", own), ("/api/commands/complete_benchmark_trial/", done)]
    for url, body in calls if runner_first else reversed(calls):
        assert runner.post(url.format(pk), body, format="json").status_code == 200

    completions = RuntimeEvent.objects.filter(trial_id=pk, type__in=FINISHED)
    expected = "runner-done-1" if runner_first else f"evt_benchviewer_completed_{pk}"
    assert list(completions.values_list("event_id", flat=True)) == [expected]
    assert Trial.objects.get(pk=pk).status == "passed"  # (completed without a reward)
    assert not QCItem.objects.exists()


def test_a_runner_streaming_its_own_completion_then_pushing_complete_leaves_one(live_server, tmp_path):
    client, token = runner_client()
    pk = client.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    feed = tmp_path / "trial.jsonl"
    rows = [step(1, "user"), event(1), {**event(2, "benchmark.trial.completed", status="completed"), "eventId": "own"}]
    feed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    command = [sys.executable, "-m", "benchviewer_push", "--server", live_server.url, "--token", token,
               "stream", str(feed), "--trial", str(pk), "--complete", "completed"]  # fmt: skip

    finished = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD)

    assert finished.returncode == 0, finished.stderr
    completions = RuntimeEvent.objects.filter(trial_id=pk, type__in=FINISHED)
    assert list(completions.values_list("event_id", flat=True)) == ["own"]
    assert Trial.objects.get(pk=pk).status == "passed"
