"""A trial written live, exported and imported into an empty instance, is the same trial (issue 26)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.builders import import_path, make_user
from tests.imports import test_trial_export as trial_export
from tests.live.helpers import event, runner_client, spine, step
from tests.live.test_derived_trajectory import runtime_events
from trials.models import Trial

# (the empty instance is a flush: on PostgreSQL, outside a transaction)
pytestmark = pytest.mark.django_db(transaction=True)


def file_qc_item(client, trial_pk: int) -> dict:
    """A QC item filed on the trial through the triage API, by a triager."""
    client.force_login(make_user("tina", "triager"))
    body = {"kind": "release-blocker", "category": "runtime", "severity": "P0", "code": "stream-stuck",
            "evidence_refs": ["step:2"], "note": "stuck after the tool call"}  # fmt: skip
    response = client.post(f"/api/trials/{trial_pk}/feedback/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def export_flush_and_import(client, trial: Trial, tmp_path) -> tuple[dict, list, Trial]:
    """What counts of the trial and its exported QC items; then the trial the zip gives an empty instance."""
    archive = trial_export.exported(client, trial)
    zipped = tmp_path / "live-export.zip"
    zipped.write_bytes(archive.fp.getvalue())  # type: ignore[union-attr]
    before = trial_export.what_counts(client, trial)
    qc = trial_export.orjson.loads(trial_export.members(archive)["qc-items.json"])["items"]

    call_command("flush", interactive=False)  # an empty instance
    assert not Trial.objects.exists()
    again = import_path(zipped)
    assert again.status == "done", again.problems
    assert [p for p in again.problems if p["severity"] == "error"] == []
    client.force_login(make_user("rita", "reviewer"))
    return before, qc, Trial.objects.get()


def test_a_live_trial_with_atif_steps_a_reward_and_a_qc_item_survives_export_and_import(client, tmp_path):
    runner = runner_client()[0]
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    sent = {"events": [event(n, "tool.progress", note=f"n{n}") for n in (1, 2)], "steps": [step(1, "user"), step(2)]}
    assert runner.post(f"/api/trials/{pk}/events/", sent, format="json").status_code == 200
    more = {"events": [event(3, "runtime.warning", message="slow disk")], "steps": [step(3)]}
    assert runner.post(f"/api/trials/{pk}/events/", more, format="json").status_code == 200
    reward = {"benchmark": {"trialId": "trial-live-1"}, "reward": 0.75,
              "criteria": [{"name": "tests-pass", "score": 0.75}], "verifierStatus": "passed"}  # fmt: skip
    assert runner.post("/api/commands/record_benchmark_reward/", reward, format="json").status_code == 200
    item = file_qc_item(client, pk)
    done = {"trial_id": pk, "status": "completed"}
    assert runner.post("/api/commands/complete_benchmark_trial/", done, format="json").status_code == 200
    trial = Trial.objects.get(pk=pk)
    assert not trial.trajectories.get().derived  # sent as ATIF steps, not made from events

    before, qc, again = export_flush_and_import(client, trial, tmp_path)

    assert [s["message"] for s in before["atif"]["steps"]] == ["step 1 says hello", "step 2 says hello",
                                                               "step 3 says hello"]  # fmt: skip
    assert before["reward"] == 0.75 and before["rewards"] and len(before["events"]) >= 4
    assert [(i["id"], i["code"], i["evidenceRefs"], i["note"]) for i in qc] == [
        (item["id"], "stream-stuck", [{"kind": "step", "ref": "2"}], "stuck after the tool call")
    ]
    assert trial_export.what_counts(client, again) == before
    assert again.documents.get("qc_items") == qc
    assert again.key == f"harbor:{trial.key}" and (trial.status, again.status) == ("failed", "failed")  # 0.75 < 1
    assert list(again.criteria.values_list("name", "score")) == [("tests-pass", 0.75)]


def test_a_live_trial_of_events_only_exports_its_derived_atif_and_imports_the_same(client, tmp_path):
    runner = runner_client()[0]
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    assert runner.post(f"/api/trials/{pk}/events/", {"events": runtime_events()}, format="json").status_code == 200
    done = {"trial_id": pk, "status": "failed", "failureCategory": "timeout", "reason": "no output for 5 min"}
    assert runner.post("/api/commands/complete_benchmark_trial/", done, format="json").status_code == 200
    trial = Trial.objects.get(pk=pk)
    assert trial.trajectories.get().derived
    client.force_login(make_user("vic", "viewer"))

    before, qc, again = export_flush_and_import(client, trial, tmp_path)

    assert before["atif"]["extra"]["derived_from"] == "runtime events" and len(before["atif"]["steps"]) == 3
    kinds = [e["type"] for e in before["events"]]
    assert qc == [] and len(kinds) == len(runtime_events()) + 2  # (and the start and completion events)
    assert {"benchmark.trial.started", "turn.submitted", "benchmark.trial.failed"} <= set(kinds)
    assert trial_export.what_counts(client, again) == before
    # The files have no reward and no exception: the manifest keeps the status and category the runner gave.
    assert (trial.status, trial.failure_category, trial.exception_message) == (
        "timeout",
        "timeout",
        "no output for 5 min",
    )
    assert (again.status, again.failure_category, again.exception_message) == (
        "timeout",
        "timeout",
        "no output for 5 min",
    )
