"""A job's trials are written in batches (one transaction, one insert per table): the same rows as one by one."""

from __future__ import annotations

import gc
from pathlib import Path

import orjson
import pytest
from django.db import models

from tests.builders import import_path
from trials.demo import write_job
from trials.imports.writer import TrialBatch, write_trials
from trials.ingest.formats import atif
from trials.models import (
    Artifact,
    Blob,
    Configuration,
    ContextRecord,
    Dataset,
    FailureCluster,
    Import,
    Job,
    ObservationResult,
    Pack,
    PermissionDecision,
    RewardCriterion,
    RuntimeEvent,
    Step,
    Task,
    ToolCall,
    Trajectory,
    Trial,
)

pytestmark = pytest.mark.django_db

DUMPED = [Dataset, Task, Configuration, Job, Trial, Trajectory, Step, ToolCall, ObservationResult, RewardCriterion,
          Artifact, RuntimeEvent, PermissionDecision, ContextRecord]  # fmt: skip


def natural_rows() -> dict[str, list[str]]:
    """Every row of the import's tables, its ids replaced by what it points to (ids differ between runs)."""
    labels: dict[type[models.Model], dict[int, object]] = {
        Blob: dict(Blob.objects.values_list("pk", "sha256")),
        Pack: dict(Pack.objects.values_list("pk", "sha256")),
        FailureCluster: dict(FailureCluster.objects.values_list("pk", "key")),  # a trial's, by its signature
    }
    natural = {
        Dataset: ("name", "version"),
        Task: ("dataset", "name", "checksum"),
        Configuration: ("key",),
        Job: ("key",),
        Trial: ("key",),
        Trajectory: ("trial", "position"),
        Step: ("trajectory", "index"),
    }
    dumped = {}
    for model in DUMPED:
        rows = []
        for row in model.objects.order_by("pk").values():
            pk = row.pop("id")
            for field in model._meta.concrete_fields:
                if isinstance(field, models.DateTimeField) and (field.auto_now or field.auto_now_add):
                    row.pop(field.attname)
                elif field.is_relation and row[field.attname] is not None:
                    row[field.attname] = labels[field.related_model][row[field.attname]]
            if model in natural:
                labels.setdefault(model, {})[pk] = tuple(row[model._meta.get_field(f).attname] for f in natural[model])
            rows.append(repr(sorted(row.items())))
        dumped[model.__name__] = sorted(rows)
    return dumped


def without_ids(outcomes: list[dict]) -> list[dict]:
    return [{k: v for k, v in outcome.items() if k != "pack_id"} for outcome in outcomes]


def delete_everything() -> None:
    Trial.objects.all().delete()
    for model in (Job, Task, Dataset, Configuration, Pack, Blob, Import):
        model.objects.all().delete()


@pytest.fixture
def demo_job(tmp_path) -> Path:
    return write_job(tmp_path, "batch-job", role="candidate", configuration_id="batch-candidate", agent="terminus-2",
                     model="openai/gpt-5.4", tasks=4, attempts=2, seed=3)  # fmt: skip


def with_embedded_subagent(trajectory_path: Path) -> None:
    """A v1.7 subagent inside its parent's file: its steps are copied to a blob of their own."""
    trajectory = orjson.loads(trajectory_path.read_bytes())
    trajectory["schema_version"] = "ATIF-v1.7"
    trajectory["subagent_trajectories"] = [
        {
            "schema_version": "ATIF-v1.7",
            "session_id": "sub-session",
            "trajectory_id": "sub-1",
            "agent": {"name": "helper", "version": "1"},
            "steps": [
                {"step_id": 1, "source": "user", "message": "look it up"},
                {"step_id": 2, "source": "agent", "message": "found it", "model_name": "m"},
            ],
        }
    ]
    trajectory_path.write_bytes(orjson.dumps(trajectory))


def test_a_job_written_in_batches_has_the_same_rows_as_one_written_trial_by_trial(demo_job, monkeypatch):
    with_embedded_subagent(sorted(demo_job.glob("*/agent/trajectory.json"))[1])
    with monkeypatch.context() as m:
        m.setattr(TrialBatch, "takes", lambda self, parsed: False)
        one_by_one = import_path(demo_job)
    rows_one_by_one = natural_rows()
    delete_everything()

    batches = []
    monkeypatch.setattr(TrialBatch, "MAX_TRIALS", 3)  # (the bytes limit is far off)
    monkeypatch.setattr(
        "trials.imports.pack_write.write_trials",
        lambda batch, *args: batches.append(len(batch)) or write_trials(batch, *args),
    )
    batched = import_path(demo_job)

    assert batches and sum(batches) >= 6 and max(batches) == 3  # several batches, the last one short
    assert natural_rows() == rows_one_by_one
    assert without_ids(batched.outcomes) == without_ids(one_by_one.outcomes)
    assert batched.problems == one_by_one.problems
    assert Trial.objects.count() == 8 and Step.objects.count() > 0
    [subagent] = Trajectory.objects.filter(role="subagent")
    assert subagent.step_count == 2 and subagent.step_bodies_id not in (None, subagent.blob_id)  # a copy
    assert Trajectory.objects.exclude(step_bodies=None).count() == Trajectory.objects.exclude(step_count=0).count()


