"""Writing parsed trials, each whole or not at all: many at once in one transaction
(`write_trials`), or one transaction per trial (`write_trial`) for those that stream, join
or replace another. A trial already there is found by its natural key and left as it is.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from trials.imports.blobs import StepBodies
from trials.imports.joins import find_trial_for_evidence_pack, join_evidence_pack
from trials.imports.rows import (
    apply_completeness,
    column_count,
    get_configuration,
    get_dataset,
    get_task,
    step_tokens,
    stored_task,
    trial_row,
    write_trial_children,
)
from trials.imports.steps import StepChunk, file_blob, trajectory_row, write_steps, write_trajectory
from trials.ingest import completeness, evidence
from trials.ingest.atif_steps import flag_missing_subagents
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    ParsedStep,
    ParsedTrajectory,
    ParsedTrial,
    Problem,
    TaskRef,
    read_all,
)
from trials.models import (
    AuditEntry,
    Configuration,
    Dataset,
    Job,
    Pack,
    Task,
    Trajectory,
    Trial,
)

_Row = TypeVar("_Row")


class WriteResult(NamedTuple):
    outcome: str  # trials | already | joined | rejected
    steps: int = 0
    trial_id: int | None = None  # the trial written, found already there, or joined
    differs: bool = False  # already there, imported from other bytes than these


def files_sha256(parsed: ParsedTrial, files: dict[str, tuple[Path, str, int]]) -> str:
    """The sha256 of a trial's stored files as (path within the trial, sha256) pairs; blank for shared files.

    The same trial folder gives the same digest, imported alone or within its job; other
    bytes, or files left out (past the size limit), give another.
    """
    stored = [rel for rel in parsed.files if rel in files]
    if not parsed.files_are_its_own or not stored:
        return ""
    base = os.path.commonpath(stored) if len(stored) > 1 else stored[0].rpartition("/")[0]
    pairs = sorted((rel[len(base) :].lstrip("/"), files[rel][1]) for rel in stored)
    return hashlib.sha256(orjson.dumps(pairs)).hexdigest()


def already(parsed: ParsedTrial, trial_id: int, stored_sha256: str) -> WriteResult:
    """The trial is there: from these very files, or (said so) from others, which stay only in the storage."""
    # (an export of the trial is the same trial, whatever the files it adds: nothing to warn of)
    differs = bool(parsed.files_sha256 and stored_sha256 and parsed.files_sha256 != stored_sha256)
    differs = differs and not parsed.exported
    if differs:
        message = (
            f"trial {parsed.name!r} was imported before from other bytes: it keeps what was imported "
            "first; these files are stored, not shown"
        )
        where = os.path.commonpath(parsed.files) if parsed.files else parsed.name
        parsed.problems.append(Problem(where, message, severity="warning", kept="this pack's raw bytes"))
    return WriteResult("already", trial_id=trial_id, differs=differs)


class SharedRows:
    """Datasets, tasks and configurations seen in this import, looked up once each.

    They are created inside the transaction of the first trial that needs them, so a
    trial that rolls back takes its new ones with it; `atomic` then forgets them, so that
    no cached id points at a row that was never committed.
    """

    def __init__(self) -> None:
        self.seen: dict[tuple, object] = {}

    @contextmanager
    def atomic(self) -> Iterator[None]:
        known = set(self.seen)
        try:
            with transaction.atomic():
                yield
        except BaseException:
            for key in self.seen.keys() - known:
                del self.seen[key]
            raise

    def resolve(self, parsed: ParsedTrial) -> tuple[Dataset | None, Task | None, Configuration | None]:
        dataset = self._get(("dataset", _ref_key(parsed.dataset)), lambda: get_dataset(parsed.dataset))
        task = self._get(
            ("task", dataset and dataset.pk, _ref_key(parsed.task)), lambda: get_task(dataset, parsed.task)
        )
        config = self._get(("config", _ref_key(parsed.configuration)), lambda: get_configuration(parsed.configuration))
        return dataset, task, config

    def resolve_tasks(self, trials: list[ParsedTrial]) -> None:
        """The tasks of many trials looked up (or made) at once: a query and an insert, not a few each."""
        wanted: dict[tuple, tuple[tuple, TaskRef]] = {}  # cache key -> (natural key, ref)
        for parsed in trials:
            if parsed.task is None or not parsed.task.name:
                continue
            dataset = self._get(("dataset", _ref_key(parsed.dataset)), functools.partial(get_dataset, parsed.dataset))
            key = ("task", dataset and dataset.pk, _ref_key(parsed.task))
            if key not in self.seen:
                wanted[key] = (
                    (dataset and dataset.pk, parsed.task.name[:300], parsed.task.checksum[:128]),
                    parsed.task,
                )
        if not wanted:
            return
        same_name: dict[tuple, list[Task]] = {}
        for task in Task.objects.filter(name__in={natural[1] for natural, _ in wanted.values()}):
            same_name.setdefault((task.dataset_id, task.name), []).append(task)
        found: dict[tuple, Task] = {}
        new: list[Task] = []
        # (refs with a checksum first: a ref without one then names the task they made, as get_task)
        for natural, ref in sorted(wanted.values(), key=lambda item: not item[0][2]):
            dataset_id, name, checksum = natural
            tasks = same_name.setdefault((dataset_id, name), [])
            if natural in found:
                continue
            if (task := stored_task(tasks, ref)) is None:  # the first trial's ref makes it
                task = Task(dataset_id=dataset_id, name=name, checksum=checksum)
                task.source, task.definition = ref.source[:1000], ref.definition
                new.append(task)
                tasks.append(task)
            found[natural] = task
        Task.objects.bulk_create(new)
        for key, (natural, _) in wanted.items():
            self.seen[key] = found[natural]

    def _get(self, key: tuple, make: Callable[[], _Row]) -> _Row:
        if key not in self.seen:
            self.seen[key] = make()
        return cast(_Row, self.seen[key])  # (a key's kind, its first item, is always made by the same `make`)


def _ref_key(ref: DatasetRef | TaskRef | ConfigurationRef | None) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in vars(ref).items())) if ref is not None else ()


class TrialBatch:
    """Trials written together by `write_trials`: those read whole into memory, up to a size.

    Others each go through `write_trial`, which reads their steps as it writes them: one
    bigger than a batch, one with a streamed trajectory, a trajectory file imported alone,
    an evidence pack to join to its trial, a trajectory file that was a trial of its own
    before.
    """

    MAX_TRIALS = 100  # (and settings.IMPORT_BATCH_BYTES of their files)
    FIRST_TRIALS = 1  # a pack's first batch: its first trial is on the pages while the rest is read

    def __init__(self, files: dict[str, tuple[Path, str, int]], blobs: dict[str, int], lone_blobs: frozenset[int]):
        self.files, self.blobs, self.lone_blobs = files, blobs, lone_blobs
        self.batches = -1  # batches written so far (clear() counts them)
        self.clear()

    def clear(self) -> None:
        self.batches += 1
        self.trials: list[ParsedTrial] = []
        self.keys: set[str] = set()
        self.bytes = 0

    def takes(self, parsed: ParsedTrial) -> bool:
        """Add the trial, if it can be written in a batch (none with its key may be in this one)."""
        key = parsed.key[:500]
        size = sum(self.files[rel][2] for rel in parsed.files if rel in self.files)
        if (
            size > settings.IMPORT_BATCH_BYTES
            or parsed.trajectory_files_alone
            or (parsed.joins_stored_trial and not parsed.exported)
            or any(t.streamed or file_blob(t, self.blobs) in self.lone_blobs for t in parsed.trajectories)
        ):
            return False
        for trajectory in parsed.trajectories:  # checked now, so their problems are known before writing
            trajectory.steps = read_all(trajectory.steps)
            if not isinstance(trajectory.steps, list):
                return False  # reading failed: `write_trial` reports it, for this trial alone
        self.trials.append(parsed)
        self.keys.add(key)
        self.bytes += size
        return True

    def full(self) -> bool:
        most = self.MAX_TRIALS if self.batches else self.FIRST_TRIALS
        return len(self.trials) >= most or self.bytes >= settings.IMPORT_BATCH_BYTES


def write_trials(
    batch: list[ParsedTrial],
    pack: Pack,
    jobs: dict[str, Job | None],
    blobs: dict[str, int],
    shared: SharedRows,
    spool: Path,
) -> list[WriteResult]:
    """Trials held whole in memory, written together: one transaction and one insert per table.

    Per-trial statements and commits were most of the import of a job (bench/README.md).
    If anything fails, nothing of the batch is kept and the caller writes each trial again
    with `write_trial`, so a trial the database refuses is still rejected alone.
    """
    keys = [parsed.key[:500] for parsed in batch]
    found = {
        key: (pk, sha) for key, pk, sha in Trial.objects.filter(key__in=keys).values_list("key", "pk", "files_sha256")
    }
    new = [parsed for parsed in batch if parsed.key[:500] not in found]
    copies: list[tuple[Trajectory, StepBodies]] = []
    try:
        with shared.atomic():
            shared.resolve_tasks(new)
            trials = []
            for parsed in new:
                trial = trial_row(parsed, pack, jobs.get(parsed.job_key), *shared.resolve(parsed))
                flag_missing_subagents(parsed)  # (their steps are read: `TrialBatch.takes`)
                trial.step_count = sum(len(_steps_read(t)) for t in parsed.trajectories)
                trial.tool_call_count = sum(len(s.tool_calls) for t in parsed.trajectories for s in t.steps)
                trial.problems = [p.as_dict() for p in parsed.problems]
                apply_completeness(trial)
                trial.lime_evidence = trial.lime_evidence or bool(parsed.context_records)  # (as below)
                trials.append(trial)
            Trial.objects.bulk_create(trials)
            chunks: list[StepChunk] = []
            for trial, parsed in zip(trials, new, strict=True):
                for position, trajectory in enumerate(parsed.trajectories):
                    steps = _steps_read(trajectory)
                    blob_id = file_blob(trajectory, blobs)
                    row = trajectory_row(trial, trajectory, position, blob_id)
                    row.step_count = len(steps)
                    row.max_step_tokens = column_count(max(map(step_tokens, steps), default=0))
                    row.problems = [p.as_dict() for p in trajectory.problems]
                    bodies = None
                    if trajectory.steps_in_file and blob_id is not None:
                        row.step_bodies_id = blob_id
                    elif steps:
                        bodies = StepBodies(spool)
                        copies.append((row, bodies))
                    chunks.append((row, steps, bodies))
            Trajectory.objects.bulk_create([row for row, _, _ in chunks])
            write_steps(chunks)
            for row, bodies in copies:
                row.step_bodies_id = bodies.store()
                row.save(update_fields=["step_bodies"])
            for trial, parsed in zip(trials, new, strict=True):
                write_trial_children(trial, parsed, blobs)
    finally:
        for _, bodies in copies:
            bodies.discard()
    made = {trial.key: trial for trial in trials}
    return [
        already(parsed, *found[key]) if key in found else WriteResult("trials", made[key].step_count, made[key].pk)
        for key, parsed in zip(keys, batch, strict=True)
    ]


def _steps_read(trajectory: ParsedTrajectory) -> list[ParsedStep]:
    """A batched trial's steps: `TrialBatch.takes` has read them into a list."""
    steps = trajectory.steps
    assert isinstance(steps, list)
    return steps


