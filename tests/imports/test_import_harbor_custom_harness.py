"""Harbor output from custom harnesses: an agent named only by its import path, an environment of its own,
project files beside result.json, trial folders with no job file, naive times and a fractional reward.txt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import import_path, write_trial
from trials.models import Trial

pytestmark = pytest.mark.django_db

AGENT_PATH = "acme_harness.agents.planner:PlannerAgent"
ENV_PATH = "acme_harness.envs:FirecrackerEnvironment"


def custom_trial(root: Path, name: str, reward_txt: str | None = "0.4190") -> Path:
    trial = write_trial(root, name, details=False, manifest=False)
    result = json.loads((trial / "result.json").read_text())
    result.pop("verifier_result")
    result["agent_info"] = {"name": None, "version": None, "model_info": {"name": "qwen3-coder"}}
    result |= {"started_at": "2026-09-30T08:59:24.123456", "finished_at": "2026-09-30T09:04:01.5"}
    (trial / "result.json").write_text(json.dumps(result))
    config = {
        "trial_name": name,
        "agent": {"name": None, "import_path": AGENT_PATH},
        "environment": {"import_path": ENV_PATH},
    }
    (trial / "config.json").write_text(json.dumps(config))
    if reward_txt is not None:
        (trial / "verifier" / "reward.txt").write_text(reward_txt + "\n")
    (trial / "acme_metrics.json").write_text(json.dumps({"reward": 1.0, "n_input_tokens": 999999}))
    return trial


def test_an_agent_named_only_by_its_import_path_is_that_class_and_its_paths_are_kept(tmp_path):
    import_path(custom_trial(tmp_path / "job", "task-a__AAAAAAA").parent)
    trial = Trial.objects.get()
    configuration = trial.configuration
    assert configuration.agent_name == AGENT_PATH.rpartition(":")[2]
    assert configuration.key == f"{AGENT_PATH.rpartition(':')[2]}__qwen3-coder"
    assert configuration.profiles["agent_import_path"] == AGENT_PATH
    assert configuration.profiles["environment_import_path"] == ENV_PATH


def test_a_fractional_reward_txt_is_a_partial_score_not_a_failure(tmp_path):
    trial_dir = custom_trial(tmp_path / "job", "task-a__AAAAAAA")
    import_path(trial_dir.parent)
    trial = Trial.objects.get()
    written = float((trial_dir / "verifier" / "reward.txt").read_text())
    assert trial.reward == written and trial.status == "partial"
    assert not Trial.objects.failures().exists() and not Trial.objects.failed().exists()


def test_project_files_beside_result_json_are_shown_as_files_and_never_override_harbors_numbers(tmp_path):
    trial_dir = custom_trial(tmp_path / "job", "task-a__AAAAAAA", reward_txt="0")
    import_path(trial_dir.parent)
    trial = Trial.objects.get()
    assert trial.reward == 0.0 and trial.status == "failed"
    assert trial.input_tokens is None
    assert any(path.endswith("/acme_metrics.json") for path in trial.pack.files.values_list("path", flat=True))


def test_trial_folders_with_no_job_file_each_import_and_naive_times_are_named_warnings(tmp_path):
    root = tmp_path / "job"
    for name, reward in (("task-a__AAAAAAA", "1"), ("task-b__BBBBBBB", "0.25")):
        custom_trial(root, name, reward_txt=reward)
    imp = import_path(root)
    assert dict(Trial.objects.values_list("task__name", "status")) == {"task-a": "passed", "task-b": "partial"}
    problems = [p for p in imp.problems if "naive timestamp" in p.get("message", "")]
    assert {(p["file"].rpartition("/")[2], p.get("json_path")) for p in problems} >= {("result.json", "started_at")}
    assert all(p.get("severity") == "warning" for p in problems)


def test_the_job_page_states_the_pass_threshold_and_counts_a_fractional_reward_as_not_passed(
    tmp_path, client_logged_in
):
    partial = custom_trial(tmp_path / "job", "task-a__AAAAAAA")
    custom_trial(tmp_path / "job", "task-b__BBBBBBB", reward_txt="1")
    (tmp_path / "job" / "config.json").write_text(json.dumps({"job_name": "job"}))  # (a job folder)
    import_path(tmp_path / "job")
    rewards = [
        float((partial.parent / t / "verifier" / "reward.txt").read_text())
        for t in ("task-a__AAAAAAA", "task-b__BBBBBBB")
    ]
    passed = sum(r >= 1 for r in rewards)  # (the threshold the issue sets: reward 1)
    job = Trial.objects.get(name="task-b__BBBBBBB").job
    page = client_logged_in.get(f"/jobs/{job.pk}/").content.decode()
    assert f'<dd id="job-accuracy">{passed / len(rewards):.4f} ' in page
    assert '<span id="pass-threshold">a trial passes at reward ≥ 1.0' in page