def test_a_trial_whose_steps_fail_to_read_is_rejected_alone_and_its_batch_imported(demo_job, monkeypatch):
    real = atif.parse_step
    broken = sorted(demo_job.glob("*/agent/trajectory.json"))[2]

    def parse_step(raw, index):
        if index == 1 and raw.get("message") == "BROKEN":
            raise OverflowError("injected bug in reading a step")
        return real(raw, index)

    trajectory = orjson.loads(broken.read_bytes())
    trajectory["steps"][1]["message"] = "BROKEN"
    broken.write_bytes(orjson.dumps(trajectory))
    monkeypatch.setattr(atif, "parse_step", parse_step)
    imp = import_path(demo_job)

    outcome = imp.outcomes[0]
    assert outcome["rejected"] == 1 and outcome["trials"] == 7, imp.problems
    assert not Trial.objects.filter(name=broken.parent.parent.name).exists()
    assert any("injected bug in reading a step" in p["message"] for p in imp.problems)


def test_the_same_trial_twice_in_one_pack_is_imported_once(tmp_path):
    job = write_job(tmp_path, "twice", role="baseline", configuration_id="twice", agent="a", model="m", tasks=2,
                    attempts=1, with_extras=False)  # fmt: skip
    first = sorted(p for p in job.iterdir() if p.is_dir())[0]
    copy = job / f"{first.name}-copy"
    copy.mkdir()
    for path in first.rglob("*"):
        if path.is_file():
            (copy / path.relative_to(first)).parent.mkdir(parents=True, exist_ok=True)
            (copy / path.relative_to(first)).write_bytes(path.read_bytes())
    imp = import_path(job)
    assert imp.outcomes[0]["trials"] == 2 and imp.outcomes[0]["already"] == 1, imp.outcomes
    assert Trial.objects.count() == 2


def test_a_second_job_on_the_same_tasks_uses_their_rows(tmp_path):
    common = {"agent": "terminus-2", "model": "m", "tasks": 3, "attempts": 2, "seed": 5, "with_extras": False}
    baseline = write_job(tmp_path, "baseline", role="baseline", configuration_id="b", **common)
    candidate = write_job(tmp_path, "candidate", role="candidate", configuration_id="c", **common)
    import_path(baseline)
    tasks = dict(Task.objects.values_list("name", "pk"))
    import_path(candidate)
    assert len(tasks) == 3 and dict(Task.objects.values_list("name", "pk")) == tasks
    for job in ("baseline", "candidate"):
        trials = Trial.objects.filter(job__name=job)
        assert trials.count() == 6 and set(trials.values_list("task_id", flat=True)) == set(tasks.values())


def test_a_batch_closes_once_it_holds_the_configured_bytes_of_files(demo_job, monkeypatch, settings):
    sizes = {
        d.name: sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in demo_job.iterdir() if d.is_dir()
    }
    settings.IMPORT_BATCH_BYTES = 2 * max(sizes.values())
    batches = []
    monkeypatch.setattr(
        "trials.imports.pack_write.write_trials",
        lambda batch, *args: batches.append([t.name for t in batch]) or write_trials(batch, *args),
    )
    imp = import_path(demo_job)
    assert imp.outcomes[0]["trials"] == 8 and sum(map(len, batches)) == 8 and len(batches) >= 3
    first, *later = batches
    assert len(first) == 1  # the pack's first trial is written alone: on the pages while the rest is read
    for batch in later:
        assert sum(sizes[name] for name in batch[:-1]) < settings.IMPORT_BATCH_BYTES  # open until its last trial
    for batch in later[:-1]:
        assert sum(sizes[name] for name in batch) >= settings.IMPORT_BATCH_BYTES


def test_a_packs_first_trial_is_written_before_the_rest_of_its_pack_is_read(demo_job, monkeypatch):
    seen = []  # the trials stored when each later batch is written
    monkeypatch.setattr(
        "trials.imports.pack_write.write_trials",
        lambda batch, *args: seen.append(Trial.objects.count()) or write_trials(batch, *args),
    )
    import_path(demo_job)
    assert seen[0] == 0 and seen[1] == 1  # one trial was stored before the second batch was written


def test_a_trial_bigger_than_a_batch_is_written_alone_reading_its_steps_as_it_goes(demo_job, monkeypatch, settings):
    sizes = {
        d.name: sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in demo_job.iterdir() if d.is_dir()
    }
    biggest = max(sizes, key=sizes.get)
    settings.IMPORT_BATCH_BYTES = sizes[biggest] - 1
    batched = []
    monkeypatch.setattr(
        "trials.imports.pack_write.write_trials",
        lambda batch, *args: batched.extend(t.name for t in batch) or write_trials(batch, *args),
    )
    imp = import_path(demo_job)
    assert imp.outcomes[0]["trials"] == 8
    assert biggest not in batched and len(batched) == 7
    assert Trial.objects.get(name=biggest).step_count == Step.objects.filter(trial__name=biggest).count() > 0


def test_full_garbage_collections_are_rarer_during_an_import_and_as_before_after_it(demo_job, monkeypatch):
    seen = []
    monkeypatch.setattr(
        "trials.imports.pack_write.write_trials", lambda *args: seen.append(gc.get_threshold()) or write_trials(*args)
    )
    before = gc.get_threshold()
    import_path(demo_job)
    assert seen and all(threshold[2] >= 10 * before[2] for threshold in seen)
    assert gc.get_threshold() == before