def write_trial(
    parsed: ParsedTrial,
    pack: Pack,
    job: Job | None,
    blobs: dict[str, int],
    shared: SharedRows | None = None,
    lone_blobs: frozenset[int] = frozenset(),
    spool: Path | None = None,
) -> WriteResult:
    """One transaction per trial: it is imported whole or not at all. `spool`: the import's own folder."""
    if (existing := _any_one(Trial.objects.filter(key=parsed.key[:500]).values_list("pk", "files_sha256"))) is not None:
        return already(parsed, *existing)
    # made of trajectory files alone, not of a trial folder (an exported one came back as a folder)
    loose = parsed.trajectory_files_alone and not parsed.exported
    group = loose and len(parsed.files) > 1  # trajectory.json with its continuations and subagents beside it
    lone_file = blobs.get(parsed.files[0]) if loose else None
    if lone_file is not None:
        holders = Trajectory.objects.filter(blob_id=lone_file)
        if group:  # a trial of the main file alone is taken over below; one made from its whole folder is not
            holders = holders.exclude(trial__trajectory_files_alone=True)
        if (holder := _any_one(holders.values_list("trial_id", flat=True))) is not None:
            # these bytes are already a trial's trajectory (imported with its folder)
            return WriteResult("already", trial_id=holder)
    if parsed.joins_stored_trial and not parsed.exported:
        target = find_trial_for_evidence_pack(parsed)
        if target is not None:
            join_evidence_pack(target, parsed)
            return WriteResult("joined", trial_id=target.pk)
        claimed = dict(parsed.refs)  # alone: the files it names came with no trial folder
        parsed.refs, unbacked = completeness.join_refs({}, claimed)
        parsed.problems += [evidence.unbacked_ref_problem(parsed.files[0], r, claimed[r], alone=True) for r in unbacked]
    shared = shared or SharedRows()
    try:
        with shared.atomic():
            trial = trial_row(parsed, pack, job, *shared.resolve(parsed))
            trial.save(force_insert=True)
            steps = calls = 0
            for position, trajectory in enumerate(parsed.trajectories):
                written = write_trajectory(trial, trajectory, position, blobs, spool or settings.IMPORT_SPOOL_DIR)
                steps += written.steps
                calls += written.tool_calls
            write_trial_children(trial, parsed, blobs)
            if lone_blobs and (group or not loose):
                take_over_lone_trajectories(trial, parsed, blobs, lone_blobs)
            flag_missing_subagents(parsed)
            trial.step_count = steps
            trial.tool_call_count = calls
            trial.problems = [p.as_dict() for p in parsed.problems] + trial.problems
            apply_completeness(trial)
            # Lime context events make a trial Lime evidence though its pack (and so its runtime ids) is missing
            trial.lime_evidence = trial.lime_evidence or bool(parsed.context_records)
            trial.save(
                update_fields=["step_count", "tool_call_count", "problems", "is_complete", "missing", "lime_evidence"]
            )
    except IntegrityError:
        # Another import of the same trial committed first: one copy is kept.
        winner = _any_one(Trial.objects.filter(key=parsed.key[:500]).values_list("pk", flat=True))
        if winner is None:  # not a race: a constraint this trial broke, reported as the database's refusal
            raise
        return WriteResult("already", trial_id=winner)
    return WriteResult("trials", steps, trial.pk)


