"""A Harbor job that arrives in parts (its trials one by one, its result.json last, in any order
with its config.json) is one job: the same as any earlier import of its folder, its result applied."""

from __future__ import annotations

import shutil
from datetime import datetime

import orjson
import pytest

from tests.builders import import_path, write_trial
from trials.demo import write_job
from trials.models import Job, Trial

pytestmark = pytest.mark.django_db


def demo_job(folder):
    return write_job(folder, "copied-job", role="baseline", configuration_id="c", agent="a", model="m", tasks=2,
                     attempts=2, steps_per_trial=4, with_extras=False)  # fmt: skip


def outcome(imp) -> dict:
    [line] = imp.outcomes
    return line


def test_trials_copied_one_by_one_then_their_result_json_make_one_job_with_its_result(tmp_path):
    source = demo_job(tmp_path / "source")
    copy = tmp_path / "jobs" / "copied-job"
    copy.mkdir(parents=True)
    shutil.copy(source / "config.json", copy)
    trials = sorted(p for p in source.iterdir() if p.is_dir())
    for trial in trials:  # each imported alone, as `import_packs --watch` does when its result.json is complete
        shutil.copytree(trial, copy / trial.name)
        assert outcome(import_path(copy / trial.name))["outcome"] == "imported"
    result = orjson.loads((source / "result.json").read_bytes())
    assert Job.objects.get().key == f"harbor:{result['id']}"  # the id its trials name, before its result.json
    shutil.copy(source / "result.json", copy)
    line = outcome(import_path(copy))
    assert (line["outcome"], line["already"], line["job_results"]) == ("imported", len(trials), 1)
    job = Job.objects.get()
    assert job.result == result and job.started_at == datetime.fromisoformat(result["started_at"])
    assert job.trials.count() == len(trials) == Trial.objects.count()


def test_a_watched_folder_imported_earlier_stays_the_same_job(tmp_path):
    source = demo_job(tmp_path / "source")
    first, *others = sorted(p for p in source.iterdir() if p.is_dir())
    folder = tmp_path / "copied-job"
    folder.mkdir()
    shutil.copy(source / "config.json", folder)
    shutil.copytree(first, folder / first.name)
    import_path(folder)  # the whole folder, while it held one trial and no result.json
    earlier = Job.objects.get()
    for trial in others:
        shutil.copytree(trial, folder / trial.name)
        import_path(folder / trial.name)
    shutil.copy(source / "result.json", folder)
    import_path(folder)
    assert list(Job.objects.values_list("pk", flat=True)) == [earlier.pk]
    assert Job.objects.get().result["stats"]["n_completed_trials"] == 4 == earlier.trials.count()


def test_a_job_known_only_by_name_is_adopted_when_its_result_names_its_id(tmp_path):
    folder = tmp_path / "named-job"
    lone = write_trial(folder, "task-a__AAAAAAA")  # its result names no job id
    import_path(lone)  # copied before the job's config.json: a trial of no job yet
    (folder / "config.json").write_bytes(orjson.dumps({"job_name": "named-job", "agents": [{"name": "a"}]}))
    import_path(write_trial(folder, "task-b__BBBBBBB"))  # a job by its name alone
    assert list(Job.objects.values_list("key", flat=True)) == ["harbor:named-job"]
    times = {"started_at": "2026-11-26T00:00:00Z", "finished_at": "2026-11-26T02:00:00Z"}
    (folder / "result.json").write_bytes(orjson.dumps({"id": "job-77", "n_total_trials": 2, "stats": {}, **times}))
    line = outcome(import_path(folder))
    assert (line["outcome"], line["regrouped"], line["job_results"]) == ("imported", 1, 1)
    job = Job.objects.get()
    assert job.key == "harbor:job-77" and job.finished_at is not None and job.started_at is not None
    assert sorted(job.trials.values_list("name", flat=True)) == ["task-a__AAAAAAA", "task-b__BBBBBBB"]


def test_a_finished_jobs_result_is_not_replaced_by_a_copy_of_it_while_it_ran(tmp_path):
    folder = tmp_path / "job"
    write_trial(folder, "task-a__AAAAAAA")
    (folder / "config.json").write_bytes(orjson.dumps({"job_name": "job", "agents": [{"name": "a"}]}))
    done = {"id": "j1", "n_total_trials": 1, "stats": {"n_completed_trials": 1}, "finished_at": "2026-11-26T02:00:00Z"}
    (folder / "result.json").write_bytes(orjson.dumps(done))
    import_path(folder)
    (folder / "result.json").write_bytes(orjson.dumps(done | {"finished_at": None, "stats": {}}))
    line = outcome(import_path(folder))
    assert line["outcome"] == "already imported" and not line.get("job_results")
    assert Job.objects.get().result == done
