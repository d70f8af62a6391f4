"""Terminal-Bench 1 run output: the three layouts of real leaderboard submissions, through the
upload form and import_packs, with known answers on the shared sample."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from tests.builders import REFERENCE, import_path
from trials.models import Import, Job, Trial

pytestmark = pytest.mark.django_db

SUBMISSION = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
RUN_ID = "2025-08-07__20-46-16"
RUN = SUBMISSION / RUN_ID
PUBLISHED = json.loads((RUN / "results.json").read_text())
ROWS = PUBLISHED["results"]


def import_command(path: Path) -> str:
    out = io.StringIO()
    call_command("import_packs", str(path), "--no-progress", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def submission_copy(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """A submission folder named like the leaderboard's, holding these files."""
    folder = tmp_path / SUBMISSION.name
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def test_a_run_folder_imports_as_one_job_with_a_trial_per_results_row():
    import_command(SUBMISSION)
    job = Job.objects.get()
    assert job.name == RUN_ID and job.source_format == "terminal-bench"
    trials = Trial.objects.filter(job=job)
    assert trials.count() == len(ROWS) == 80
    assert set(trials.values_list("task__name", flat=True)) == {row["task_id"] for row in ROWS}
    assert Counter(trials.values_list("status", flat=True)) == Counter(
        {True: "passed", False: "failed", None: "unknown"}[row["is_resolved"]] for row in ROWS
    )
    configuration = trials.first().configuration
    assert configuration.agent_name == "mini-swe-agent"
    assert configuration.model_name == "anthropic/claude-sonnet-4-20250514"
    assert trials.first().dataset.name == "terminal-bench-core" and trials.first().dataset.version == "0.1.1"


def test_each_runs_score_reproduces_its_published_accuracy_exactly(client_logged_in):
    import_command(SUBMISSION)
    job = Job.objects.get()
    trials = Trial.objects.filter(job=job)
    assert trials.filter(status="passed").count() / trials.count() == PUBLISHED["accuracy"] == 0.1375
    page = client_logged_in.get(job.get_absolute_url()).content.decode()
    assert '<dd id="job-accuracy">0.1375 ' in page and '<span id="published-accuracy">0.1375</span>' in page
    assert "32 unscored</a> count as not passed" in page


def test_a_null_is_resolved_is_unscored_never_a_failure_and_its_failure_mode_is_kept(client_logged_in):
    import_command(SUBMISSION)
    unscored = Trial.objects.filter(reward=None)
    assert unscored.count() == sum(1 for row in ROWS if row["is_resolved"] is None) == 32
    assert not unscored.filter(pk__in=Trial.objects.failed()).exists()
    assert Trial.objects.failed().count() == 37
    assert client_logged_in.get("/trials/?unscored=true").context["page"].paginator.count == 32
    trial = Trial.objects.get(task__name="super-benchmark-upet")  # a row with no trial folder
    assert trial.status == "unknown" and trial.failure_category == "unknown_agent_error"
    assert trial.provenance["failure_mode"] == "unknown_agent_error"
    assert "no trial folder" in trial.provenance["evidence"] and not trial.trajectories.exists()
    page = client_logged_in.get(trial.get_absolute_url()).content.decode()
    assert "unknown_agent_error" in page


def test_an_unscored_row_reads_unscored_on_its_page_the_list_and_the_queue(client_logged_in):
    import_command(SUBMISSION)
    row = next(r for r in ROWS if r["is_resolved"] is None)
    trial = Trial.objects.get(task__name=row["task_id"])
    unscored = 'title="ended with no verdict: no reward">unscored</span>'
    page = client_logged_in.get(trial.get_absolute_url()).content.decode()
    assert page.count(unscored) == 2  # the title's badge and the header's status
    assert 'id="trial-status"' in page and ">unknown</span>" not in page
    listing = client_logged_in.get(f"/trials/?task={row['task_id']}").content.decode()
    queue = client_logged_in.get(f"/triage/?task={row['task_id']}").content.decode()
    assert unscored in listing and unscored in queue


