"""Inspect AI logs (.eval and .json): the shared samples, and logs inspect_ai itself writes with mockllm."""

from __future__ import annotations

import io
import zipfile
from collections import Counter
from pathlib import Path

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from inspect_ai.scorer import value_to_float as inspect_value_to_float

from tests.builders import REFERENCE, import_path
from tests.imports.inspect_helpers import AGENTIC, trial_facts
from tests.inspect_logs import write_agentic_log, write_subagent_log
from trials.ingest.formats import inspect_sample
from trials.ingest.formats.inspect_zip import read_member
from trials.models import Import, Job, PermissionDecision, RuntimeEvent, Step, ToolCall, Trajectory, Trial

pytestmark = pytest.mark.django_db

INSPECT = REFERENCE / "inspect"
EVAL_LOG = INSPECT / "2025-09-23T08-09-58-04-00_theory-of-mind_bbB4eRCx2rFJLyPH42Cj9r.eval"
JSON_LOG = INSPECT / "2025-05-12T20-28-26-04-00_security-guide.json"


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, Path]:
    """Written once per module by inspect_ai (a few seconds each)."""
    folder = tmp_path_factory.mktemp("inspect-logs")
    return {
        "eval": write_agentic_log(folder / "eval"),
        "json": write_agentic_log(folder / "json", log_format="json"),
        "subagent": write_subagent_log(folder / "subagent"),
    }


def test_the_shared_eval_log_is_one_job_of_100_trials_83_correct_as_its_header_says():
    imp = import_path(EVAL_LOG)
    assert imp.status == "done" and imp.problems == [], imp.problems
    job = Job.objects.get()
    assert job.key == "inspect:kWEEupUzZn5zf2kgEXS3fs"
    trials = Trial.objects.filter(job=job)
    assert trials.count() == 100
    assert Counter(trials.values_list("status", flat=True)) == {"passed": 83, "failed": 17}
    trial = trials.get(name="5_epoch_1")
    assert trial.rewards == {"model_graded_fact": 1.0} and trial.attempt == 1
    assert (trial.dataset.name, trial.task.name) == ("theory_of_mind", "5")
    assert (trial.configuration.model_name, trial.configuration.agent_name) == (
        "openai/gpt-4o-mini",
        "chain_of_thought → generate",
    )
    assert (trial.input_tokens, trial.output_tokens) == (566, 417)  # the sample's model_usage
    lanes = dict(trial.trajectories.values_list("role", "step_count"))
    assert lanes == {"main": 2, "subagent": 2}  # the input and the answer; the grader's prompt and call apart
    answer = Step.objects.get(trajectory__trial=trial, trajectory__role="main", index=1)
    assert answer.source == "agent" and answer.prompt_tokens == 102
    assert answer.message_text.startswith("To determine where Jackson will look")


def test_the_shared_json_log_imports_its_three_graded_samples():
    imp = import_path(JSON_LOG)
    assert imp.status == "done" and imp.problems == [], imp.problems
    assert list(Trial.objects.order_by("name").values_list("name", "status", "reward")) == [
        ("1_epoch_1", "passed", 1.0),
        ("2_epoch_1", "passed", 1.0),
        ("3_epoch_1", "passed", 1.0),
    ]
    assert Trial.objects.get(name="1_epoch_1").dataset.name == "security_guide"


def test_a_generated_agentic_eval_log_gives_each_sample_and_epoch_its_known_answers(logs):
    imp = import_path(logs["eval"])
    assert imp.status == "done", imp.problems
    assert Trial.objects.count() == 8
    for trial in Trial.objects.all():
        sample, _, epoch = trial.name.partition("_epoch_")
        assert trial_facts(trial) == AGENTIC[sample], trial.name
        assert trial.attempt == int(epoch)
    crash = Trial.objects.get(name="crash_epoch_1")
    assert crash.exception_type == "ZeroDivisionError" and "division by zero" in crash.exception_message
    loop = Trial.objects.get(name="loop_epoch_2")
    assert "Message limit exceeded" in loop.exception_message and loop.exception_type == ""
    # every tool call was approved (auto_approver), and the sandbox's own calls are runtime events
    assert PermissionDecision.objects.filter(trial=loop, decision="approve").count() == 3
    assert RuntimeEvent.objects.filter(trial=loop, type="sandbox.exec").exists()
    call = ToolCall.objects.get(step__trial=Trial.objects.get(name="add_epoch_1"))
    assert (call.function_name, call.arguments) == ("bash", {"command": "echo $((1+2))"})
    # the joinability checks an Inspect log can answer pass: identity, trajectory, reward details
    assert loop.missing == ["runtimeCorrelation", "artifactManifestRef"]


def test_the_json_form_of_the_same_log_gives_the_same_answers(logs):
    imp = import_path(logs["json"])
    assert imp.status == "done", imp.problems
    assert {t.name: trial_facts(t) for t in Trial.objects.all()} == {
        f"{sample}_epoch_{epoch}": facts for sample, facts in AGENTIC.items() for epoch in (1, 2)
    }


