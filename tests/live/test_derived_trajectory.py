"""ATIF from events (issue 26, Must 5): a trial with runtime events and no trajectory gets one, labelled derived."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import orjson
from django.core.management import call_command
from django.urls import reverse
from jsonschema import Draft202012Validator

from tests.factories import TrialFactory
from tests.live.helpers import runner_client, runtime_events, spine
from trials.ingest.formats.atif_checks import validate_header, validate_step
from trials.live.derive import derive_trajectory
from trials.models import RuntimeEvent, Trial

ATIF_SCHEMA = Path("/work/shared/spec/harbor-0.25/atif-trajectory.schema.json")


def schema_errors(trajectory: dict) -> list[str]:
    validator = Draft202012Validator(orjson.loads(ATIF_SCHEMA.read_bytes()))
    return [e.message for e in validator.iter_errors(trajectory)]


def test_events_become_user_agent_steps_with_tool_calls_and_observations():
    atif = derive_trajectory(runtime_events(), session_id="sess_1", agent_name="lime")
    steps = atif["steps"]
    assert [(s["step_id"], s["source"]) for s in steps] == [(1, "user"), (2, "agent"), (3, "agent")]
    assert steps[0]["message"] == "Fix the README typo."
    assert steps[1]["reasoning_content"] == "Read the file first."
    assert steps[1]["tool_calls"] == [
        {"tool_call_id": "call_1", "function_name": "read_file", "arguments": {"path": "README.md"}}
    ]
    assert steps[1]["observation"] == {"results": [{"source_call_id": "call_1", "content": "# Helo world"}]}
    assert steps[1]["metrics"] == {"prompt_tokens": 120, "completion_tokens": 30}
    assert atif["extra"] == {"derived_from": "runtime events", "events_used": 6, "events_total": 7}
    # Harbor's schema, and the rules it cannot express (as atif_checks reads them)
    assert schema_errors(atif) == []
    problems = validate_header(atif, "derived") + [p for i, s in enumerate(steps) for p in validate_step(s, i, "d")]
    assert [p.message for p in problems if p.severity == "error"] == []


def test_a_trial_completed_with_events_and_no_steps_gets_a_derived_trajectory(db, client_logged_in):
    runner = runner_client()[0]
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    assert runner.post(f"/api/trials/{pk}/events/", {"events": runtime_events()}, format="json").status_code == 200
    runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "completed"}, format="json")
    trial = Trial.objects.get(pk=pk)
    trajectory = trial.trajectories.get()
    assert trajectory.derived and trajectory.step_count == 3 and trial.step_count == 3
    served = orjson.loads(b"".join(client_logged_in.get(f"/api/trials/{pk}/trajectory/").streaming_content))
    assert schema_errors(served) == [] and served["extra"]["derived_from"] == "runtime events"
    detail = client_logged_in.get(f"/api/trials/{pk}/").json()
    assert [t["derived"] for t in detail["trajectories"]] == [True]
    page = client_logged_in.get(reverse("trial-detail", args=[pk])).content.decode()
    assert 'id="derived-note"' in page and "read_file" in page


def test_the_command_derives_a_trajectory_for_an_imported_trial_with_events_only(db):
    trial = TrialFactory()
    for raw in runtime_events():
        RuntimeEvent.objects.create(trial=trial, type=raw["type"], event_id=raw["eventId"], raw=raw)
    untouched = TrialFactory()  # no events: nothing to derive
    out = StringIO()
    call_command("derive_trajectories", stdout=out)
    assert "1 trajectory derived" in out.getvalue()
    assert trial.trajectories.get().derived and not untouched.trajectories.exists()
    call_command("derive_trajectories", stdout=StringIO())  # again: it has one now
    assert trial.trajectories.count() == 1