def test_a_trial_folder_gives_its_commands_as_steps_its_tests_its_panes_and_its_recordings(client_logged_in):
    import_command(SUBMISSION)
    trial = Trial.objects.get(task__name="heterogeneous-dates")
    assert (trial.status, trial.reward, trial.attempt) == ("passed", 1.0, 1)
    assert trial.failure_category == "agent_timeout"
    assert trial.ctrf_tests == [
        {"name": name, "status": "passed"}
        for name in ("test_avg_temp_file_exists", "test_avg_temp_file_format", "test_avg_temp_value")
    ]
    trajectory = trial.trajectories.get()
    # commands.txt's 10 lines: the harness's 9 (recordings, agent install, tests) apart, the agent's run a step
    assert trajectory.step_count == 1 and trajectory.path.endswith("/commands.txt#keystrokes")
    [step] = trajectory.steps.all()
    assert step.message_text.startswith("mini -m anthropic/claude-sonnet-4-20250514 -t ") and step.source == "agent"
    harness = trajectory.header["harness"]
    assert len(harness) == 9 and harness[0]["keys"] == "asciinema rec --stdin /logs/agent.cast <Enter>"
    assert harness[-1]["keys"] == "<C-d>" and harness[-1]["line"] == 10
    assert {"panes/pre-agent.txt", "panes/post-agent.txt", "sessions/agent.log"} <= set(trial.texts)
    assert round(trial.phases["agent_execution"]["seconds"], 3) == 436.564
    assert sorted(trial.artifacts.values_list("source", "kind")) == [
        ("sessions/agent.cast", "asciicast"),
        ("sessions/tests.cast", "asciicast"),
    ]
    page = client_logged_in.get(f"{trial.get_absolute_url()}?tab=artifacts")
    html = page.content.decode()
    assert html.count('class="cast-player"') == 2 and "asciinema/asciinema-player.min.js" in html
    assert "'wasm-unsafe-eval'" in page["Content-Security-Policy"]
    assert "'wasm-unsafe-eval'" not in client_logged_in.get("/trials/")["Content-Security-Policy"]
    logs = client_logged_in.get(f"{trial.get_absolute_url()}?tab=agent-logs").content.decode()
    assert "panes/post-agent.txt" in logs