@pytest.mark.parametrize("form", ["eval", "json"])
def test_samples_past_the_stream_threshold_are_streamed_with_the_same_answers(logs, monkeypatch, form):
    monkeypatch.setattr("trials.ingest.formats.inspect.STREAM_THRESHOLD", 0)
    imp = import_path(logs[form])
    assert imp.status == "done", imp.problems
    assert {t.name: trial_facts(t) for t in Trial.objects.all()} == {
        f"{sample}_epoch_{epoch}": facts for sample, facts in AGENTIC.items() for epoch in (1, 2)
    }
    if form == "eval":  # (approvals and sandbox calls, read again from the log as they are written)
        loop = Trial.objects.get(name="loop_epoch_2")
        assert PermissionDecision.objects.filter(trial=loop, decision="approve").count() == 3
        assert RuntimeEvent.objects.filter(trial=loop, type="sandbox.exec").exists()


def test_a_handoff_is_a_subagent_lane_the_main_agents_tool_result_refers_to(logs):
    import_path(logs["subagent"])
    trial = Trial.objects.get()
    assert trial.status == "passed"
    helper = trial.trajectories.get(role="subagent")
    assert helper.agent["name"] == "helper" and helper.step_count == 4  # its prompt (system, user), two calls
    calls = ToolCall.objects.filter(step__trajectory=helper).order_by("step__index")
    assert list(calls.values_list("function_name", flat=True)) == ["bash", "submit"]
    main = trial.trajectories.get(role="main")
    handoff = Step.objects.get(trajectory=main, index=1)
    [result] = handoff.raw["observation"]["results"]
    assert result["subagent_trajectory_ref"] == [{"trajectory_id": helper.trajectory_id}]


@pytest.mark.parametrize("value", ["C", "I", "P", "N", "yes", "False", "0.25", "12", 1, 0.5, True, "maybe", "nan"])
def test_score_values_become_rewards_as_inspects_own_value_to_float_maps_them(value):
    ours = inspect_sample.value_to_float(value)
    assert (0.0 if ours is None else ours) == inspect_value_to_float()(value)


# ---------------------------------------------------------------- bad input


def members_of(log: Path) -> list[tuple[str, bytes]]:
    """Each member's bytes, read by inspect_ai's own reader (Zstandard members), in order."""
    with zipfile.ZipFile(log) as archive:
        return [(info.filename, read_member(log, archive, info)) for info in archive.infolist()]


def rewritten(members: list[tuple[str, bytes]], target: Path) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return target


def test_a_sample_that_is_not_an_eval_sample_is_named_and_the_others_are_imported(logs, tmp_path):
    members = members_of(logs["eval"])
    bad = {name: data for name, data in members}["samples/wrong_epoch_2.json"]
    sample = orjson.loads(bad)
    sample["epoch"] = "two"
    log = rewritten(
        [(n, orjson.dumps(sample) if n == "samples/wrong_epoch_2.json" else d) for n, d in members],
        tmp_path / "bad.eval",
    )
    imp = import_path(log)
    assert imp.status == "done"
    assert Trial.objects.count() == 7 and not Trial.objects.filter(name="wrong_epoch_2").exists()
    [problem] = [p for p in imp.problems if p["severity"] == "error"]
    assert problem["file"] == "bad.eval" and problem["json_path"] == "samples/wrong_epoch_2.json#epoch"
    assert "not an EvalSample: `epoch` must be an integer" in problem["message"]
    assert "the others are" in problem["kept"]


def test_a_truncated_eval_imports_the_whole_samples_before_the_cut_and_names_where_it_ends(logs, tmp_path):
    members = members_of(logs["eval"])
    whole = rewritten(members, tmp_path / "whole.eval").read_bytes()
    cut_in = "samples/crash_epoch_1.json"
    offset = whole.index(cut_in.encode()) + 100  # inside that member's data
    log = tmp_path / "cut.eval"
    log.write_bytes(whole[:offset])
    imp = import_path(log)
    assert imp.status == "done"
    before = [n for n, _ in members[: [n for n, _ in members].index(cut_in)] if n.startswith("samples/")]
    assert sorted(Trial.objects.values_list("name", flat=True)) == sorted(Path(n).stem for n in before)
    [problem] = [p for p in imp.problems if "cut off" in p["message"]]
    assert problem["file"] == "cut.eval" and problem["json_path"] == cut_in
    assert f"the file ends inside member {cut_in}" in problem["message"]
    assert f"the {len(before)} whole samples before the cut are imported" in problem["kept"]


def test_a_truncated_zstandard_eval_as_inspect_writes_it_is_read_to_the_cut_too(logs, tmp_path):
    whole = logs["eval"].read_bytes()
    log = tmp_path / "cut.eval"
    log.write_bytes(whole[: whole.index(b"samples/loop_epoch_1.json") + 60])
    imp = import_path(log)
    assert imp.status == "done"
    assert sorted(Trial.objects.values_list("name", flat=True)) == ["add_epoch_1", "wrong_epoch_1"]


