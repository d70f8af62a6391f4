"""Writing one parsed pack: its jobs, documents and trials (in batches, or one by one when a
batch fails), then what joins them (loose events, the job's earlier trials) and their signatures.

`PackWrite` is one pack's write, run by `service.ImportRun.write_pack`; it counts what it wrote
for the import's outcome line. Each trial, and the pack's events and context records of no trial,
go through the redaction stage (`redaction.withhold_redacted`) before anything of them is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from django.db import DatabaseError

from core.database import DatabaseOutage, is_unreachable
from trials.imports.joins import (
    adopt_job_trials,
    adopt_loose_events,
    brought_elsewhere,
    drop_named_only,
    is_named_only,
    stored_job,
    write_loose_events,
)
from trials.imports.rows import adopt_named_by_tasks, infer_job_configuration, join_trials_to_job, upsert_job
from trials.imports.writer import (
    SharedRows,
    TrialBatch,
    WriteResult,
    files_sha256,
    lone_trajectory_blobs,
    write_trial,
    write_trials,
)
from trials.ingest.records import ParsedPack, ParsedTrial, Problem
from trials.ingest.redaction import withhold_redacted
from trials.models import Dataset, Document, Import, Job, Pack, PackFile, RuntimeEvent, Trial
from trials.thresholds import rescore
from trials.triage import signatures

log = logging.getLogger(__name__)

REPORTED_PER_FILE = 20  # problems of one file listed in the import report (all are kept with the file)


class PackWrite:
    """One parsed pack written for an import: `run` writes it and returns its counts."""

    def __init__(
        self,
        imp: Import,
        workdir: Path,
        progress: tuple[Callable[[], None], Callable[[], None]],  # work done; a pause between two trials
        ran_before: bool,
        parsed: ParsedPack,
        pack: Pack,
        files: dict[str, tuple[Path, str, int]],
    ):
        self.imp = imp
        self.workdir = workdir
        self.advance, self.between_trials = progress
        self.parsed = parsed
        self.pack = pack
        self.files = files
        self.blobs = dict(PackFile.objects.filter(pack=pack).values_list("path", "blob_id"))
        self.lone_blobs = lone_trajectory_blobs(self.blobs.values())
        self.per_trial_progress = parsed.kind == "harbor-job"  # what `ImportRun.weight` counted for this pack
        self.shared = SharedRows()
        self.upserted = {job.key: upsert_job(job, pack) for job in parsed.jobs}
        self.jobs: dict[str, Job | None] = {key: job for key, (job, _) in self.upserted.items()}
        self.counts = {
            "trials": 0,
            "already": 0,
            "joined": 0,
            "rejected": 0,
            "documents": len(parsed.documents),
            "steps": 0,
            "differs": 0,
            "job_results": sum(applied for _, applied in self.upserted.values()),
        }
        # Trials this pack brought in an earlier, unfinished run: a resumed import (its worker died
        # half-way) counts the ones it wrote itself as its own, not as "already" there. (Only
        # a resumed one: another import of the same pack may have written some meanwhile.)
        self.earlier = dict(Trial.objects.filter(pack=pack).values_list("pk", "step_count"))
        self.resumed = ran_before and pack.first_import_id == imp.pk
        self.held: list[int] = []  # trials of this pack that another pack brought first (or that it joins)
        self.made: list[int] = []  # trials this pack brought
        self.found_by_job: dict[str, list[int]] = {}  # trials already there, by the job this pack says they ran in
        self.with_folder: dict[str, list[str]] = {}  # names of the trials brought with their folders, by job
        self.batch = TrialBatch(files, self.blobs, self.lone_blobs)

    def run(self) -> dict:
        parsed, pack, counts = self.parsed, self.pack, self.counts
        withhold_redacted(parsed)  # (its events and context records of no trial; each trial as it is written)
        for document in parsed.documents:
            Document.objects.get_or_create(
                pack=pack,
                path=document.path,
                kind=document.kind,
                defaults={"title": document.title[:500], "data": document.data, "counts": document.counts},
            )
        self.write_trials()
        for job_key, names in self.with_folder.items():
            counts["replaced"] = counts.get("replaced", 0) + drop_named_only(job_key, names)
        pack.other_trials.add(*self.held)  # so the pack's and the import's trial lists show them too
        adopt_loose_events(self.made, self.workdir)
        for parsed_job in parsed.jobs:
            job = self.upserted[parsed_job.key][0]
            regrouped = join_trials_to_job(job, self.found_by_job.get(job.key, []), parsed_job.earlier_keys)
            counts["regrouped"] = counts.get("regrouped", 0) + regrouped
            counts["adopted"] = counts.get("adopted", 0) + adopt_job_trials(job, parsed_job.trials_name_it_as)
            counts["inferred"] = infer_job_configuration(job)
        if parsed.events or parsed.context_records:
            counts["events"] = write_loose_events(parsed.events, parsed.context_records, pack, self.workdir)
        joined = RuntimeEvent.objects.filter(pack=pack, trial__isnull=False).values_list("trial_id", flat=True)
        moved = adopt_named_by_tasks()  # (this pack's dataset may name the tasks of runs stored before it)
        counts["to_dataset"] = len(moved)
        for dataset in Dataset.objects.filter(trial__pk__in=moved, pass_reward__isnull=False).distinct():
            rescore(dataset, moved)  # (decided at the pass threshold of the dataset they moved to)
        # their failure clusters and flags (a cluster of no cause names the trials' dataset)
        signatures.sign_trials([*self.made, *self.held, *self.earlier, *joined.distinct(), *moved])
        if not self.per_trial_progress:
            self.advance()
        return counts

    def write_trials(self) -> None:
        """The pack's trials in its order: in batches where they fit one, else one by one."""
        batch = self.batch
        for number, trial in enumerate(self.parsed.iter_trials()):
            if number and not self.per_trial_progress:  # (a job's trials each advance it; the first goes at once)
                self.between_trials()
            if brought_elsewhere(trial):
                if self.per_trial_progress:
                    self.advance()
                continue
            withhold_redacted(trial)
            trial.files_sha256 = files_sha256(trial, self.files)
            if trial.job_key and trial.job_key not in self.jobs:  # its job came in another pack (or not yet)
                self.jobs[trial.job_key] = stored_job(trial.job_key)
            if trial.key[:500] in batch.keys:  # the same trial twice: the first one is written first
                self.write_batch()
            if batch.takes(trial):
                if batch.full():
                    self.write_batch()
                continue
            if batch.trials:  # (the pack's trials are written in its order)
                self.write_batch()
            self.written(trial, self.write_one(trial))
        if batch.trials:
            self.write_batch()

    def write_one(self, trial: ParsedTrial) -> WriteResult:
        try:
            return write_trial(
                trial,
                self.pack,
                self.jobs.get(trial.job_key),
                self.blobs,
                self.shared,
                self.lone_blobs,
                self.workdir,
            )
        except DatabaseError as exc:  # the trial rolled back whole; the others go on
            if is_unreachable(exc):  # not this trial's fault: the whole import waits for the database
                raise DatabaseOutage(str(exc).strip()) from exc
            log.warning("trial %s rejected by the database: %s", trial.key, exc)
            trial.problems.append(
                Problem(trial.name, f"database rejected the trial: {exc}", kept="the pack's raw bytes")
            )
        except Exception as exc:  # a bug on one trial's data: that trial rolls back, the others go on
            if is_unreachable(exc):
                raise DatabaseOutage(str(exc).strip()) from exc
            log.exception("internal error while writing trial %s", trial.key)
            message = f"internal error while writing the trial: {type(exc).__name__}: {exc}"
            trial.problems.append(Problem(trial.name, message, kept="the pack's raw bytes"))
        return WriteResult("rejected")

    def write_batch(self) -> None:
        batch = self.batch
        try:
            results = write_trials(batch.trials, self.pack, self.jobs, self.blobs, self.shared, self.workdir)
        except Exception as exc:  # nothing of the batch was kept: each trial again, alone
            if is_unreachable(exc):
                raise DatabaseOutage(str(exc).strip()) from exc
            log.info("a batch of %d trials failed (%s); writing them one by one", len(batch.trials), exc)
            results = [self.write_one(trial) for trial in batch.trials]
        for trial, result in zip(batch.trials, results, strict=True):
            self.written(trial, result)
        batch.clear()

    def written(self, trial: ParsedTrial, result: WriteResult) -> None:
        counts = self.counts
        if result.outcome == "already" and self.resumed and result.trial_id in self.earlier:
            result = WriteResult("trials", self.earlier[result.trial_id], result.trial_id)
        counts[result.outcome] += 1
        counts["steps"] += result.steps
        if result.outcome == "trials" and result.trial_id is not None:
            self.made.append(result.trial_id)
            if not is_named_only(trial):
                self.with_folder.setdefault(trial.job_key, []).append(trial.name)
        counts["differs"] += result.differs
        if result.outcome in ("already", "joined") and result.trial_id is not None:
            self.found_by_job.setdefault(trial.job_key, []).append(result.trial_id)
            if result.trial_id not in self.earlier:
                self.held.append(result.trial_id)
        self.imp.problems.extend(reported_problems(trial))
        if self.per_trial_progress:
            self.advance()


def reported_problems(trial: ParsedTrial) -> list[dict]:
    """What the import report lists for a trial: its problems and its files' (the first few of each)."""
    reported = [p.as_dict() for p in trial.problems]
    for trajectory in trial.trajectories:
        reported += [p.as_dict() for p in trajectory.problems[:REPORTED_PER_FILE]]
        if len(trajectory.problems) > REPORTED_PER_FILE:
            more = len(trajectory.problems) - REPORTED_PER_FILE
            message = f"and {more} more problems in this file, listed with its trajectory"
            reported.append(Problem(trajectory.path, message, severity="warning", kept="the steps").as_dict())
    return reported
