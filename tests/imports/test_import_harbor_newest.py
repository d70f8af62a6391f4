"""Harbor's newest output: unknown config fields kept and shown, new exception types, trials
named only in the job's stats, a job's check_report.json, and a job summary imported apart
from its trials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import import_path
from trials.models import Job, Trial

pytestmark = pytest.mark.django_db

JOB_ID = "7d1c0b8e-0000-4000-8000-000000000001"
NEW_FIELDS = {"concurrency_group": "gpu-a", "cpu_enforcement_policy": "strict", "extra_instruction_paths": ["x.md"]}


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def trial_result(name: str, reward: float | None, exception: str = "") -> dict:
    return {
        "id": f"{name}-id",
        "task_name": name.split("__")[0],
        "trial_name": name,
        "source": "terminal-bench/terminal-bench-2-1",
        "config": {"job_id": JOB_ID, "trial_name": name, **NEW_FIELDS},
        "agent_info": {"name": "codex", "version": "1", "model_info": {"name": "gpt-5"}},
        "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
        "exception_info": {"exception_type": exception, "exception_message": "exit code 2"} if exception else None,
    }


def job_result(names: dict[str, float], exceptions: dict[str, list[str]] | None = None) -> dict:
    by_value: dict[str, list[str]] = {}
    for name, reward in names.items():
        by_value.setdefault(str(reward), []).append(name)
    evals = {"codex__gpt-5__terminal-bench/terminal-bench-2-1": {
        "n_trials": len(names), "reward_stats": {"reward": by_value}, "exception_stats": exceptions or {}}}  # fmt: skip
    return {"id": JOB_ID, "started_at": "2026-08-24T23:44:06Z", "n_total_trials": len(names), "stats": {"evals": evals}}


def job_folder(tmp_path: Path, trials: dict[str, float | None], **extra_files: dict) -> Path:
    job = tmp_path / "job"
    write_json(job / "config.json", {"job_name": "newest", "agents": [{"name": "codex"}], **NEW_FIELDS})
    write_json(job / "result.json", job_result({n: r for n, r in trials.items() if r is not None}))
    for name, reward in trials.items():
        write_json(job / name / "result.json", trial_result(name, reward))
        (job / name / "agent").mkdir()
    for name, data in extra_files.items():
        write_json(job / name, data)
    return job


def test_unknown_fields_of_job_and_trial_configs_are_kept_and_shown(tmp_path, client_logged_in):
    imp = import_path(job_folder(tmp_path, {"hello__AAA": 1.0}))
    assert imp.status == "done" and not [p for p in imp.problems if p["severity"] == "error"]
    job, trial = Job.objects.get(), Trial.objects.get()
    assert all(job.config[k] == v for k, v in NEW_FIELDS.items())
    assert all(trial.documents["result"]["config"][k] == v for k, v in NEW_FIELDS.items())
    job_page = client_logged_in.get(job.get_absolute_url()).content.decode()
    config_tab = client_logged_in.get(f"{trial.get_absolute_url()}?tab=config").content.decode()
    for page in (job_page, config_tab):
        assert "concurrency_group" in page and "cpu_enforcement_policy" in page and "extra_instruction_paths" in page


def test_a_new_exception_type_without_a_reward_is_an_errored_trial(tmp_path):
    job = job_folder(tmp_path, {})
    write_json(job / "ok__AAA" / "result.json", trial_result("ok__AAA", None, "NonZeroAgentExitCodeError"))
    import_path(job)
    trial = Trial.objects.get()
    assert trial.status == "errored" and trial.exception_type == "NonZeroAgentExitCodeError"
    assert trial.exception_message == "exit code 2"


def test_trials_the_jobs_stats_name_without_a_result_of_their_own_are_shown_from_the_stats(tmp_path):
    job = job_folder(tmp_path, {"kept__AAA": 1.0})
    stats = job_result({"kept__AAA": 1.0, "logged__BBB": 0.0, "gone__CCC": 1.0}, {"CancelledError": ["gone__CCC"]})
    write_json(job / "result.json", stats)
    (job / "logged__BBB").mkdir()
    (job / "logged__BBB" / "trial.log").write_text("started\ncancelled by the user\n")
    imp = import_path(job)
    assert imp.progress_done == imp.progress_total  # (the trial with no folder counted, never past the total)
    trials = {t.name: t for t in Trial.objects.filter(job__name="newest")}
    assert set(trials) == {"kept__AAA", "logged__BBB", "gone__CCC"}
    logged, gone = trials["logged__BBB"], trials["gone__CCC"]
    assert (logged.status, logged.reward) == ("failed", 0.0) and "trial.log" in logged.texts
    assert "no result.json" in logged.provenance["evidence"]
    assert (gone.status, gone.reward, gone.exception_type) == ("passed", 1.0, "CancelledError")
    assert "named only" in gone.provenance["evidence"]
    assert gone.configuration.key == "codex__gpt-5" and gone.dataset.name == "terminal-bench/terminal-bench-2-1"
    assert gone.safety_flags == ["cancelled-with-reward"]


def test_a_jobs_check_report_is_shown_on_the_job_and_beside_its_tasks_trials(tmp_path, client_logged_in):
    report = {
        "tasks": {
            "hello": {
                "checks": {
                    "instruction_clarity": {"outcome": "pass", "explanation": "Clear."},
                    "tests_match_instruction": {"outcome": "fail", "explanation": "Tests check an unstated port."},
                },
                "estimated_cost_usd": 0.12,
            }
        }
    }
    import_path(job_folder(tmp_path, {"hello__AAA": 1.0}, **{"check_report.json": report}))
    job, trial = Job.objects.get(), Trial.objects.get()
    page = client_logged_in.get(job.get_absolute_url()).content.decode()
    assert 'id="check-report"' in page and "Tests check an unstated port." in page
    assert '<td class="task-checks">' in page
    header = client_logged_in.get(trial.get_absolute_url()).content.decode()
    assert 'id="task-checks"' in header and "tests_match_instruction: fail" in header


def test_a_job_summary_beside_its_trials_without_a_config_is_their_job(tmp_path, client_logged_in):
    folder = tmp_path / "copied"
    write_json(folder / "result.json", job_result({"a__AAA": 1.0, "b__BBB": 0.0}))
    for name, reward in (("a__AAA", 1.0), ("b__BBB", 0.0)):
        write_json(folder / name / "result.json", trial_result(name, reward))
    import_path(folder)
    job = Job.objects.get()
    assert job.key == f"harbor:{JOB_ID}" and job.result["n_total_trials"] == 2
    assert Trial.objects.filter(job=job).count() == 2
    assert "2 trials" in client_logged_in.get(job.get_absolute_url()).content.decode()


@pytest.mark.parametrize("job_first", [True, False])
def test_a_job_summary_imported_apart_from_its_trials_is_joined_to_them(tmp_path, job_first):
    summary = tmp_path / "summary" / "result.json"
    write_json(summary, job_result({"a__AAA": 1.0, "b__BBB": 0.0}))
    trials = []
    for name, reward in (("a__AAA", 1.0), ("b__BBB", 0.0)):
        write_json(tmp_path / name / "result.json", trial_result(name, reward))
        trials.append(tmp_path / name)
    for path in [summary, *trials] if job_first else [*trials, summary]:
        imp = import_path(path)
    job = Job.objects.get()
    assert (imp.outcomes[0].get("adopted") == 2) is (not job_first)  # the summary, imported last, joined both
    assert sorted(Trial.objects.filter(job=job).values_list("name", flat=True)) == ["a__AAA", "b__BBB"]
    assert not job.extra and job.result["id"] == JOB_ID


def test_a_timed_out_harbor_trial_that_still_has_a_reward_is_flagged(tmp_path):
    job = job_folder(tmp_path, {})
    data = trial_result("slow__AAA", 1.0, "AgentTimeoutError")
    write_json(job / "slow__AAA" / "result.json", data)
    import_path(job)
    trial = Trial.objects.get()
    assert trial.status == "timeout" and trial.reward == 1.0
    assert trial.is_flagged and trial.safety_flags == ["timeout-with-reward"]


def test_a_failing_trial_of_a_task_harbor_check_failed_is_classed_task_quality(tmp_path):
    report = {"tasks": {"hello": {"checks": {"tests_match_instruction": {"outcome": "fail", "explanation": "No."}}}}}
    import_path(job_folder(tmp_path, {"hello__AAA": 0.0, "other__BBB": 0.0}, **{"check_report.json": report}))
    classes = dict(Trial.objects.values_list("name", "failure_class"))
    assert classes == {"hello__AAA": "task_quality", "other__BBB": "capability"}


@pytest.mark.parametrize("order", ["a-then-b", "b-then-a"])
def test_a_job_imported_in_parts_each_with_the_jobs_result_keeps_one_trial_per_folder(tmp_path, order):
    whole = job_folder(tmp_path, {"a__AAA": 1.0, "b__BBB": 0.0})
    parts = {}
    for name in ("a__AAA", "b__BBB"):  # each part: the job's files and one trial folder
        part = tmp_path / f"part-{name}" / "job"
        part.mkdir(parents=True)
        for f in ("config.json", "result.json"):
            (part / f).write_bytes((whole / f).read_bytes())
        (whole / name).rename(part / name)
        parts[name] = part
    first, second = ("a__AAA", "b__BBB") if order == "a-then-b" else ("b__BBB", "a__AAA")
    import_path(parts[first])
    assert "named only" in Trial.objects.get(name=second).provenance["evidence"]  # known from the stats
    imp = import_path(parts[second])
    assert imp.status == "done"
    trials = Trial.objects.filter(job__name="newest")
    assert sorted(trials.values_list("name", flat=True)) == ["a__AAA", "b__BBB"]
    assert not [t for t in trials if "evidence" in t.provenance]  # both from their folders, no stand-in left