def test_a_recording_is_served_to_the_player_as_asciicast_with_secrets_masked(client_logged_in, tmp_path):
    run = tmp_path / SUBMISSION.name / RUN_ID
    shutil.copytree(RUN, run)
    cast = next(run.glob("heterogeneous-dates/*/sessions/agent.cast"))
    cast.chmod(0o644)
    key = "sk-ant-api03-AbCdEf0123456789GhIjKl"
    cast.write_text(cast.read_text() + json.dumps([99.0, "o", f"export ANTHROPIC_API_KEY={key}\r\n"]) + "\n")
    import_command(tmp_path / SUBMISSION.name)
    artifact = Trial.objects.get(task__name="heterogeneous-dates").artifacts.get(source="sessions/agent.cast")
    response = client_logged_in.get(f"/trials/{artifact.trial_id}/artifacts/{artifact.pk}/recording/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    lines = response.content.decode().splitlines()
    assert json.loads(lines[0])["version"] == 2
    assert json.loads(lines[-1]) == [99.0, "o", "export ANTHROPIC_API_KEY=[redacted]\r\n"]
    assert key not in response.content.decode()
    client_logged_in.logout()
    assert client_logged_in.get(f"/trials/{artifact.trial_id}/artifacts/{artifact.pk}/recording/").status_code == 302


def test_the_upload_form_imports_a_zipped_submission(client_logged_in, django_capture_on_commit_callbacks):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(SUBMISSION.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(SUBMISSION.parent).as_posix())
    upload = SimpleUploadedFile("tb1-submission.zip", buffer.getvalue())
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/imports/", {"files": [upload]})
    assert response.status_code == 302
    imp = Import.objects.get()
    assert imp.status == "done", imp.problems
    assert Trial.objects.filter(job__name=RUN_ID).count() == 80
    assert Trial.objects.get(task__name="crack-7z-hash.hard").trajectories.get().step_count == 1  # (the agent's)


def test_a_run_folder_with_only_the_run_files_keeps_every_row_as_a_trial_without_evidence(tmp_path):
    names = ("results.json", "run_metadata.json", "tb.lock")
    folder = submission_copy(tmp_path, {f"{RUN_ID}/{n}": (RUN / n).read_bytes() for n in names})
    import_path(folder)
    trials = Trial.objects.filter(job__name=RUN_ID)
    assert trials.count() == 80 and not trials.filter(trajectories__isnull=False).exists()
    assert trials.filter(status="passed").count() == PUBLISHED["n_resolved"]


def test_a_flat_results_file_is_a_run_named_by_its_file_and_configured_by_its_submission_folder(tmp_path):
    folder = submission_copy(tmp_path, {f"{RUN_ID}_results.json": (RUN / "results.json").read_bytes()})
    import_path(folder)
    job = Job.objects.get()
    assert job.name == RUN_ID
    trials = Trial.objects.filter(job=job)
    assert trials.count() == 80
    assert {t.configuration.key for t in trials} == {SUBMISSION.name}  # run_metadata names no model here
    assert trials.filter(status="passed").count() / trials.count() == PUBLISHED["accuracy"]


def test_the_same_run_in_two_layouts_is_one_set_of_trials(tmp_path):
    import_command(SUBMISSION)
    folder = submission_copy(tmp_path, {f"{RUN_ID}_results.json": (RUN / "results.json").read_bytes()})
    import_path(folder)
    assert Trial.objects.count() == 80


def test_a_row_missing_task_id_is_named_by_file_and_row_and_the_good_rows_are_imported(tmp_path):
    broken = json.loads((RUN / "results.json").read_text())
    del broken["results"][3]["task_id"]
    folder = submission_copy(tmp_path, {f"{RUN_ID}_results.json": json.dumps(broken).encode()})
    imp = import_path(folder)
    [problem] = [p for p in imp.problems if p["severity"] == "error"]
    assert problem["file"] == f"{SUBMISSION.name}/{RUN_ID}_results.json"
    assert problem["json_path"] == "$.results[3].task_id"
    assert "row 4" in problem["message"] and broken["results"][3]["trial_name"] in problem["message"]
    assert "other rows" in problem["kept"]
    assert Trial.objects.count() == 79
    assert not Trial.objects.filter(name=broken["results"][3]["trial_name"]).exists()


def test_a_resolved_trial_whose_agent_timed_out_is_flagged_timeout_with_reward():
    import_command(SUBMISSION)
    resolved_after_timeout = [r for r in ROWS if r["is_resolved"] and r["failure_mode"] == "agent_timeout"]
    flagged = Trial.objects.filter(is_flagged=True, reward=1.0)
    assert flagged.count() == len(resolved_after_timeout) > 0
    assert all(t.safety_flags == ["timeout-with-reward"] for t in flagged)


def test_a_trial_folder_alone_is_its_trial_with_its_evidence_and_the_run_later_adds_nothing_twice():
    folder = next(RUN.glob("heterogeneous-dates/*"))
    import_path(folder)
    trial = Trial.objects.get()
    assert (trial.status, trial.reward, trial.job) == ("passed", 1.0, None)
    assert trial.benchmark["runId"] == RUN_ID and trial.trajectories.get().step_count == 1  # (the agent's line)
    import_command(SUBMISSION)
    assert Trial.objects.count() == 80 and Trial.objects.filter(name=trial.name).count() == 1


def test_zero_tokens_from_an_agent_that_reports_none_are_not_counted_and_real_counts_are_kept(tmp_path):
    """tb writes 0 and 0 when its agent reports no usage (mini-swe-agent here): unknown, never "none used"."""
    rows = json.loads((RUN / "results.json").read_text())
    zero = next(r for r in rows["results"] if (r["total_input_tokens"], r["total_output_tokens"]) == (0, 0))
    counted = rows["results"][0] if rows["results"][0] is not zero else rows["results"][1]
    counted["total_input_tokens"], counted["total_output_tokens"] = 1200, 0
    import_path(submission_copy(tmp_path, {f"{RUN_ID}_results.json": json.dumps(rows).encode()}))
    assert Trial.objects.values_list("input_tokens", "output_tokens").get(name=zero["trial_name"]) == (None, None)
    assert Trial.objects.values_list("input_tokens", "output_tokens").get(name=counted["trial_name"]) == (1200, 0)
    assert (
        Trial.objects.get(name=zero["trial_name"]).documents["result"]["total_input_tokens"] == 0
    )  # (kept as written)


def test_a_runs_trials_pass_the_joinability_checks_their_run_can_answer():
    """Identity, reward details (the tests' outcomes) and, with its folder, the trajectory; no runtime
    correlation or artifact manifest, which tb does not write."""
    import_command(SUBMISSION)
    with_folder = Trial.objects.filter(step_count__gt=0)
    assert with_folder.count() == 2
    for trial in with_folder:
        tests = ["rewardDetailsRef"] if trial.documents["result"]["parser_results"] is None else []
        assert trial.missing == ["runtimeCorrelation", *tests, "artifactManifestRef"], trial.name
    tested = Trial.objects.exclude(pk__in=with_folder).exclude(documents__result__parser_results=None).first()
    assert tested.missing == ["runtimeCorrelation", "trajectoryRef", "artifactManifestRef"]
