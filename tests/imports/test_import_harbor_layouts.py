"""Harbor layouts beyond the samples: multi-step trials, continuations, embedded subagents,
v1.8 content parts, and evidence joined from beside a trial or from a separate event file."""

from __future__ import annotations

import shutil

import orjson
import pytest
from jsonschema import Draft202012Validator

from tests.builders import ATIF_SCHEMA, REFERENCE, atif, good_steps, import_path, loose_run, write_trial
from trials.demo import write_job
from trials.models import Pack, PermissionDecision, RuntimeEvent, Step, Trajectory, Trial

pytestmark = pytest.mark.django_db


def v18_trajectory() -> dict:
    """Every optional ATIF feature up to v1.8 in one file."""
    data = atif(good_steps(), version="ATIF-v1.8")
    data["trajectory_id"] = "root-1"
    data["agent"]["tool_definitions"] = [
        {"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}}}
    ]
    data["agent"]["extra"] = {"harness": "test"}
    data["steps"][0]["message"] = [
        {"type": "text", "text": "look at this"},
        {"type": "image", "source": {"media_type": "image/png", "path": "images/screen.png"}},
        {"type": "audio", "source": {"media_type": "audio/wav", "path": "audio/note.wav", "duration_sec": 1.5}},
    ]
    data["steps"][1]["llm_call_count"] = 2
    data["steps"][1]["tool_calls"][0]["extra"] = {"latency_ms": 12}
    data["steps"][1]["observation"]["results"][0]["extra"] = {"exit_code": 0}
    data["steps"][1]["observation"]["results"].append(
        {"subagent_trajectory_ref": [{"trajectory_id": "sub-1", "extra": {"summary": "helper"}}]}
    )
    data["steps"].append({"step_id": 3, "source": "system", "message": "copied", "is_copied_context": True})
    data["continued_trajectory_ref"] = "trajectory.cont-1.json"
    data["final_metrics"] = {"total_prompt_tokens": 10, "total_steps": 3, "extra": {"service_tiers": ["std"]}}
    data["extra"] = {"custom": {"kept": True}}
    sub = atif([{"step_id": 1, "source": "agent", "message": "sub work"}], version="ATIF-v1.8")
    sub["trajectory_id"] = "sub-1"
    data["subagent_trajectories"] = [sub]
    return data


def test_every_atif_feature_up_to_v1_8_is_kept_and_exported_unchanged(tmp_path, client_logged_in):
    trial_dir = write_trial(tmp_path)
    data = v18_trajectory()
    (trial_dir / "agent" / "trajectory.json").write_bytes(orjson.dumps(data))
    continuation = atif(good_steps(), version="ATIF-v1.8")
    continuation["steps"][0]["is_copied_context"] = True
    (trial_dir / "agent" / "trajectory.cont-1.json").write_bytes(orjson.dumps(continuation))
    import_path(trial_dir)
    main, sub, cont = Trajectory.objects.order_by("position")
    assert (main.role, sub.role, cont.role) == ("main", "subagent", "continuation")
    assert sub.trajectory_id == "sub-1" and sub.step_count == 1  # the embedded subagent, read on its own
    assert main.header["subagent_trajectories"] == data["subagent_trajectories"]
    assert main.agent["tool_definitions"] == data["agent"]["tool_definitions"]
    assert main.header["extra"] == data["extra"] and main.final_metrics == data["final_metrics"]
    assert [p for p in main.problems if p["severity"] == "error"] == []
    first = Step.objects.get(trajectory=main, index=0)
    assert "[image: images/screen.png]" in first.message_text and "[audio: audio/note.wav]" in first.message_text
    assert Step.objects.get(trajectory=main, index=1).llm_call_count == 2
    assert Step.objects.get(trajectory=main, index=2).is_copied_context
    assert Step.objects.filter(trajectory=cont, is_copied_context=True).count() == 1
    trial = Trial.objects.get()
    exported = orjson.loads(b"".join(client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").streaming_content))
    assert exported == data
    schema = orjson.loads(ATIF_SCHEMA.read_bytes())
    assert list(Draft202012Validator(schema).iter_errors(exported)) == []


def test_a_multi_step_trial_keeps_each_steps_trajectory_and_reward(tmp_path):
    trial_dir = write_trial(tmp_path)
    for name, reward in (("setup", 1.0), ("main", 0.5)):
        step_dir = trial_dir / "steps" / name
        (step_dir / "agent").mkdir(parents=True)
        (step_dir / "verifier").mkdir()
        (step_dir / "agent" / "trajectory.json").write_bytes(orjson.dumps(atif(good_steps())))
        (step_dir / "verifier" / "reward.txt").write_text(str(reward))
        (step_dir / "verifier" / "test-stdout.txt").write_text("ok")
    import_path(trial_dir)
    trial = Trial.objects.get()
    roles = list(trial.trajectories.values_list("role", "step_name"))
    assert roles == [("main", ""), ("step", "main"), ("step", "setup")]
    assert trial.provenance["step_rewards"] == {"main": {"reward": 0.5}, "setup": {"reward": 1.0}}
    assert "rewardRef" not in trial.refs and "harborVerifierStdoutRef" not in trial.refs  # a step's, not the trial's
    assert trial.step_count == 6


def test_each_trajectory_of_a_multi_step_trial_is_served_by_id(tmp_path, client_logged_in):
    trial_dir = write_trial(tmp_path)
    for name, message in (("setup", "set up"), ("main", "the main step")):
        (trial_dir / "steps" / name / "agent").mkdir(parents=True)
        steps = good_steps()
        steps[0]["message"] = message
        (trial_dir / "steps" / name / "agent" / "trajectory.json").write_bytes(orjson.dumps(atif(steps)))
    import_path(trial_dir)
    trial = Trial.objects.get()
    listed = client_logged_in.get(f"/api/trials/{trial.pk}/").json()["trajectories"]
    for entry in listed:
        served = b"".join(client_logged_in.get(entry["url"]).streaming_content)
        assert served == (tmp_path / entry["path"]).read_bytes()
    assert {orjson.loads((tmp_path / e["path"]).read_bytes())["steps"][0]["message"] for e in listed} >= {
        "set up",
        "the main step",
    }
    default = b"".join(client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").streaming_content)
    assert default == (trial_dir / "agent" / "trajectory.json").read_bytes()
    response = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/", {"trajectory": "x"})
    assert response.status_code == 400 and "trajectory" in response.json()  # an id is a whole number
    response = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/", {"trajectory": 10**6})
    assert response.status_code == 404 and response.json()["detail"] == f"trial {trial.pk} has no trajectory '1000000'"


def test_an_evidence_pack_beside_a_trial_folder_is_joined_to_it(tmp_path):
    trial_dir = write_trial(tmp_path / "upload", "tool-approval__AAAAAAA")
    pack = orjson.loads((REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json").read_bytes())
    pack["benchmark"]["trialId"] = trial_dir.name
    (tmp_path / "upload" / "evidence.json").write_bytes(orjson.dumps(pack))
    imp = import_path(tmp_path / "upload")
    assert [o["outcome"] for o in imp.outcomes] == ["imported", "imported"]
    trial = Trial.objects.get()
    assert trial.runtime_correlation["runId"] == pack["runtimeCorrelation"]["runId"]
    assert trial.benchmark["harborJobRef"] == pack["benchmark"]["harborJobRef"]
    assert trial.configuration.role == "candidate"
    assert trial.documents["evidence_pack"] == pack


def reference_evidence_pack(trial_id: str) -> dict:
    pack = orjson.loads((REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json").read_bytes())
    pack["benchmark"]["trialId"] = trial_id
    return pack


def import_with_evidence_pack(trial_dir, pack: dict, where: str):
    """The trial folder with the pack inside it, or the folder and then the pack beside it; the pack's import."""
    if where == "inside the trial folder":
        (trial_dir / "benchmark-trial-pack.json").write_bytes(orjson.dumps(pack))
        return import_path(trial_dir)
    import_path(trial_dir)
    (trial_dir.parent / "evidence.json").write_bytes(orjson.dumps(pack))
    return import_path(trial_dir.parent / "evidence.json")


@pytest.mark.parametrize("where", ["inside the trial folder", "beside it, imported later"])
def test_an_evidence_pack_naming_files_the_trial_folder_lacks_leaves_the_trial_incomplete(
    tmp_path, where, client_logged_in
):
    trial_dir = write_trial(tmp_path / "upload", "tool-approval__AAAAAAA", trajectory=False, manifest=False)
    pack = reference_evidence_pack(trial_dir.name)
    assert {"trajectoryRef", "rewardDetailsRef", "artifactManifestRef"} <= set(pack["refs"])
    imp = import_with_evidence_pack(trial_dir, pack, where)
    trial = Trial.objects.get()
    assert not trial.is_complete
    assert set(trial.missing) == {"trajectoryRef", "artifactManifestRef"}  # the reward details are there
    assert trial.refs["rewardDetailsRef"].endswith("verifier/reward-details.json")  # the folder's own file
    flagged = {p["json_path"] for p in imp.problems if "no readable file" in p["message"]}
    lacking = {"trajectoryRef", "artifactManifestRef", "rewardRef", "runtimeTranscriptRef", "harborVerifierStdoutRef"}
    assert flagged == {f"refs.{ref}" for ref in lacking}  # (its result.json backs harborTrialResultRef)
    assert not lacking & set(trial.refs)
    assert trial.documents["evidence_pack"]["refs"] == pack["refs"]  # the pack itself kept as written
    # The trial page shows the folder's own file for a ref, and what the pack said where that differs
    page = client_logged_in.get(f"/trials/{trial.pk}/").content.decode()
    refs = page.split('id="trial-refs"')[1].split("</dl>")[0]
    said = '<span class="muted claimed">· the evidence pack says</span> <code>{}</code>'
    own = trial.refs["rewardDetailsRef"]
    assert f"<dt>rewardDetailsRef</dt><dd><code>{own}</code> {said.format(pack['refs']['rewardDetailsRef'])}" in refs
    no_file = '<dt>trajectoryRef</dt><dd><span class="muted">no file of this trial</span> '
    assert no_file + said.format(pack["refs"]["trajectoryRef"]) in refs


@pytest.mark.parametrize("where", ["inside the trial folder", "beside it, imported later"])
def test_a_trial_folders_reward_stdout_and_runtime_events_back_the_evidence_packs_refs_to_them(
    tmp_path, where, client_logged_in
):
    trial_dir = write_trial(tmp_path / "upload", "tool-approval__AAAAAAA")
    (trial_dir / "verifier" / "reward.txt").write_text("1\n")
    (trial_dir / "verifier" / "test-stdout.txt").write_text("1 passed\n")
    event = {
        "type": "tool.call.completed",
        "sessionId": "sess_123",
        "runId": "run_123",
        "timestamp": "2026-01-01T00:00:00Z",
    }
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(event) + b"\n")
    pack = reference_evidence_pack(trial_dir.name)
    imp = import_with_evidence_pack(trial_dir, pack, where)
    trial = Trial.objects.get()
    assert trial.is_complete
    assert not [p for p in imp.problems if "counted as missing" in p["message"]]
    own = {
        "rewardRef": "verifier/reward.txt",
        "harborVerifierStdoutRef": "verifier/test-stdout.txt",
        "runtimeTranscriptRef": "agent/runtime-events.jsonl",
        "harborTrialResultRef": "result.json",
    }
    for ref, path in own.items():
        assert trial.refs[ref] == f"{trial_dir.name}/{path}"
    page = client_logged_in.get(f"/trials/{trial.pk}/").content.decode()
    refs = page.split('id="trial-refs"')[1].split("</dl>")[0]
    said = '<span class="muted claimed">· the evidence pack says</span> <code>{}</code>'
    assert (
        f"<dt>rewardRef</dt><dd><code>{trial.refs['rewardRef']}</code> {said.format(pack['refs']['rewardRef'])}" in refs
    )


@pytest.mark.parametrize("where", ["inside the trial folder", "beside it, imported later"])
def test_a_file_the_evidence_pack_names_by_its_container_path_backs_its_ref(tmp_path, where, client_logged_in):
    trial_dir = write_trial(tmp_path / "upload", "tool-approval__AAAAAAA")
    (trial_dir / "artifacts" / "runtime-transcript.json").write_bytes(b"{}")  # /logs/artifacts in the container
    pack = reference_evidence_pack(trial_dir.name)
    assert pack["refs"]["runtimeTranscriptRef"] == "/logs/artifacts/runtime-transcript.json"
    imp = import_with_evidence_pack(trial_dir, pack, where)
    trial = Trial.objects.get()
    assert trial.refs["runtimeTranscriptRef"] == f"{trial_dir.name}/artifacts/runtime-transcript.json"
    assert not [p for p in imp.problems if p.get("json_path") == "refs.runtimeTranscriptRef"]


def test_an_evidence_pack_imported_alone_is_a_trial_missing_every_file_it_names(tmp_path, client_logged_in):
    pack = reference_evidence_pack("trial-alone")
    (tmp_path / "evidence.json").write_bytes(orjson.dumps(pack))
    imp = import_path(tmp_path / "evidence.json")
    trial = Trial.objects.get()
    assert not trial.is_complete
    assert set(trial.missing) == {"trajectoryRef", "rewardDetailsRef", "artifactManifestRef"}
    flagged = {p["json_path"] for p in imp.problems if "no trial folder came with it" in p["message"]}
    assert flagged == {f"refs.{ref}" for ref in pack["refs"] if ref != "agentQcReportRef"}  # every file it names
    assert trial.refs == {"agentQcReportRef": pack["refs"]["agentQcReportRef"]}  # (a report, not a trial file)
    assert trial.documents["evidence_pack"]["refs"] == pack["refs"]  # the claims kept as written
    api = client_logged_in.get(f"/api/trials/{trial.pk}/").json()
    assert api["is_complete"] is False
    assert client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").status_code == 404


def test_an_evidence_pack_joined_later_gives_its_trial_its_configuration_and_no_other(tmp_path):
    job = tmp_path / "job"
    write_trial(job, "task-a__AAAAAAA")
    write_trial(job, "task-b__BBBBBBB")
    import_path(job)
    harbor_config = Trial.objects.get(name="task-b__BBBBBBB").configuration
    pack = reference_evidence_pack("task-a__AAAAAAA")
    (tmp_path / "evidence.json").write_bytes(orjson.dumps(pack))
    import_path(tmp_path / "evidence.json")
    joined, other = Trial.objects.order_by("name")
    assert joined.configuration.key == pack["benchmark"]["configurationId"]
    assert joined.configuration.role == pack["benchmark"]["role"]
    assert joined.configuration.model_name == harbor_config.model_name  # Harbor's facts kept
    assert other.configuration == harbor_config and harbor_config.role == ""  # untouched


def test_a_runtime_events_file_is_joined_to_its_trial_by_session_id(tmp_path):
    trial_dir = write_trial(tmp_path / "trial")
    import_path(trial_dir)
    base = {"schemaVersion": "lime-profile-0.4.0", "runtimeId": "rt", "sessionId": "sess-bad-input",
            "threadId": "th", "turnId": "tu"}  # fmt: skip
    events = [
        {**base, "type": "action.required", "eventId": "e1", "timestamp": "2026-01-01T00:00:01Z", "sequence": 1,
         "actionId": "a1", "toolCallId": "c1", "payload": {"actionType": "tool_permission", "toolName": "bash"}},
        {**base, "type": "action.resolved", "eventId": "e2", "timestamp": "2026-01-01T00:00:02Z", "sequence": 2,
         "actionId": "a1", "toolCallId": "c1", "payload": {"decision": "deny", "decidedBy": "policy:no-shell"}},
        {**base, "type": "tool.completed", "eventId": "e3", "timestamp": "2026-01-01T00:00:03Z", "sequence": 3,
         "stepId": "2", "toolCallId": "c1", "payload": {"status": "ok"}},
    ]  # fmt: skip
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    imp = import_path(path)
    assert imp.outcomes[0]["events"] == 3
    trial = Trial.objects.get()
    assert RuntimeEvent.objects.filter(trial=trial).count() == 3
    decision = PermissionDecision.objects.get(trial=trial)
    assert decision.decision == "deny" and decision.side_effect_after_denial


def trial_started(attempt, session_id: str = "sess-bad-input") -> bytes:
    event = {"schemaVersion": "lime-profile-0.4.0", "type": "benchmark.trial.started", "eventId": f"start-{attempt}",
             "timestamp": "2026-01-01T00:00:00Z", "sequence": 1, "runtimeId": "rt", "sessionId": session_id,
             "threadId": "th", "turnId": "tu", "payload": {"attempt": attempt, "timeoutSec": 600}}  # fmt: skip
    return orjson.dumps(event) + b"\n"


def test_a_trials_attempt_comes_from_its_trial_started_event(tmp_path):
    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    (trial_dir / "agent" / "events.jsonl").write_bytes(trial_started(2) + trial_started(3).replace(b"start-3", b"x"))
    import_path(trial_dir)
    assert Trial.objects.get().attempt == 2  # the first start event names it


def test_an_events_file_imported_later_fills_in_a_missing_attempt(tmp_path):
    import_path(write_trial(tmp_path / "job", "task-a__AAAAAAA"))
    assert Trial.objects.get().attempt is None
    (tmp_path / "events.jsonl").write_bytes(trial_started(3) + trial_started(1.5).replace(b"start-1.5", b"y"))
    import_path(tmp_path / "events.jsonl")
    assert Trial.objects.get().attempt == 3  # 1.5 is not an attempt


def test_an_evidence_packs_attempt_is_the_trials_attempt(tmp_path):
    trial_dir = write_trial(tmp_path / "job", "tool-approval__AAAAAAA")
    pack = reference_evidence_pack(trial_dir.name)
    pack["benchmark"]["attempt"] = 2
    (trial_dir / "benchmark-trial-pack.json").write_bytes(orjson.dumps(pack))
    import_path(trial_dir)
    assert Trial.objects.get().attempt == 2


def test_a_trial_imported_again_inside_its_job_folder_is_not_doubled_and_joins_its_job(tmp_path):
    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    import_path(trial_dir)
    (tmp_path / "job" / "config.json").write_bytes(orjson.dumps({"job_name": "job"}))
    again = import_path(tmp_path / "job")  # another pack (a Harbor job folder) holding the same trial
    assert [(o["kind"], o["outcome"]) for o in again.outcomes] == [("harbor-job", "imported")]
    assert again.outcomes[0]["already"] == 1 and again.outcomes[0]["regrouped"] == 1
    assert Trial.objects.get().job.name == "job"  # imported alone first, it had no job
    assert not again.outcomes[0]["differs"] and not again.problems  # the same files, wherever the folder
    assert import_path(tmp_path / "job").outcomes[0]["outcome"] == "already imported"


def test_a_jobs_times_without_a_zone_are_flagged_with_their_json_path(tmp_path):
    write_trial(tmp_path / "job", "task-a__AAAAAAA")
    (tmp_path / "job" / "config.json").write_bytes(orjson.dumps({"job_name": "job"}))
    times = {"started_at": "2026-08-24T23:44:06.166708", "finished_at": "2026-08-24T23:59:00"}
    (tmp_path / "job" / "result.json").write_bytes(orjson.dumps({"id": "j1", "n_total_trials": 1, **times}))
    imp = import_path(tmp_path / "job")
    naive = {p["json_path"]: p for p in imp.problems if "naive timestamp" in p["message"]}
    assert set(naive) == {"started_at", "finished_at"}
    assert {p["file"] for p in naive.values()} == {"job/result.json"}


def test_a_lone_trials_times_without_a_zone_are_flagged_and_its_duration_kept(tmp_path):
    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    result = orjson.loads((trial_dir / "result.json").read_bytes())
    result |= {"started_at": "2026-08-24T23:44:06", "finished_at": "2026-08-24T23:59:06"}
    (trial_dir / "result.json").write_bytes(orjson.dumps(result))
    imp = import_path(trial_dir)
    naive = {p["json_path"]: p for p in imp.problems if "naive timestamp" in p["message"]}
    assert set(naive) == {"started_at", "finished_at"}
    assert {p["file"] for p in naive.values()} == {"task-a__AAAAAAA/result.json"}
    trial = Trial.objects.get()
    assert trial.started_at is None and trial.duration_sec == 900  # never assumed UTC; the span is known
    assert naive["started_at"] in trial.problems


def other_bytes_warnings(imp) -> list[dict]:
    return [p for p in imp.problems if "imported before from other bytes" in p["message"]]


def test_a_trial_imported_again_from_other_bytes_is_said_to_differ_and_keeps_the_first(tmp_path):
    trial_dir = write_trial(tmp_path / "first", "task-a__AAAAAAA")
    import_path(trial_dir)
    changed = tmp_path / "second" / "task-a__AAAAAAA"
    shutil.copytree(trial_dir, changed)
    result = orjson.loads((changed / "result.json").read_bytes())
    result["verifier_result"]["rewards"]["reward"] = 0.0  # the same trial id, another reward
    (changed / "result.json").write_bytes(orjson.dumps(result))
    again = import_path(changed)
    [outcome] = again.outcomes
    assert outcome["outcome"] == "already imported" and outcome["differs"] == 1
    assert "imported before from other bytes" in outcome["reason"]
    [warning] = other_bytes_warnings(again)
    assert warning["file"] == "task-a__AAAAAAA" and warning["severity"] == "warning"
    assert Trial.objects.get().reward == 1.0  # what was imported first
    assert Pack.objects.count() == 2  # the new bytes are stored all the same


def test_a_trial_whose_trajectory_was_left_out_by_the_size_limit_is_said_to_differ_when_imported_whole(
    tmp_path, settings
):
    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    settings.IMPORT_MAX_FILE_BYTES = (trial_dir / "agent" / "trajectory.json").stat().st_size - 1
    first = import_path(trial_dir)
    assert Trial.objects.get().step_count == 0 and any("limit" in p["message"] for p in first.problems)
    settings.IMPORT_MAX_FILE_BYTES = 10 * 1024 * 1024
    again = import_path(trial_dir)
    assert again.outcomes[0]["differs"] == 1 and len(other_bytes_warnings(again)) == 1


def test_an_evidence_pack_imported_again_with_other_content_is_said_to_differ(tmp_path):
    pack = reference_evidence_pack("trial-alone")
    (tmp_path / "evidence.json").write_bytes(orjson.dumps(pack))
    import_path(tmp_path / "evidence.json")
    pack["metrics"]["costUsd"] = 99.0
    (tmp_path / "evidence.json").write_bytes(orjson.dumps(pack))
    again = import_path(tmp_path / "evidence.json")
    assert again.outcomes[0]["differs"] == 1 and len(other_bytes_warnings(again)) == 1


def test_a_trajectory_imported_alone_after_its_trial_folder_is_already_imported(tmp_path):
    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    import_path(trial_dir)
    again = import_path(trial_dir / "agent" / "trajectory.json")
    assert [o["outcome"] for o in again.outcomes] == ["already imported"]
    assert Trial.objects.count() == 1 and Trajectory.objects.count() == 1


def test_a_trial_folder_imported_after_its_trajectory_alone_takes_that_trials_place(tmp_path):
    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    import_path(trial_dir / "agent" / "trajectory.json")
    lone = Trial.objects.get()
    imp = import_path(trial_dir)
    trial = Trial.objects.get()  # one trial for one run
    assert trial.pk != lone.pk and trial.key.startswith("harbor:")
    assert trial.step_count == 2 and Step.objects.count() == 2
    assert any(f"replaces trial #{lone.pk}" in p["message"] for p in imp.problems)


def test_a_lone_trajectory_trial_with_triage_work_is_kept_when_its_folder_arrives(tmp_path, user):
    from trials.models.qc import Comment

    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    import_path(trial_dir / "agent" / "trajectory.json")
    lone = Trial.objects.get()
    Comment.objects.create(trial=lone, author=user, text="looked at this one")
    imp = import_path(trial_dir)
    assert Trial.objects.count() == 2 and Trial.objects.filter(pk=lone.pk).exists()
    assert any(f"trial #{lone.pk} holds this trajectory" in p["message"] for p in imp.problems)


def test_loose_trajectory_files_of_one_run_are_one_trial_and_the_other_files_stay_packs_of_their_own(tmp_path):
    imp = import_path(loose_run(tmp_path / "agent"))
    assert sorted(o["kind"] for o in imp.outcomes) == ["atif-trajectory-group", "runtime-events"]
    trial = Trial.objects.get()
    roles = list(trial.trajectories.order_by("position").values_list("role", "path"))
    assert roles == [
        ("main", "agent/trajectory.json"),
        ("continuation", "agent/trajectory.cont-1.json"),
        ("subagent", "agent/trajectory.helper.json"),
    ]
    assert (trial.step_count, trial.tool_call_count) == (5, 2)
    assert trial.refs == {"trajectoryRef": "agent/trajectory.json"}
    # tokens and cost: the main file's and its continuation's final_metrics, not the subagent's (in its parent's)
    assert (trial.input_tokens, trial.output_tokens, trial.cost_usd) == (300, 30, pytest.approx(0.3))


def continuation_warnings(imp) -> list[dict]:
    return [p for p in imp.problems if p["json_path"] == "continued_trajectory_ref"]


def test_a_trajectory_whose_continuation_file_is_not_in_the_pack_is_said_to_miss_its_later_steps(tmp_path):
    loose = loose_run(tmp_path / "agent")
    assert continuation_warnings(import_path(loose)) == []  # the group has its continuation
    alone = import_path(loose / "trajectory.json")  # the main file without it
    [warning] = continuation_warnings(alone)
    assert warning["file"] == "trajectory.json" and warning["severity"] == "warning"
    assert "'trajectory.cont-1.json', which is not in this pack" in warning["message"]
    (loose / "trajectory.cont-1.json").unlink()
    assert [w["file"] for w in continuation_warnings(import_path(loose))] == ["agent/trajectory.json"]


def subagent_warnings(imp) -> list[dict]:
    return [p for p in imp.problems if "subagent_trajectory_ref" in p["json_path"]]


def test_a_subagent_ref_naming_no_trajectory_of_the_trial_is_reported_where_it_is(tmp_path, client_logged_in):
    assert subagent_warnings(import_path(loose_run(tmp_path / "whole"))) == []  # the helper file is beside it
    loose = loose_run(tmp_path / "agent")
    (loose / "trajectory.helper.json").unlink()
    imp = import_path(loose)
    [warning] = subagent_warnings(imp)
    assert warning["file"] == "agent/trajectory.json" and warning["severity"] == "warning"
    assert warning["json_path"] == "steps[1].observation.results[1].subagent_trajectory_ref[0]"
    assert "'trajectory.helper.json', which is not in this trial" in warning["message"]
    trial = Trial.objects.get(trajectories__path="agent/trajectory.json")
    assert warning in trial.problems
    page = client_logged_in.get(f"/trials/{trial.pk}/").content.decode()
    assert 'trajectory.helper.json <span class="muted">(not in this trial)' in page


def test_an_atif_file_anywhere_in_the_agent_folder_is_a_subagent_trajectory_its_ref_finds(tmp_path, client_logged_in):
    trial_dir = write_trial(tmp_path)
    main = atif(good_steps())
    ref = {"session_id": "helper-session", "trajectory_path": "subagents/helper.json"}
    main["steps"][1]["observation"]["results"].append({"subagent_trajectory_ref": [ref]})
    (trial_dir / "agent" / "trajectory.json").write_bytes(orjson.dumps(main))
    (trial_dir / "agent" / "subagents").mkdir()
    helper = {**atif([{"step_id": 1, "source": "agent", "message": "helping"}]), "session_id": "helper-session"}
    (trial_dir / "agent" / "subagents" / "helper.json").write_bytes(orjson.dumps(helper))
    imp = import_path(trial_dir)
    assert subagent_warnings(imp) == [] and not [p for p in imp.problems if "helper.json" in p["file"]]
    trial = Trial.objects.get()
    sub = trial.trajectories.get(role="subagent")
    assert sub.path == "task-a__AAAAAAA/agent/subagents/helper.json" and sub.step_count == 1
    assert "subagents/helper.json" not in str(trial.documents.get("other", {}))  # a trajectory, not a document
    page = client_logged_in.get(f"/trials/{trial.pk}/").content.decode()
    assert f"?t={sub.pk}" in page and "not in this trial" not in page


def test_a_subagent_ref_naming_nothing_in_a_jobs_trial_is_reported_for_that_trial_alone(tmp_path):
    job = write_job(tmp_path / "job", "job", role="baseline", configuration_id="c", agent="a", model="m", tasks=2,
                    attempts=1, steps_per_trial=4, with_extras=False)  # fmt: skip
    first, second = sorted(job.glob("*/agent/trajectory.json"))
    data = orjson.loads(first.read_bytes())
    step = next(s for s in data["steps"] if s.get("observation"))
    step["observation"]["results"][0]["subagent_trajectory_ref"] = [{"trajectory_id": "ghost-helper"}]
    first.write_bytes(orjson.dumps(data))
    [warning] = subagent_warnings(import_path(job))
    assert "'ghost-helper', which is not in this trial" in warning["message"]
    assert warning["file"].endswith(f"{first.parent.parent.name}/agent/trajectory.json")
    assert [warning in trial.problems for trial in Trial.objects.order_by("name")] == [True, False]


def test_loose_run_files_take_the_place_of_their_main_file_imported_alone_and_give_way_to_their_trial(tmp_path):
    loose = loose_run(tmp_path / "loose")
    import_path(loose / "trajectory.json")
    alone = Trial.objects.get()
    imp = import_path(loose)
    group = Trial.objects.get()  # one trial for one run
    assert group.pk != alone.pk and group.trajectories.count() == 3
    assert any(f"replaces trial #{alone.pk}" in p["message"] for p in imp.problems)
    again = import_path(loose / "trajectory.json")  # the main file alone once more: it is in a trial already
    assert [o["outcome"] for o in again.outcomes] == ["already imported"] and Trial.objects.count() == 1

    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")  # then the Harbor trial the files came from
    for path in loose.glob("trajectory*.json"):
        shutil.copyfile(path, trial_dir / "agent" / path.name)
    imp = import_path(trial_dir)
    trial = Trial.objects.get()
    assert trial.key.startswith("harbor:") and trial.trajectories.count() == 3
    assert any(f"replaces trial #{group.pk}" in p["message"] for p in imp.problems)
    assert [o["outcome"] for o in import_path(loose).outcomes if o["kind"] != "runtime-events"] == ["already imported"]


def test_loose_run_files_imported_after_their_trial_folder_are_already_imported(tmp_path):
    loose = loose_run(tmp_path / "loose")
    trial_dir = write_trial(tmp_path / "job", "task-a__AAAAAAA")
    for path in loose.glob("trajectory*.json"):
        shutil.copyfile(path, trial_dir / "agent" / path.name)
    import_path(trial_dir)
    again = import_path(loose)
    assert [o["outcome"] for o in again.outcomes if o["kind"] != "runtime-events"] == ["already imported"]
    assert Trial.objects.count() == 1 and Trajectory.objects.count() == 3


def test_embedded_subagents_are_trajectories_of_their_own_with_steps_calls_and_problems(tmp_path, client_logged_in):
    helper = {
        "schema_version": "ATIF-v1.7",
        "trajectory_id": "sub-emb-1",
        "agent": {"name": "helper", "version": "1.0", "model_name": "small-model"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "find the TODOs"},
            {"step_id": 7, "source": "agent", "message": "searching",  # step_id 7: not sequential
             "tool_calls": [{"tool_call_id": "g1", "function_name": "grep", "arguments": {"pattern": "TODO"}}],
             "observation": {"results": [{"source_call_id": "nope", "content": "TODO: fix"}]}},
        ],
    }  # fmt: skip
    parent = atif(good_steps(), version="ATIF-v1.7")
    parent["subagent_trajectories"] = [helper]
    parent["steps"][1]["observation"]["results"][0]["subagent_trajectory_ref"] = [{"trajectory_id": "sub-emb-1"}]
    trial_dir = write_trial(tmp_path, "task-a__AAAAAAA")
    (trial_dir / "agent" / "trajectory.json").write_bytes(orjson.dumps(parent))
    imp = import_path(trial_dir)
    trial = Trial.objects.get()
    sub = trial.trajectories.get(trajectory_id="sub-emb-1")
    assert sub.role == "subagent" and sub.step_count == 2
    assert sub.path == "task-a__AAAAAAA/agent/trajectory.json#subagent_trajectories[0]"
    assert trial.tool_calls.filter(function_name="grep", step__trajectory=sub).exists()
    flagged = {p["json_path"] for p in imp.problems if p["file"] == sub.path}
    assert {"steps[1].step_id", "steps[1].observation.results[0].source_call_id"} <= flagged
    served = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/", {"trajectory": sub.pk})
    assert orjson.loads(served.content) == helper
    main = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/")
    assert b"".join(main.streaming_content) == (trial_dir / "agent" / "trajectory.json").read_bytes()
    page = client_logged_in.get(f"/trials/{trial.pk}/").content.decode()
    assert f"?t={sub.pk}" in page and "not in this trial" not in page  # the parent's step links to it