# ---------------------------------------------------------------- the three ways in


def test_the_upload_form_imports_an_eval_log(logs, client_logged_in, django_capture_on_commit_callbacks):
    upload = SimpleUploadedFile("run.eval", logs["eval"].read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/imports/", {"files": [upload]})
    assert response.status_code == 302
    imp = Import.objects.get()
    imp.refresh_from_db()
    assert imp.status == "done", imp.problems
    assert Trial.objects.filter(status="errored").count() == 4  # crash and loop (its limit), two epochs each


def test_import_packs_imports_an_eval_log_and_says_so(logs):
    out = io.StringIO()
    call_command("import_packs", str(logs["eval"]), "--no-progress", stdout=out, stderr=io.StringIO())
    assert "imported" in out.getvalue() and "inspect" in out.getvalue()
    assert Trial.objects.count() == 8


def test_the_trial_page_shows_an_inspect_trials_limit_and_tool_calls(logs, client_logged_in):
    import_path(logs["eval"])
    loop = Trial.objects.get(name="loop_epoch_1")
    page = client_logged_in.get(f"/trials/{loop.pk}/").content.decode()
    assert "message_limit" in page and "echo again" in page
    assert Trajectory.objects.filter(trial=loop).count() == 1


def test_a_redacted_context_item_in_a_sample_never_reaches_the_trial_or_its_steps(logs, tmp_path, client_logged_in):
    secret = "TOPSECRET-42"
    item = {"item_id": "ctx-1", "context_kind": "file", "redaction_state": "redacted", "content": secret}
    members = members_of(logs["eval"])
    sample = orjson.loads(dict(members)["samples/add_epoch_1.json"])
    sample["metadata"] = {"context": item}
    model = next(e for e in sample["events"] if e["event"] == "model")
    model["output"]["choices"][0]["message"]["tool_calls"][0]["arguments"]["context"] = item
    log = rewritten([(n, orjson.dumps(sample) if n == "samples/add_epoch_1.json" else d) for n, d in members],
                    tmp_path / "redacted.eval")  # fmt: skip
    assert import_path(log).status == "done"
    trial = Trial.objects.get(name="add_epoch_1")
    assert secret not in orjson.dumps(trial.documents).decode()
    bodies = [step.body().decode() for step in Step.objects.filter(trial=trial)]
    assert any('"ctx-1"' in body for body in bodies) and not any(secret in body for body in bodies)
    assert secret not in orjson.dumps(list(ToolCall.objects.filter(step__trial=trial).values("arguments"))).decode()
    assert secret not in client_logged_in.get(f"/trials/{trial.pk}/").content.decode()


def test_a_redacted_item_in_a_streamed_samples_sandbox_call_never_reaches_its_runtime_events(
    logs, tmp_path, monkeypatch
):
    monkeypatch.setattr("trials.ingest.formats.inspect.STREAM_THRESHOLD", 0)
    secret = "SANDBOX-SECRET-7"
    members = members_of(logs["eval"])
    sample = orjson.loads(dict(members)["samples/loop_epoch_1.json"])
    call = next(e for e in sample["events"] if e["event"] == "sandbox")
    call["output"] = {"item_id": "ctx-9", "context_kind": "file", "redaction_state": "redacted", "content": secret}
    log = rewritten([(n, orjson.dumps(sample) if n == "samples/loop_epoch_1.json" else d) for n, d in members],
                    tmp_path / "redacted-sandbox.eval")  # fmt: skip
    assert import_path(log).status == "done"
    events = RuntimeEvent.objects.filter(trial__name="loop_epoch_1", type__startswith="sandbox.")
    stored = orjson.dumps(list(events.values("payload", "raw"))).decode()
    assert '"ctx-9"' in stored and secret not in stored


def test_a_redacted_item_in_an_approval_never_reaches_its_permission_decision(logs, tmp_path, client_logged_in):
    secret = "APPROVAL-SECRET-3"
    members = members_of(logs["eval"])
    sample = orjson.loads(dict(members)["samples/loop_epoch_1.json"])
    approval = next(e for e in sample["events"] if e["event"] == "approval")
    item = {"item_id": "ctx-4", "context_kind": "file", "redaction_state": "redacted", "content": secret}
    approval["call"]["arguments"]["context"] = item
    log = rewritten([(n, orjson.dumps(sample) if n == "samples/loop_epoch_1.json" else d) for n, d in members],
                    tmp_path / "redacted-approval.eval")  # fmt: skip
    assert import_path(log).status == "done"
    trial = Trial.objects.get(name="loop_epoch_1")
    stored = orjson.dumps(list(trial.permissions.values("scope", "raw", "prompt", "reason"))).decode()
    assert '"ctx-4"' in stored and secret not in stored
    assert secret not in client_logged_in.get(f"/trials/{trial.pk}/?tab=permissions").content.decode()
