"""Terminal-Bench 1 leaderboard submissions in every layout name their configuration one way: from the
submission folder (`<date>_<agent>_<model>`), the model from that name when no run file has it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.builders import REFERENCE, import_path
from tests.factories import DatasetFactory, TaskFactory, TrialFactory
from trials.models import Configuration, Job, Trial

pytestmark = pytest.mark.django_db

SUBMISSION = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
RUN_ID = "2025-08-07__20-46-16"
RUN = SUBMISSION / RUN_ID
ROWS = json.loads((RUN / "results.json").read_text())["results"]
DROID = REFERENCE / "public-runs-2" / "tb1-droid-5x2"
GOOSE = REFERENCE / "public-runs-2" / "tb1-goose-flat"
DATASET_FOLDER = "terminal-bench-core@0.1.1"


def write(folder: Path, name: str, data: object) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_a_run_folder_is_configured_by_its_submission_folder_like_the_flat_files():
    import_path(SUBMISSION)
    (configuration,) = Configuration.objects.all()
    assert configuration.key == SUBMISSION.name
    metadata = json.loads((RUN / "run_metadata.json").read_text())
    assert (configuration.agent_name, configuration.model_name) == (metadata["agent_name"], metadata["model_name"])


def test_the_droid_runs_give_one_configuration_per_submission_folder():
    import_path(DROID)
    expected = {folder.name: len(list(folder.iterdir())) for folder in DROID.iterdir() if folder.is_dir()}
    found = {c.key: Job.objects.filter(trials__configuration=c).distinct().count() for c in Configuration.objects.all()}
    assert found == expected


def test_run_files_at_the_submission_root_with_no_model_take_it_from_the_folder_name(tmp_path):
    submission = tmp_path / DATASET_FOLDER / "20250902_orchestrator_qwen-3-coder-480B"
    metadata = json.loads((RUN / "run_metadata.json").read_text()) | {"model_name": None, "agent_name": "orchestrator"}
    write(submission, "run_metadata.json", metadata)
    results = json.loads((RUN / "results.json").read_text()) | {"pass_at_k": {"2": None, "5": 0.25}}
    write(submission, "results.json", results)
    import_path(tmp_path / DATASET_FOLDER)
    (configuration,) = Configuration.objects.all()
    assert configuration.key == submission.name
    assert (configuration.agent_name, configuration.model_name) == ("orchestrator", "qwen-3-coder-480B")
    trials = Trial.objects.all()
    assert trials.count() == len(ROWS)
    assert trials.filter(status="passed").count() == sum(1 for row in ROWS if row["is_resolved"] is True)
    assert (trials.first().dataset.name, trials.first().dataset.version) == ("terminal-bench-core", "0.1.1")
    assert Job.objects.get().result["pass_at_k"] == {"2": None, "5": 0.25}


def test_a_folder_name_with_at_signs_and_colons_is_a_submission_not_a_dataset(tmp_path):
    name = "20250915_terminus-2_anthropic:claude-opus-4@20250514"
    submission = tmp_path / DATASET_FOLDER / name
    rows = ROWS[:3]
    write(submission, f"{RUN_ID}_results.json", {"id": "r1", "results": rows, "pass_at_k": {"1": 0.5}})
    import_path(tmp_path / DATASET_FOLDER)
    (configuration,) = Configuration.objects.all()
    assert (configuration.key, configuration.agent_name) == (name, "terminus-2")
    assert configuration.model_name == "anthropic:claude-opus-4@20250514"
    assert Trial.objects.count() == 3
    assert {t.dataset.name for t in Trial.objects.all()} == {"terminal-bench-core"}


def test_the_flat_goose_files_uploaded_with_their_relative_paths_are_configured_by_their_folder(
    client_logged_in, django_capture_on_commit_callbacks
):
    submission = next(p for p in GOOSE.iterdir() if p.is_dir())
    files = sorted(submission.glob("*_results.json"))
    uploads = [SimpleUploadedFile(path.name, path.read_bytes()) for path in files]
    paths = [f"{submission.name}/{path.name}" for path in files]
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/imports/", {"files": uploads, "paths": paths})
    assert response.status_code == 302
    assert set(Configuration.objects.values_list("key", flat=True)) == {submission.name}
    assert Trial.objects.count() == sum(len(json.loads(p.read_text())["results"]) for p in files)
    assert Job.objects.count() == len(files)


def test_the_api_takes_a_files_relative_path(client_logged_in, django_capture_on_commit_callbacks):
    submission = next(p for p in GOOSE.iterdir() if p.is_dir())
    path = sorted(submission.glob("*_results.json"))[0]
    upload = SimpleUploadedFile(path.name, path.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/api/imports/", {"file": upload, "path": f"../{submission.name}/{path.name}"})
    assert response.status_code == 202, response.content
    assert set(Configuration.objects.values_list("key", flat=True)) == {submission.name}


def test_a_run_file_past_the_row_limit_keeps_the_first_rows_and_names_the_first_left_out(tmp_path, settings):
    settings.IMPORT_MAX_RUN_ROWS = 50
    folder = tmp_path / SUBMISSION.name / RUN_ID
    folder.mkdir(parents=True)
    for name in ("results.json", "run_metadata.json"):
        (folder / name).write_bytes((RUN / name).read_bytes())
    imp = import_path(tmp_path / SUBMISSION.name)
    assert set(Trial.objects.values_list("task__name", flat=True)) == {row["task_id"] for row in ROWS[:50]}
    (problem,) = [p for p in imp.problems if "IMPORT_MAX_RUN_ROWS" in p["message"]]
    assert problem["file"].endswith("/results.json") and problem["json_path"] == "$.results[50]"
    assert f"other {len(ROWS) - 50} only in the stored file" in problem["kept"]


@pytest.mark.parametrize("layout", ["run folder", "flat file"])
def test_a_big_results_file_is_streamed_to_the_same_trials(tmp_path, monkeypatch, layout):
    from trials.ingest.formats import detect, terminal_bench, terminal_bench_folder

    monkeypatch.setattr(terminal_bench, "STREAM_THRESHOLD", 1024)  # (the real one is 32 MiB)
    real = terminal_bench.load_json

    def never_whole(path, *args, **kwargs):
        assert not path.name.endswith("results.json"), f"{path.name} parsed whole"
        return real(path, *args, **kwargs)

    for module in (terminal_bench, terminal_bench_folder, detect):
        monkeypatch.setattr(module, "load_json", never_whole)
    name = f"{RUN_ID}/results.json" if layout == "run folder" else f"{RUN_ID}_results.json"
    target = tmp_path / SUBMISSION.name / name
    target.parent.mkdir(parents=True)
    target.write_bytes((RUN / "results.json").read_bytes())
    import_path(tmp_path / SUBMISSION.name)
    trials = Trial.objects.all()
    assert sorted(trials.values_list("key", flat=True)) == sorted(f"tb1:{row['id']}" for row in ROWS)
    assert trials.filter(status="passed").count() == sum(1 for row in ROWS if row["is_resolved"] is True)
    assert Job.objects.get().result["accuracy"] == json.loads((RUN / "results.json").read_text())["accuracy"]


def test_only_a_dataset_named_by_its_tasks_moves_to_the_dataset_that_holds_them():
    # A benchmark that names itself without a version keeps its tasks, even when every one of their
    # names is in the droid runs' dataset (Inspect's sample 56 is not Terminal-Bench's task 56).
    droid = DROID / "20250923_droid_claude-4-sonnet"
    [results, *_] = sorted(droid.glob("*/results.json"))
    name = json.loads(results.read_text())["results"][0]["task_id"]
    other = TrialFactory(task=TaskFactory(name=name, dataset=DatasetFactory(name="another-benchmark", version="")))
    import_path(GOOSE)
    import_path(droid)
    other.refresh_from_db()
    assert (other.task.dataset.name, other.task.dataset.version, other.task.name) == ("another-benchmark", "", name)
    goose = Trial.objects.filter(configuration__key=next(GOOSE.iterdir()).name)
    assert goose.count() and set(goose.values_list("task__dataset__name", flat=True)) == {"terminal-bench-core"}
