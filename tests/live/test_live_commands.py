"""The runner's commands through the real API: start, events and steps, reward, completion, stalled."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from django.urls import reverse
from django.utils import timezone

from comparisons.models import SavedComparison
from tests.builders import build_side, make_user
from tests.live.helpers import event, runner_client, spine, step
from trials.models import Blob, RuntimeEvent, Step, Trial

pytestmark = pytest.mark.django_db

START = "/api/commands/start_benchmark_trial/"


@pytest.fixture
def runner(db):
    return runner_client()[0]


def start(runner, trial_id="trial-live-1") -> int:
    response = runner.post(START, spine(trial_id), format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()["trial_id"]


def test_starting_a_trial_twice_gives_the_same_trial(runner):
    first = runner.post(START, {**spine(), "attempt": 2, "timeoutSec": 300}, format="json")
    again = runner.post(START, spine(), format="json")
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["trial_id"] == again.json()["trial_id"]
    trial = Trial.objects.get(pk=first.json()["trial_id"])
    assert (trial.status, trial.attempt, trial.task.name, trial.configuration.key) == (
        "running",
        2,
        "fix-readme",
        "candidate-live",
    )
    assert list(trial.events.values_list("type", flat=True)) == ["benchmark.trial.started"]


def test_a_start_without_a_trial_id_is_refused_by_name(runner):
    response = runner.post(START, {"benchmark": {"taskId": "x"}}, format="json")
    assert response.status_code == 400 and "benchmark.trialId" in response.json()


def test_a_viewer_may_not_start_trials_and_anonymous_callers_are_refused(client, db):
    client.force_login(make_user("vic", "viewer"))
    assert client.post(START, spine(), content_type="application/json").status_code == 403
    client.logout()
    assert client.post(START, spine(), content_type="application/json").status_code == 401


def test_events_and_steps_are_kept_once_and_in_order(runner):
    pk = start(runner)
    url = f"/api/trials/{pk}/events/"
    body = {"events": [event(3), event(1), event(2)], "steps": [step(2), step(1, "user")]}
    first = runner.post(url, body, format="json").json()
    again = runner.post(url, {"events": [event(2), event(4)], "steps": [step(2), step(3)]}, format="json").json()
    assert (first["events"], first["steps"], first["duplicates"]) == (3, 2, 0)
    assert (again["events"], again["steps"], again["duplicates"]) == (1, 1, 2)
    trial = Trial.objects.get(pk=pk)
    events = [
        e for e in trial.events.values_list("event_id", flat=True) if e.startswith("evt_") and "benchviewer" not in e
    ]
    assert events == ["evt_1", "evt_2", "evt_3", "evt_4"]  # by sequence, not arrival
    assert list(Step.objects.filter(trial=trial).order_by("index").values_list("step_id", "source")) == [
        ("1", "user"),
        ("2", "agent"),
        ("3", "agent"),
    ]
    assert trial.step_count == 3
    page = runner.get(f"/api/trials/{pk}/steps/").json()
    assert [s["message"] for s in page["steps"]] == ["step 1 says hello", "step 2 says hello", "step 3 says hello"]
    # the ATIF of a running trial: its header and the steps so far
    atif = orjson.loads(b"".join(runner.get(f"/api/trials/{pk}/trajectory/").streaming_content))
    assert atif["schema_version"] == "ATIF-v1.6" and [s["step_id"] for s in atif["steps"]] == [1, 2, 3]


def test_a_bad_item_is_named_and_the_good_ones_are_kept(runner):
    pk = start(runner)
    body = {
        "events": [event(1), {"type": "tool.started"}, "nonsense", event(2)],
        "steps": [step(1), {"step_id": 0, "source": "agent", "message": ""}],
    }
    response = runner.post(f"/api/trials/{pk}/events/", body, format="json")
    assert response.status_code == 400
    data = response.json()
    assert [e["path"] for e in data["errors"]] == ["events[1]", "events[2]", "steps[1]"]
    assert "eventId" in data["errors"][0]["error"]
    assert (data["events"], data["steps"]) == (2, 1)
    assert RuntimeEvent.objects.filter(trial_id=pk, event_id__in=["evt_1", "evt_2"]).count() == 2


def test_a_json_lines_body_names_its_bad_lines(runner):
    pk = start(runner)
    lines = b"\n".join([orjson.dumps(event(1)), b"{not json", orjson.dumps({"type": "x"}), orjson.dumps(event(2))])
    response = runner.generic("POST", f"/api/trials/{pk}/events/", lines, content_type="application/x-ndjson")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == ["line 2", "line 3"]
    assert response.json()["events"] == 2


def test_an_event_no_derived_step_can_hold_is_named_in_the_answer_and_kept(runner):
    pk = start(runner)
    events = [
        event(1, "turn.submitted", text="Fix the typo."),
        event(2, "user.message", text="guessed: not a profile type"),
        event(3, "model.completed", text="Done."),
        event(4, "turn.submitted", prompt="guessed: not a field the user step reads"),
        event(5, "permission.requested", toolName="bash"),
        event(6, "runtime.warning", message="slow disk"),
    ]
    response = runner.post(f"/api/trials/{pk}/events/", {"events": events}, format="json")
    assert response.status_code == 200 and response.json()["events"] == 6
    unplaced = response.json()["unplaced"]
    assert [(u["path"], u["type"]) for u in unplaced] == [
        ("events[1]", "user.message"),
        ("events[3]", "turn.submitted"),
    ]
    assert "for a step, send turn.submitted" in unplaced[0]["why"]
    assert "payload.text" in unplaced[1]["why"]
    assert RuntimeEvent.objects.filter(trial_id=pk, type="user.message").exists()  # kept all the same


def test_an_unplaced_line_of_a_json_lines_body_is_named_by_its_line(runner):
    pk = start(runner)
    lines = b"\n".join(
        [orjson.dumps(event(1, "turn.submitted", text="hi")), b"", orjson.dumps(event(2, "llm.response"))]
    )
    response = runner.generic("POST", f"/api/trials/{pk}/events/", lines, content_type="application/x-ndjson")
    assert response.status_code == 200
    assert [(u["path"], u["type"]) for u in response.json()["unplaced"]] == [("line 3", "llm.response")]
    bad = b"\n".join([b"", orjson.dumps({"type": "x"}), orjson.dumps(event(3))])
    response = runner.generic("POST", f"/api/trials/{pk}/events/", bad, content_type="application/x-ndjson")
    assert [e["path"] for e in response.json()["errors"]] == ["line 2"]  # (a blank line counts as a line)


def test_reward_and_completion_write_their_events_and_finish_the_trial(runner):
    pk = start(runner)
    runner.post(f"/api/trials/{pk}/events/", {"steps": [step(1, "user"), step(2)]}, format="json")
    reward = runner.post(
        "/api/commands/record_benchmark_reward/",
        {
            "benchmark": {"trialId": "trial-live-1"},
            "reward": 1,
            "criteria": [{"name": "tests-pass", "score": 1}],
            "verifierStatus": "passed",
        },
        format="json",
    )
    assert reward.status_code == 200, reward.content
    assert reward.json()["event"]["type"] == "benchmark.reward.recorded"
    done = runner.post(
        "/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "completed"}, format="json"
    )
    assert done.status_code == 200 and done.json()["status"] == "passed"
    trial = Trial.objects.get(pk=pk)
    assert (trial.reward, trial.status, list(trial.criteria.values_list("name", flat=True))) == (
        1.0,
        "passed",
        ["tests-pass"],
    )
    assert set(trial.events.values_list("type", flat=True)) >= {
        "benchmark.reward.recorded",
        "benchmark.trial.completed",
    }
    # finished: the trajectory is a stored file, served like an imported one
    trajectory = trial.trajectories.get()
    assert trajectory.blob is not None and b'"step_id":2' in trajectory.blob.read()


def test_a_failed_completion_records_its_category(runner):
    pk = start(runner)
    response = runner.post(
        "/api/commands/complete_benchmark_trial/",
        {"trial_id": pk, "status": "failed", "failureCategory": "stream-stuck", "reason": "no output for 5 min"},
        format="json",
    )
    assert response.json()["event"]["type"] == "benchmark.trial.failed"
    trial = Trial.objects.get(pk=pk)
    assert (trial.status, trial.failure_category, trial.exception_message) == (
        "failed",
        "stream-stuck",
        "no output for 5 min",
    )
    bad = runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "maybe"}, format="json")
    assert bad.status_code == 400 and "status" in bad.json()


def test_a_silent_running_trial_is_stalled_until_it_completes(runner, client_logged_in, settings):
    settings.LIVE_STALL_SECONDS = 60
    pk = start(runner)
    job = Trial.objects.get(pk=pk).job
    assert runner.get(f"/api/trials/{pk}/live/").json()["stalled"] is False
    page = client_logged_in.get(reverse("trial-detail", args=[pk])).content.decode()
    assert '<span class="badge running" id="trial-status">running</span>' in page and " hidden>stalled<" in page
    Trial.objects.filter(pk=pk).update(live_seen_at=timezone.now() - timedelta(seconds=61))
    assert runner.get(f"/api/trials/{pk}/live/").json()["stalled"] is True
    page = client_logged_in.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "1 running" in page and "1 stalled" in page
    page = client_logged_in.get(reverse("trial-detail", args=[pk])).content.decode()
    assert 'id="live-status" class="badge stalled"' in page
    assert '<span class="badge stalled" id="trial-status"' in page  # the title's badge, not only the live panel
    assert 'id="header-stalled" title="no report for a while: the runner may be gone">stalled<' in page  # header
    runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "completed"}, format="json")
    live = runner.get(f"/api/trials/{pk}/live/").json()
    assert (live["stalled"], live["status"]) == (False, "passed")
    page = client_logged_in.get(reverse("trial-detail", args=[pk])).content.decode()
    assert '<span class="badge passed" id="trial-status">passed</span>' in page and "badge stalled" not in page
    page = client_logged_in.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "stalled" not in page and "running" not in page


def test_the_live_endpoint_returns_the_steps_after_the_last_one_shown(runner):
    pk = start(runner)
    runner.post(f"/api/trials/{pk}/events/", {"steps": [step(n) for n in range(1, 6)]}, format="json")
    data = runner.get(f"/api/trials/{pk}/live/?after=3").json()
    assert [s["number"] for s in data["steps"]] == [4, 5] and data["step_count"] == 5


def test_comparing_runs_saves_the_comparison_event(runner):
    base = build_side("base", {f"t{i}": [0.0 if i < 4 else 1.0, 1.0] for i in range(12)}, role="baseline")
    cand = build_side("cand", {f"t{i}": [1.0, 1.0] for i in range(12)}, role="candidate")
    body = {"baseline": base.pk, "candidate": cand.pk}
    response = runner.post("/api/commands/compare_benchmark_runs/", body, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["event"]["type"] == "benchmark.comparison.completed"
    assert data["event"]["eventId"] == SavedComparison.objects.get().event_id
    assert data["event"]["comparison"]["decision"] == "promote"  # every task better, none worse
    assert data["comparison"]["status"] == "done" and data["comparison"]["id"]
    assert runner.post("/api/commands/compare_benchmark_runs/", {"baseline": base.pk}, format="json").status_code == 400


def test_a_request_of_too_many_items_is_refused_whole(runner, settings):
    settings.LIVE_MAX_ITEMS = 3
    pk = start(runner)
    response = runner.post(f"/api/trials/{pk}/events/", {"events": [event(n) for n in range(1, 5)]}, format="json")
    assert response.status_code == 400 and "at most 3" in response.json()["errors"][0]["error"]
    assert not RuntimeEvent.objects.filter(trial_id=pk, event_id="evt_1").exists()


def test_steps_sent_after_the_completion_are_refused_naming_them_and_nothing_stored_changes(runner):
    pk = start(runner)
    runner.post(f"/api/trials/{pk}/events/", {"steps": [step(1, "user")]}, format="json")
    runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "completed"}, format="json")
    again = runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "failed"}, format="json")
    assert again.json()["status"] == "passed"  # the first completion stands
    trajectory = Trial.objects.get(pk=pk).trajectories.get()
    stored = trajectory.blob.read()
    late = runner.post(
        f"/api/trials/{pk}/events/", {"events": [event(9)], "steps": [step(1, "user"), step(2)]}, format="json"
    )
    assert late.status_code == 409
    assert late.json()["errors"] == [
        {"path": "steps[1]", "error": f"trial {pk} is passed: a step comes before its completion, not after"}
    ]
    trajectory.refresh_from_db()
    assert trajectory.blob.read() == stored and trajectory.step_count == 1
    assert not Trial.objects.get(pk=pk).events.filter(event_id="evt_9").exists()  # the POST is refused whole
    retry = runner.post(f"/api/trials/{pk}/events/", {"steps": [step(1, "user")]}, format="json")
    assert retry.status_code == 200 and retry.json()["duplicates"] == 1  # a retry of what it holds is no news


def test_a_completed_trial_gets_the_permission_decisions_its_events_record(runner):
    pk = start(runner)
    ids = {"actionId": "act_1", "toolCallId": "call_1"}
    events = [
        {**event(1, "action.required", actionType="tool_permission", toolName="write_file"), **ids},
        {**event(2, "action.resolved", decision="deny", decidedBy="reviewer"), **ids},
        {**event(3, "tool.started", toolName="write_file"), **ids, "stepId": "2"},
    ]
    runner.post(f"/api/trials/{pk}/events/", {"events": events}, format="json")
    runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "completed"}, format="json")
    decision = Trial.objects.get(pk=pk).permissions.get()
    assert (decision.action_id, decision.decision, decision.side_effect_after_denial) == ("act_1", "deny", True)


def test_each_post_of_steps_writes_only_its_steps_and_the_completion_leaves_one_copy(runner):
    pk = start(runner)
    for n in range(1, 6):
        runner.post(f"/api/trials/{pk}/events/", {"steps": [step(n)]}, format="json")
        last = Step.objects.get(trial_id=pk, index=n - 1)
        assert last.segment.size == last.size  # the POST's own step, not the trajectory again
    trajectory = Trial.objects.get(pk=pk).trajectories.get()
    assert [s.raw["step_id"] for s in trajectory.steps.order_by("index")] == [1, 2, 3, 4, 5]
    assert Blob.objects.count() == 5
    runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": "completed"}, format="json")
    trajectory.refresh_from_db()
    assert Blob.objects.count() == 1 and Blob.objects.get().pk == trajectory.blob_id == trajectory.step_bodies_id
    assert not Step.objects.filter(trial_id=pk, segment__isnull=False).exists()
    assert [s.raw["step_id"] for s in trajectory.steps.order_by("index")] == [1, 2, 3, 4, 5]  # served from the file
    assert [s["step_id"] for s in orjson.loads(trajectory.blob.read())["steps"]] == [1, 2, 3, 4, 5]