def _any_one(values: QuerySet) -> Any:
    """One value or None: a plain LIMIT 1. (`.first()` adds an ORDER BY id that a lookup by a unique
    key does not need, and that gives the planner a second way to answer it.)"""
    return next(iter(values[:1]), None)


def lone_trajectory_blobs(blob_ids: Iterable[int]) -> frozenset[int]:
    """Of these blobs, those that are the trajectory of a trial imported from that file alone."""
    blob_ids = sorted(set(blob_ids))
    found: set[int] = set()
    for start in range(0, len(blob_ids), 500):
        found.update(
            Trajectory.objects.filter(
                blob_id__in=blob_ids[start : start + 500], trial__trajectory_files_alone=True
            ).values_list("blob_id", flat=True)
        )
    return frozenset(found)


def take_over_lone_trajectories(
    trial: Trial, parsed: ParsedTrial, blobs: dict[str, int], lone_blobs: frozenset[int]
) -> None:
    """This trial's trajectory files, imported alone before, were trials of their own: this one replaces them.

    One with triage work on it (QC items, comments, history) is kept, and said so.
    """
    blob_ids = [blobs[t.path] for t in parsed.trajectories if blobs.get(t.path) in lone_blobs]
    if not blob_ids:
        return
    lone_trials = Trial.objects.filter(trajectory_files_alone=True, trajectories__blob_id__in=blob_ids)
    for lone in lone_trials.exclude(pk=trial.pk).distinct():
        triaged = lone.qc_items.exists() or lone.qc_comments.exists() or AuditEntry.objects.filter(trial=lone).exists()
        if triaged:
            message = f"trial #{lone.pk} holds this trajectory, imported alone earlier; it has triage work, so it stays"
        else:
            message = f"replaces trial #{lone.pk}, which held this trajectory alone (imported earlier)"
            lone.delete()
        parsed.problems.append(Problem(parsed.name, message, severity="warning", kept="this trial"))
