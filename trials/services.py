"""The import service: the one place that writes imported packs to the database.

The CLI, the API and the upload page create an Import and hand it to the Celery task,
which calls `run_import`. Steps: store every file's bytes (content-addressed), detect
each pack's format, parse it with a pure parser, then write its trials, each whole or not at
all: in batches (`write_trials`), or one transaction per trial (`write_trial`).
Re-running an import is safe: packs and trials are keyed by content and natural keys.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connections, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from trials import completeness, redaction
from trials.blobs import StepBodies, remove_stale_partials, sha256_of_file, store_file, store_files
from trials.fastinsert import insert_rows
from trials.ingest import agentcontext, harbor, lime
from trials.ingest.archives import MAX_NESTING, Expansion, Limits, extract
from trials.ingest.atif import EMBEDDED_MARK
from trials.ingest.detect import Candidate, discover, over_the_limit, parse_candidate, screen_folder, skip_reason
from trials.ingest.jsonio import dumps_bytes
from trials.ingest.records import (
    ConfigurationRef,
    PackError,
    ParsedContextRecord,
    ParsedEvent,
    ParsedPack,
    ParsedStep,
    ParsedTrajectory,
    ParsedTrial,
    Problem,
    TaskRef,
    read_all,
)
from trials.ingest.values import seconds_between
from trials.models import (
    Artifact,
    AuditEntry,
    Blob,
    Configuration,
    ContextRecord,
    Dataset,
    Document,
    Import,
    Job,
    ObservationResult,
    Pack,
    PackFile,
    PermissionDecision,
    RewardCriterion,
    RuntimeEvent,
    Step,
    Task,
    ToolCall,
    Trajectory,
    Trial,
)
from trials.sqlitewal import checkpoints_in_background

log = logging.getLogger(__name__)
STEP_BATCH = 500
PROGRESS_EVERY = 0.5  # seconds between progress writes: one per trial was a commit per trial
PREVIEW_CHARS = 2000
REPORTED_PER_FILE = 20  # problems of one file listed in the import report (all are kept with the file)


# Creating and queueing imports ---------------------------------------------------------


def create_import(
    *, origin: str, source_name: str, source_path: str = "", upload: Blob | None = None, user=None
) -> Import:
    return Import.objects.create(
        origin=origin,
        source_name=source_name[:500],
        source_path=source_path,
        upload=upload,
        created_by=user if user is not None and user.is_authenticated else None,
    )


def enqueue(imp: Import) -> None:
    """Hand the import to Celery once the row is committed (a worker must be able to see it)."""
    from trials.tasks import import_pack_task

    def send() -> None:
        if settings.IMPORTS_IN_THREAD:
            embedded_worker().submit(run_in_embedded_worker, import_pack_task, str(imp.pk))
            return
        try:
            import_pack_task.delay(str(imp.pk))
        except Exception:  # broker down: the import stays queued and the recovery sweep sends it
            log.warning("could not queue import %s; trials.recovery will send it again", imp.pk, exc_info=True)

    transaction.on_commit(send)


@functools.cache
def embedded_worker() -> ThreadPoolExecutor:
    """The embedded default's worker (no broker): one thread of this process, imports in turn.

    Its first job picks up the imports a previous server process left behind.
    """
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="benchviewer-import")
    worker.submit(resume_stranded_imports)
    return worker


def start_embedded_worker(**kwargs) -> None:
    """On a request (`request_started`): the server has started, so its import thread does."""
    if settings.IMPORTS_IN_THREAD:
        embedded_worker()


def resume_stranded_imports() -> None:
    """Imports queued in a thread that died with its process, or left running by a process now gone."""
    from trials import recovery
    from trials.tasks import import_pack_task

    try:
        stranded = recovery.stale_imports()
    finally:
        connections.close_all()
    for item in stranded:
        log.warning("import %s: %s; running it again", item.import_id, item.reason)
        run_in_embedded_worker(import_pack_task, item.import_id)


def run_in_embedded_worker(task, import_id: str) -> None:
    try:
        task.delay(import_id)  # Celery is eager here: the task runs in this thread
    except Exception:  # run_import records its own failures; this is a bug, and the thread goes on
        log.exception("import %s failed in the embedded worker", import_id)
    finally:
        connections.close_all()  # this thread's own connections


def import_upload(fileobj, name: str, *, origin: str, user=None) -> Import:
    """Store an uploaded file's bytes first (nothing is lost), then queue its import."""
    settings.IMPORT_SPOOL_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=settings.IMPORT_SPOOL_DIR, delete=False) as tmp:
        for chunk in fileobj.chunks() if hasattr(fileobj, "chunks") else iter(lambda: fileobj.read(1 << 20), b""):
            tmp.write(chunk)
        tmp_path = Path(tmp.name)
    try:
        blob = store_file(tmp_path)
    finally:
        tmp_path.unlink(missing_ok=True)
    imp = create_import(origin=origin, source_name=Path(name).name or "upload", upload=blob, user=user)
    enqueue(imp)
    return imp


# Running an import ---------------------------------------------------------------------


def limits() -> Limits:
    return Limits(
        max_expanded_bytes=settings.IMPORT_MAX_EXPANDED_BYTES,
        max_ratio=settings.IMPORT_MAX_ARCHIVE_RATIO,
        max_members=settings.IMPORT_MAX_ARCHIVE_MEMBERS,
        max_file_bytes=settings.IMPORT_MAX_FILE_BYTES,
    )


def remove_spool_leftovers(import_id: str) -> None:
    """What a killed run of this import left in the spool (extracted archives, step bodies),
    and the copies into the blob storage that killed processes left half-done long ago.

    Call it holding the import's lock (trials/recovery.py): then no other run is using them.
    """
    for leftover in settings.IMPORT_SPOOL_DIR.glob(f"import-{import_id}-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    remove_stale_partials()


def run_import(import_id: str, on_progress: Callable[[Import], None] | None = None) -> Import:
    imp = Import.objects.get(pk=import_id)
    if imp.status == Import.Status.DONE:
        return imp  # a redelivered task: the work is already done
    ran_before = imp.started_at is not None  # and did not finish: its worker died
    Import.objects.filter(pk=imp.pk).update(
        status=Import.Status.RUNNING, started_at=timezone.now(), outcomes=[], problems=[], progress_done=0
    )
    imp.refresh_from_db()
    settings.IMPORT_SPOOL_DIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=settings.IMPORT_SPOOL_DIR, prefix=f"import-{imp.pk}-"))
    runner = ImportRun(imp, workdir, on_progress, ran_before)
    try:
        with checkpoints_in_background(), rare_full_collections():
            runner.run()
        imp.status = Import.Status.DONE
    except Exception as exc:  # a failed import says why; the server and worker keep going
        log.exception("import %s failed", imp.pk)
        imp.problems.append(
            Problem(
                imp.source_name,
                f"import failed: {type(exc).__name__}: {exc}",
                kept="every byte stored before the failure",
            ).as_dict()
        )
        imp.status = Import.Status.FAILED
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    imp.finished_at = timezone.now()
    imp.save()
    return imp


@contextmanager
def rare_full_collections():
    """Python's full garbage collections walk every live object, and an import keeps a batch of
    parsed trials alive while it makes and drops millions of objects: at the default
    threshold they took a tenth of a job's import (bench/README.md). Ten times rarer here."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


class ImportRun:
    def __init__(
        self, imp: Import, workdir: Path, on_progress: Callable[[Import], None] | None, ran_before: bool = False
    ):
        self.imp = imp
        self.workdir = workdir
        self.on_progress = on_progress
        self.ran_before = ran_before
        self.limits = limits()
        self.expansion: Expansion | None = None  # the bytes the upload's archives expanded to, nested ones too
        self.archive_depth = 0
        self.progress_saved_at = 0.0

    def run(self) -> None:
        imp = self.imp
        if imp.upload_id:
            source = self.workdir / "upload" / (Path(imp.source_name).name or "upload")
            source.parent.mkdir(parents=True)
            with imp.upload.open() as src, open(source, "wb") as dest:
                shutil.copyfileobj(src, dest, 1 << 20)
        else:
            source = Path(imp.source_path)
            if not source.exists():
                raise FileNotFoundError(f"no such file or folder: {imp.source_path}")
        candidates = discover(source, source.name, top=True)
        if not candidates:  # an empty folder (or one of empty folders): say so, as for an empty archive
            problem = Problem(source.name, "nothing to import: the folder holds no file", kept="nothing")
            self.reject(Candidate(source, source.name, "folder"), problem)
            return
        imp.progress_total = sum(self.weight(c) for c in candidates)
        imp.save(update_fields=["progress_total"])
        for candidate in candidates:
            self.import_candidate(candidate)

    @staticmethod
    def weight(candidate: Candidate) -> int:
        return len(candidate.trial_dirs) if candidate.kind == "harbor-job" else 1

    def advance(self, n: int = 1) -> None:
        """Count finished work; the database hears of it at most every PROGRESS_EVERY seconds."""
        self.imp.progress_done += n
        now = time.monotonic()
        if now - self.progress_saved_at >= PROGRESS_EVERY or self.imp.progress_done >= self.imp.progress_total:
            Import.objects.filter(pk=self.imp.pk).update(progress_done=self.imp.progress_done)
            self.progress_saved_at = now
        if self.on_progress:
            self.on_progress(self.imp)

    def outcome(self, candidate_rel: str, kind: str, outcome: str, pack: Pack | None = None, **extra: Any) -> None:
        line = {"pack": candidate_rel, "kind": kind, "outcome": outcome, **extra}
        if details := outcome_details(extra):
            line["details"] = details
        if pack is not None:  # so the import page can list the pack's trials
            line["pack_id"] = pack.pk
        self.imp.outcomes.append(line)
        Import.objects.filter(pk=self.imp.pk).update(outcomes=self.imp.outcomes)

    def reject(
        self, candidate: Candidate, problem: Problem, pack: Pack | None = None, noticed: Iterable[Problem] = ()
    ) -> None:
        problems = [problem.as_dict(), *(p.as_dict() for p in noticed)]
        self.imp.problems.extend(problems)
        Import.objects.filter(pk=self.imp.pk).update(problems=self.imp.problems)
        if pack is not None:
            Pack.objects.filter(pk=pack.pk).update(status=Pack.Status.REJECTED, problems=problems)
        self.outcome(candidate.rel, candidate.kind, "rejected", pack, reason=problem.message)

    def import_candidate(self, candidate: Candidate) -> None:
        if candidate.kind == "skipped":
            self.outcome(candidate.rel, "skipped", "skipped", reason=skip_reason(candidate.path))
            self.advance()
            return
        if candidate.kind == "archive":
            self.import_archive(candidate)
            return
        files, screened = self.pack_files(candidate)
        if not files and screened:  # a single file past the size limit: not read, not stored
            problem = screened[0]
            if self.imp.upload_id:
                problem = dataclasses.replace(problem, kept="the upload's raw bytes; the file was not read")
            self.reject(candidate, problem)
            self.advance()
            return
        pack, created = self.pack_row(candidate, files)
        if not created and pack.status == Pack.Status.IMPORTED:
            self.outcome(candidate.rel, pack.kind, "already imported", pack, trials=pack.all_trials().count())
            self.advance(self.weight(candidate))
            return
        try:
            if screened:  # the parsers see only what was stored: no link followed, nothing past the limit
                candidate = self.stored_copy(candidate, files)
            parsed = parse_candidate(candidate)
            parsed.problems[:0] = screened
            Pack.objects.filter(pk=pack.pk).update(kind=parsed.kind)
            pack.kind = parsed.kind
            counts = self.write_pack(parsed, pack, files)
        except PackError as exc:
            self.reject(candidate, exc.problem, pack, exc.noticed)
            self.advance(self.weight(candidate))
            return
        except Exception as exc:  # a parser bug must not stop the other packs; the bytes are kept
            log.exception("internal error while importing %s", candidate.rel)
            problem = Problem(
                candidate.rel,
                f"internal error while reading this pack: {type(exc).__name__}: {exc}",
                kept="the raw bytes; trials committed before the error",
            )
            self.reject(candidate, problem, pack)
            Pack.objects.filter(pk=pack.pk).update(status=Pack.Status.IMPORTING)  # a fixed parser retries it
            return
        problems = [p.as_dict() for p in parsed.problems]
        # A pack with a trial the database refused stays open, so importing it again retries that trial.
        status = Pack.Status.IMPORTED if not counts.get("rejected") else Pack.Status.IMPORTING
        Pack.objects.filter(pk=pack.pk).update(status=status, problems=problems)
        self.imp.problems.extend(problems)
        Import.objects.filter(pk=self.imp.pk).update(problems=self.imp.problems)
        brought = any(counts.get(k) for k in ("trials", "joined", "events", "documents"))
        if counts["rejected"] and not brought and not counts["already"]:
            reason = f"its {counts['rejected']} trial(s) rejected: see the errors"
            self.outcome(candidate.rel, parsed.kind, "rejected", pack, reason=reason, **counts)
            return
        nothing_new = counts["already"] and not brought and not counts["rejected"]
        if nothing_new and counts["differs"]:
            reason = f"{counts['differs']} of its trials were imported before from other bytes: see the warnings"
            self.outcome(candidate.rel, parsed.kind, "already imported", pack, reason=reason, **counts)
            return
        self.outcome(candidate.rel, parsed.kind, "already imported" if nothing_new else "imported", pack, **counts)

    def import_archive(self, candidate: Candidate) -> None:
        sha, size = sha256_of_file(candidate.path)
        blob = store_file(candidate.path, sha, size)
        pack, _ = Pack.objects.get_or_create(
            sha256=sha, defaults={"kind": "archive", "name": candidate.rel, "first_import": self.imp}
        )
        PackFile.objects.get_or_create(pack=pack, path=candidate.rel, defaults={"blob": blob})
        outermost = self.expansion is None
        if outermost:
            self.expansion = Expansion(candidate.path)
        elif self.archive_depth >= MAX_NESTING:
            message = f"an archive nested more than {MAX_NESTING} deep: not extracted"
            self.reject(candidate, Problem(candidate.rel, message, kept="the archive's raw bytes"), pack)
            self.advance()
            return
        # A folder of its own even for the same archive twice: each copy is charged to the upload's limits.
        target = Path(tempfile.mkdtemp(prefix=f"archive-{sha[:12]}-", dir=self.workdir))
        self.archive_depth += 1
        try:
            self.extract_archive(candidate, pack, target)
        finally:
            self.archive_depth -= 1
            if outermost:
                self.expansion = None

    def extract_archive(self, candidate: Candidate, pack: Pack, target: Path) -> None:
        try:
            skipped = extract(candidate.path, target, candidate.rel, self.limits, self.expansion)
        except PackError as exc:
            self.reject(candidate, exc.problem, pack)
            self.advance()
            return
        Pack.objects.filter(pk=pack.pk).update(status=Pack.Status.IMPORTED, problems=[p.as_dict() for p in skipped])
        self.imp.problems.extend(p.as_dict() for p in skipped)
        inner = discover(target, candidate.rel, top=False)
        if not inner:
            problem = Problem(
                candidate.rel,
                "no pack inside the archive (every member was skipped or it was empty)",
                kept="the archive's raw bytes",
            )
            self.reject(candidate, problem)
            self.advance()
            return
        self.outcome(candidate.rel, "archive", "extracted", members=len(inner), skipped=len(skipped))
        self.imp.progress_total += sum(self.weight(c) for c in inner) - 1
        Import.objects.filter(pk=self.imp.pk).update(progress_total=self.imp.progress_total, problems=self.imp.problems)
        for child in inner:
            self.import_candidate(child)

    def pack_files(self, candidate: Candidate) -> tuple[dict[str, tuple[Path, str, int]], list[Problem]]:
        """pack-relative path -> (file, sha256, size) for every regular file of the pack, and what was left out."""
        if candidate.path.is_file():
            too_big = over_the_limit(candidate.path, candidate.rel, self.limits.max_file_bytes)
            paths, screened = ([], [too_big]) if too_big else ([(candidate.rel, candidate.path)], [])
        elif candidate.members:  # some files of a folder; the others are packs of their own
            members = [(f"{candidate.rel}/{path.name}", path) for path in candidate.members]
            too_big = [over_the_limit(path, rel, self.limits.max_file_bytes) for rel, path in members]
            paths = [member for member, problem in zip(members, too_big, strict=True) if problem is None]
            screened = [problem for problem in too_big if problem is not None]
        else:
            paths, screened = screen_folder(candidate.path, candidate.rel, self.limits.max_file_bytes)
        # On two threads: reading and hashing let go of the GIL (a job of large files imported
        # about a tenth faster; bench/README.md).
        with ThreadPoolExecutor(max_workers=2) as pool:
            hashed = list(pool.map(sha256_of_file, [path for _, path in paths]))
        files = {rel: (path, sha, size) for (rel, path), (sha, size) in zip(paths, hashed, strict=True)}
        return files, screened

    def stored_copy(self, candidate: Candidate, files: dict[str, tuple[Path, str, int]]) -> Candidate:
        """The folder again, holding only the files stored (hard links where the disk allows)."""
        root = Path(tempfile.mkdtemp(dir=self.workdir)) / candidate.path.name
        for path, _, _ in files.values():
            target = root / path.relative_to(candidate.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:  # another file system
                shutil.copyfile(path, target)
        trial_dirs = [root / d.relative_to(candidate.path) for d in candidate.trial_dirs]
        members = [root / path.name for path in candidate.members]
        return Candidate(
            root,
            candidate.rel,
            candidate.kind,
            [d for d in trial_dirs if d.is_dir()],
            [path for path in members if path.is_file()],
        )

    def pack_row(self, candidate: Candidate, files: dict[str, tuple[Path, str, int]]) -> tuple[Pack, bool]:
        manifest = orjson.dumps(sorted((rel.split("/", 1)[-1], sha) for rel, (_, sha, _) in files.items()))
        sha = files[candidate.rel][1] if candidate.path.is_file() else hashlib.sha256(manifest).hexdigest()
        pack, created = Pack.objects.get_or_create(
            sha256=sha, defaults={"kind": candidate.kind, "name": candidate.rel, "first_import": self.imp}
        )
        if created or pack.status != Pack.Status.IMPORTED:
            blob_ids = store_files(files.values())
            PackFile.objects.bulk_create(
                [PackFile(pack=pack, path=rel, blob_id=blob_ids[sha]) for rel, (_, sha, _) in files.items()],
                batch_size=500,
                ignore_conflicts=True,
            )
        return pack, created

    def write_pack(self, parsed: ParsedPack, pack: Pack, files: dict[str, tuple[Path, str, int]]) -> dict:
        blobs = dict(PackFile.objects.filter(pack=pack).values_list("path", "blob_id"))
        lone_blobs = lone_trajectory_blobs(blobs.values())
        per_trial_progress = parsed.kind == "harbor-job"  # what `weight` counted for this pack
        shared = SharedRows()
        jobs = {job.key: upsert_job(job, pack) for job in parsed.jobs}
        for document in parsed.documents:
            Document.objects.get_or_create(
                pack=pack,
                path=document.path,
                kind=document.kind,
                defaults={"title": document.title[:500], "data": document.data, "counts": document.counts},
            )
        counts = {"trials": 0, "already": 0, "joined": 0, "rejected": 0, "documents": len(parsed.documents), "steps": 0,
                  "differs": 0}  # fmt: skip
        # Trials this pack brought in an earlier, unfinished run: a resumed import (its worker died
        # half-way) counts the ones it wrote itself as its own, not as "already" there. (Only
        # a resumed one: another import of the same pack may have written some meanwhile.)
        earlier = dict(Trial.objects.filter(pack=pack).values_list("pk", "step_count"))
        resumed = self.ran_before and pack.first_import_id == self.imp.pk
        held: list[int] = []  # trials of this pack that another pack brought first (or that it joins)
        made: list[int] = []  # trials this pack brought

        def write_one(trial: ParsedTrial) -> WriteResult:
            try:
                return write_trial(trial, pack, jobs.get(trial.job_key), blobs, shared, lone_blobs, self.workdir)
            except DatabaseError as exc:  # the trial rolled back whole; the others go on
                log.warning("trial %s rejected by the database: %s", trial.key, exc)
                trial.problems.append(
                    Problem(trial.name, f"database rejected the trial: {exc}", kept="the pack's raw bytes")
                )
            except Exception as exc:  # a bug on one trial's data: that trial rolls back, the others go on
                log.exception("internal error while writing trial %s", trial.key)
                message = f"internal error while writing the trial: {type(exc).__name__}: {exc}"
                trial.problems.append(Problem(trial.name, message, kept="the pack's raw bytes"))
            return WriteResult("rejected")

        def written(trial: ParsedTrial, result: WriteResult) -> None:
            if result.outcome == "already" and resumed and result.trial_id in earlier:
                result = WriteResult("trials", earlier[result.trial_id], result.trial_id)
            counts[result.outcome] += 1
            counts["steps"] += result.steps
            if result.outcome == "trials" and result.trial_id is not None:
                made.append(result.trial_id)
            counts["differs"] += result.differs
            if (
                result.outcome in ("already", "joined")
                and result.trial_id is not None
                and result.trial_id not in earlier
            ):
                held.append(result.trial_id)
            self.imp.problems.extend(reported_problems(trial))
            if per_trial_progress:
                self.advance()

        batch = TrialBatch(files, blobs, lone_blobs)

        def write_batch() -> None:
            try:
                results = write_trials(batch.trials, pack, jobs, blobs, shared, self.workdir)
            except Exception as exc:  # nothing of the batch was kept: each trial again, alone
                log.info("a batch of %d trials failed (%s); writing them one by one", len(batch.trials), exc)
                results = [write_one(trial) for trial in batch.trials]
            for trial, result in zip(batch.trials, results, strict=True):
                written(trial, result)
            batch.clear()

        for trial in parsed.iter_trials():
            trial.files_sha256 = files_sha256(trial, files)
            if trial.key[:500] in batch.keys:  # the same trial twice: the first one is written first
                write_batch()
            if batch.takes(trial):
                if batch.full():
                    write_batch()
                continue
            if batch.trials:  # (the pack's trials are written in its order)
                write_batch()
            written(trial, write_one(trial))
        if batch.trials:
            write_batch()
        pack.other_trials.add(*held)  # so the pack's and the import's trial lists show them too
        adopt_loose_events(made, self.workdir)
        for job in jobs.values():
            counts["inferred"] = infer_job_configuration(job)
        if parsed.events or parsed.context_records:
            counts["events"] = write_loose_events(parsed.events, parsed.context_records, pack, self.workdir)
        if not per_trial_progress:
            self.advance()
        return counts


# What an outcome line's counts say beside its trials (the import page's Details column).
OUTCOME_COUNTS = {
    "already": "already there",
    "differs": "imported before from other bytes",
    "joined": "joined to a trial",
    "rejected": "rejected",
    "events": "events",
    "documents": "documents",
    "inferred": "configurations inferred",
    "steps": "steps",
    "members": "members",
    "skipped": "members skipped",
}


def outcome_details(counts: dict[str, Any]) -> str:
    return ", ".join(f"{counts[key]} {label}" for key, label in OUTCOME_COUNTS.items() if counts.get(key))


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


# Writing rows --------------------------------------------------------------------------


def upsert_job(parsed, pack: Pack) -> Job:
    job, _ = Job.objects.get_or_create(
        key=parsed.key,
        defaults={
            "name": parsed.name[:300],
            "source_format": parsed.source_format,
            "pack": pack,
            "started_at": parsed.started_at,
            "started_as_written": parsed.started_as_written,
            "finished_at": parsed.finished_at,
            "config": parsed.config,
            "result": parsed.result,
            "extra": parsed.extra,
        },
    )
    return job


def infer_job_configuration(job: Job) -> int:
    """A Harbor job runs one configuration: trials whose evidence pack is missing inherit it."""
    declared = set(
        job.trials.filter(configuration__isnull=False)
        .exclude(configuration__role="")
        .values_list("configuration_id", flat=True)
    )
    if len(declared) != 1:
        return 0
    config = Configuration.objects.get(pk=declared.pop())
    undeclared = job.trials.filter(
        configuration__role="", configuration__agent_name=config.agent_name, configuration__model_name=config.model_name
    )
    count = 0
    replaced = set()
    for trial in undeclared:
        replaced.add(trial.configuration_id)
        trial.configuration = config
        trial.problems.append(
            Problem(
                trial.name,
                f"no evidence pack: configuration {config.key!r} inferred from job {job.name!r}",
                severity="warning",
                kept="the Harbor agent and model as written",
            ).as_dict()
        )
        trial.save(update_fields=["configuration", "problems"])
        count += 1
    Configuration.objects.filter(pk__in=replaced, trials__isnull=True).delete()  # left with no trial
    return count


def get_dataset(ref) -> Dataset | None:
    if ref is None or not ref.name:
        return None
    dataset, _ = Dataset.objects.get_or_create(
        name=ref.name[:300], version=ref.version[:100], defaults={"ref": ref.ref[:500]}
    )
    return dataset


def get_task(dataset: Dataset | None, ref) -> Task | None:
    if ref is None or not ref.name:
        return None
    task, _ = Task.objects.get_or_create(
        dataset=dataset,
        name=ref.name[:300],
        checksum=ref.checksum[:128],
        defaults={"source": ref.source[:1000], "definition": ref.definition},
    )
    return task


def get_configuration(ref) -> Configuration | None:
    if ref is None or not ref.key:
        return None
    config, created = Configuration.objects.get_or_create(
        key=ref.key[:300],
        defaults={
            "role": ref.role,
            "agent_name": ref.agent_name[:200],
            "agent_version": ref.agent_version[:100],
            "model_name": ref.model_name[:200],
            "profiles": ref.profiles,
        },
    )
    if not created and ref.role and not config.role:
        Configuration.objects.filter(pk=config.pk).update(role=ref.role)
    return config


class WriteResult(NamedTuple):
    outcome: str  # trials | already | joined | rejected
    steps: int = 0
    trial_id: int | None = None  # the trial written, found already there, or joined
    differs: bool = False  # already there, imported from other bytes than these


OWN_FILES = ("harbor", "lime")  # formats whose trials are files of their own (an AgentV file holds many)


def files_sha256(parsed: ParsedTrial, files: dict[str, tuple[Path, str, int]]) -> str:
    """The sha256 of a trial's stored files as (path within the trial, sha256) pairs; blank for shared files.

    The same trial folder gives the same digest, imported alone or within its job; other
    bytes, or files left out (past the size limit), give another.
    """
    stored = [rel for rel in parsed.files if rel in files]
    if parsed.source_format not in OWN_FILES or not stored:
        return ""
    base = os.path.commonpath(stored) if len(stored) > 1 else stored[0].rpartition("/")[0]
    pairs = sorted((rel[len(base) :].lstrip("/"), files[rel][1]) for rel in stored)
    return hashlib.sha256(orjson.dumps(pairs)).hexdigest()


def already(parsed: ParsedTrial, trial_id: int, stored_sha256: str) -> WriteResult:
    """The trial is there: from these very files, or (said so) from others, which stay only in the storage."""
    differs = bool(parsed.files_sha256 and stored_sha256 and parsed.files_sha256 != stored_sha256)
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

    def __init__(self):
        self.seen: dict[tuple, object] = {}

    @contextmanager
    def atomic(self):
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
            dataset = self._get(("dataset", _ref_key(parsed.dataset)), lambda p=parsed: get_dataset(p.dataset))
            key = ("task", dataset and dataset.pk, _ref_key(parsed.task))
            if key not in self.seen:
                wanted[key] = (
                    (dataset and dataset.pk, parsed.task.name[:300], parsed.task.checksum[:128]),
                    parsed.task,
                )
        if not wanted:
            return
        found = {
            (task.dataset_id, task.name, task.checksum): task
            for task in Task.objects.filter(name__in={natural[1] for natural, _ in wanted.values()})
        }
        new: dict[tuple, Task] = {}
        for (dataset_id, name, checksum), ref in wanted.values():  # the first trial's ref makes it, as get_task
            if (dataset_id, name, checksum) not in found:
                new.setdefault(
                    (dataset_id, name, checksum),
                    Task(dataset_id=dataset_id, name=name, checksum=checksum, source=ref.source[:1000],
                         definition=ref.definition),
                )  # fmt: skip
        Task.objects.bulk_create(new.values())
        found.update(new)
        for key, (natural, _) in wanted.items():
            self.seen[key] = found[natural]

    def _get(self, key: tuple, make):
        if key not in self.seen:
            self.seen[key] = make()
        return self.seen[key]


def _ref_key(ref) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in vars(ref).items())) if ref is not None else ()


class TrialBatch:
    """Trials written together by `write_trials`: those read whole into memory, up to a size.

    Others each go through `write_trial`, which reads their steps as it writes them: one
    bigger than a batch, one with a streamed trajectory, a trajectory file imported alone,
    an evidence pack to join to its trial, a trajectory file that was a trial of its own
    before.
    """

    MAX_TRIALS = 100  # (and settings.IMPORT_BATCH_BYTES of their files)

    def __init__(self, files: dict[str, tuple[Path, str, int]], blobs: dict[str, int], lone_blobs: frozenset[int]):
        self.files, self.blobs, self.lone_blobs = files, blobs, lone_blobs
        self.clear()

    def clear(self) -> None:
        self.trials: list[ParsedTrial] = []
        self.keys: set[str] = set()
        self.bytes = 0

    def takes(self, parsed: ParsedTrial) -> bool:
        """Add the trial, if it can be written in a batch (none with its key may be in this one)."""
        key = parsed.key[:500]
        size = sum(self.files[rel][2] for rel in parsed.files if rel in self.files)
        if (
            size > settings.IMPORT_BATCH_BYTES
            or key.startswith("atif:")
            or parsed.source_format == "lime"
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
        return len(self.trials) >= self.MAX_TRIALS or self.bytes >= settings.IMPORT_BATCH_BYTES


def write_trials(
    batch: list[ParsedTrial],
    pack: Pack,
    jobs: dict[str, Job],
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
                harbor.flag_missing_subagents(parsed)  # (their steps are read: `TrialBatch.takes`)
                trial.step_count = sum(len(t.steps) for t in parsed.trajectories)
                trial.tool_call_count = sum(len(s.tool_calls) for t in parsed.trajectories for s in t.steps)
                trial.problems = [p.as_dict() for p in parsed.problems]
                apply_completeness(trial)
                trials.append(trial)
            Trial.objects.bulk_create(trials)
            chunks: list[StepChunk] = []
            for trial, parsed in zip(trials, new, strict=True):
                for position, trajectory in enumerate(parsed.trajectories):
                    blob_id = file_blob(trajectory, blobs)
                    row = trajectory_row(trial, trajectory, position, blob_id)
                    row.step_count = len(trajectory.steps)
                    row.max_step_tokens = _count(max(map(step_tokens, trajectory.steps), default=0))
                    row.problems = [p.as_dict() for p in trajectory.problems]
                    bodies = None
                    if trajectory.steps_in_file and blob_id is not None:
                        row.step_bodies_id = blob_id
                    elif trajectory.steps:
                        bodies = StepBodies(spool)
                        copies.append((row, bodies))
                    chunks.append((row, trajectory.steps, bodies))
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
    loose = parsed.key.startswith("atif:")  # made of trajectory files alone, not of a trial folder
    group = loose and len(parsed.files) > 1  # trajectory.json with its continuations and subagents beside it
    lone_file = blobs.get(parsed.files[0]) if loose else None
    if lone_file is not None:
        holders = Trajectory.objects.filter(blob_id=lone_file)
        if group:  # a trial of the main file alone is taken over below; one made from its whole folder is not
            holders = holders.exclude(trial__key__startswith="atif:")
        if (holder := _any_one(holders.values_list("trial_id", flat=True))) is not None:
            # these bytes are already a trial's trajectory (imported with its folder)
            return WriteResult("already", trial_id=holder)
    if parsed.source_format == "lime":
        target = find_trial_for_evidence_pack(parsed)
        if target is not None:
            join_evidence_pack(target, parsed)
            return WriteResult("joined", trial_id=target.pk)
        claimed = dict(parsed.refs)  # alone: the files it names came with no trial folder
        parsed.refs, unbacked = completeness.join_refs({}, claimed)
        parsed.problems += [harbor.unbacked_ref_problem(parsed.files[0], r, claimed[r], alone=True) for r in unbacked]
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
            harbor.flag_missing_subagents(parsed)
            trial.step_count = steps
            trial.tool_call_count = calls
            trial.problems = [p.as_dict() for p in parsed.problems] + trial.problems
            apply_completeness(trial)
            trial.save(update_fields=["step_count", "tool_call_count", "problems", "is_complete", "missing"])
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


def lone_trajectory_blobs(blob_ids) -> frozenset[int]:
    """Of these blobs, those that are the trajectory of a trial imported from that file alone."""
    blob_ids = sorted(set(blob_ids))
    found: set[int] = set()
    for start in range(0, len(blob_ids), 500):
        found.update(
            Trajectory.objects.filter(
                blob_id__in=blob_ids[start : start + 500], trial__key__startswith="atif:"
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
    lone_trials = Trial.objects.filter(key__startswith="atif:", trajectories__blob_id__in=blob_ids).exclude(pk=trial.pk)
    for lone in lone_trials.distinct():
        triaged = lone.qc_items.exists() or lone.qc_comments.exists() or AuditEntry.objects.filter(trial=lone).exists()
        if triaged:
            message = f"trial #{lone.pk} holds this trajectory, imported alone earlier; it has triage work, so it stays"
        else:
            message = f"replaces trial #{lone.pk}, which held this trajectory alone (imported earlier)"
            lone.delete()
        parsed.problems.append(Problem(parsed.name, message, severity="warning", kept="this trial"))


def apply_completeness(trial: Trial) -> None:
    result = completeness.evaluate(trial.benchmark, trial.runtime_correlation, trial.refs)
    trial.is_complete = result["joinable"]
    trial.missing = result["missing"]


def trial_row(
    parsed: ParsedTrial,
    pack: Pack,
    job: Job | None,
    dataset: Dataset | None,
    task: Task | None,
    configuration: Configuration | None,
) -> Trial:
    """The trial's row, not saved yet."""
    duration = seconds_between(parsed.started_at, parsed.finished_at)
    if duration is None:
        duration = parsed.phases.get("total", {}).get("seconds")
    correlation = parsed.runtime_correlation
    return Trial(
        key=parsed.key[:500],
        files_sha256=parsed.files_sha256,
        source_format=parsed.source_format,
        name=parsed.name[:300],
        pack=pack,
        job=job,
        dataset=dataset,
        task=task,
        configuration=configuration,
        attempt=parsed.attempt if isinstance(parsed.attempt, int) and 0 <= parsed.attempt < 2**31 else None,
        status=parsed.status or Trial.Status.UNKNOWN,
        reward=parsed.reward,
        rewards=parsed.rewards,
        exception_type=parsed.exception_type[:200],
        exception_message=parsed.exception_message,
        exception_traceback=parsed.exception_traceback,
        failure_category=parsed.failure_category[:60],
        started_at=_aware(parsed.started_at),
        finished_at=_aware(parsed.finished_at),
        duration_sec=duration,
        phases=parsed.phases,
        input_tokens=_count(parsed.input_tokens),
        cached_tokens=_count(parsed.cached_tokens),
        output_tokens=_count(parsed.output_tokens),
        cost_usd=parsed.cost_usd,
        session_id=str(correlation.get("sessionId") or "")[:200],
        run_id=str(correlation.get("runId") or "")[:200],
        benchmark=parsed.benchmark,
        runtime_correlation=correlation,
        refs=parsed.refs,
        provenance=parsed.provenance,
        documents=parsed.documents,
        texts=parsed.texts,
        ctrf_tests=parsed.ctrf_tests,
    )


def _aware(value):
    return value if value is None or value.tzinfo is not None else None


class Written(NamedTuple):
    steps: int
    tool_calls: int


def write_trajectory(
    trial: Trial, parsed: ParsedTrajectory, position: int, blobs: dict[str, int], spool: Path
) -> Written:
    """Steps go in batches from a (possibly streaming) parser; a broken file rolls back alone.

    A step is served from its place in the stored file when the parser found it (ATIF's
    `step_spans`); otherwise from a copy of its JSON in a blob of the trajectory's own.
    """
    blob_id = file_blob(parsed, blobs)
    bodies = None if parsed.steps_in_file and blob_id is not None else StepBodies(spool)
    try:
        with transaction.atomic():
            trajectory = trajectory_row(trial, parsed, position, blob_id)
            trajectory.save(force_insert=True)
            count = calls = max_tokens = 0
            batch = []
            for step in parsed.steps:
                batch.append(step)
                calls += len(step.tool_calls)
                max_tokens = max(max_tokens, step_tokens(step))
                if len(batch) >= STEP_BATCH:
                    write_steps([(trajectory, batch, bodies)])
                    count += len(batch)
                    batch = []
            write_steps([(trajectory, batch, bodies)])
            count += len(batch)
            trajectory.step_bodies_id = bodies.store() if bodies is not None else blob_id
            trajectory.step_count = count
            trajectory.max_step_tokens = _count(max_tokens)
            trajectory.problems = [p.as_dict() for p in parsed.problems]
            trajectory.withheld = parsed.withheld  # (known once its steps are read)
            trajectory.save(update_fields=["step_bodies", "step_count", "max_step_tokens", "problems", "withheld"])
            return Written(count, calls)
    except PackError as exc:  # a streamed file that turns out to be broken half-way
        exc.problem.kept = "the raw bytes; no steps of this file"
        parsed.problems.append(exc.problem)  # for the import's report
        trial.problems.append(exc.problem.as_dict())
        return Written(0, 0)
    finally:
        if bodies is not None:
            bodies.discard()


def file_blob(parsed: ParsedTrajectory, blobs: dict[str, int]) -> int | None:
    """The blob of the trajectory's file (an embedded subagent's: its parent's file)."""
    return blobs.get(parsed.path.partition(EMBEDDED_MARK)[0])


def trajectory_row(trial: Trial, parsed: ParsedTrajectory, position: int, blob_id: int | None) -> Trajectory:
    """The trajectory's row, not saved yet."""
    return Trajectory(
        trial=trial,
        path=parsed.path[:1000],
        role=parsed.role,
        step_name=parsed.step_name[:200],
        position=position,
        blob_id=blob_id,
        withheld=parsed.withheld,
        schema_version=parsed.schema_version[:40],
        session_id=parsed.session_id[:200],
        trajectory_id=parsed.trajectory_id[:200],
        agent=parsed.agent,
        final_metrics=parsed.final_metrics,
        header=parsed.header,
    )


StepChunk = tuple[Trajectory, list[ParsedStep], StepBodies | None]


def write_steps(chunks: list[StepChunk]) -> None:
    """Steps of one or more trajectories, with their tool calls and observations: one insert per table.

    A chunk is a run of one trajectory's steps in order; several chunks are whole
    trajectories each. `bodies`: where the steps' JSON is copied to; None when each is
    served from its span in the file.
    """
    chunks = [chunk for chunk in chunks if chunk[1]]
    if not chunks:
        return
    rows = []
    for trajectory, parsed_steps, bodies in chunks:
        for step in parsed_steps:
            if bodies is None:
                offset, size = step.span
            else:
                body = dumps_bytes(step.raw)
                offset, size = bodies.add(body), len(body)
            rows.append(step_row(trajectory, step, offset, size))
    insert_rows(Step, rows)
    step_pks = {
        (trajectory_id, index): pk
        for trajectory_id, index, pk in Step.objects.filter(
            trajectory_id__in=[trajectory.pk for trajectory, _, _ in chunks],
            index__gte=min(steps[0].index for _, steps, _ in chunks),
            index__lte=max(steps[-1].index for _, steps, _ in chunks),
        ).values_list("trajectory_id", "index", "pk")
    }
    calls, observations = [], []
    for trajectory, parsed_steps, _ in chunks:
        for step in parsed_steps:
            step_pk = step_pks[trajectory.pk, step.index]
            for call in step.tool_calls:
                calls.append(
                    {
                        "step_id": step_pk,
                        "trial_id": trajectory.trial_id,
                        "tool_call_id": call.tool_call_id[:200],
                        "function_name": call.function_name[:200],
                        "arguments": call.arguments,
                    }
                )
            for obs in step.observations:
                observations.append(
                    {
                        "step_id": step_pk,
                        "source_call_id": str(obs.source_call_id or "")[:200],
                        "content_size": obs.content_size,
                        "preview": obs.content_text[:PREVIEW_CHARS],
                        "subagent_refs": obs.subagent_refs,
                    }
                )
    insert_rows(ToolCall, calls)
    insert_rows(ObservationResult, observations)


def step_row(trajectory: Trajectory, step: ParsedStep, offset: int, size: int) -> dict[str, Any]:
    return {
        "trajectory_id": trajectory.pk,
        "trial_id": trajectory.trial_id,
        "index": step.index,
        "step_id": "" if step.step_id is None else str(step.step_id)[:40],  # (null, or no object at all)
        "source": step.source[:10],
        "timestamp": _aware(step.timestamp),
        "model_name": step.model_name[:200],
        "message_text": step.message_text,
        "reasoning": step.reasoning,
        "prompt_tokens": _count(step.prompt_tokens),
        "completion_tokens": _count(step.completion_tokens),
        "cached_tokens": _count(step.cached_tokens),
        "cost_usd": step.cost_usd,
        "is_copied_context": step.is_copied_context,
        "llm_call_count": _count(step.llm_call_count, bits=32),
        "context_management": step.context_management[:20],
        "tool_call_count": len(step.tool_calls),
        "body_offset": offset,
        "size": size,
    }


def step_tokens(step: ParsedStep) -> int:
    """Prompt + completion tokens, as the viewer's token bar draws them (0 for nonsense counts)."""
    return (_count(step.prompt_tokens) or 0) + (_count(step.completion_tokens) or 0)


def _count(value: int | None, bits: int = 64) -> int | None:
    """A count past its column's bits is not a real count: keep it only in the raw step."""
    return value if value is None or -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else None


def write_trial_children(trial: Trial, parsed: ParsedTrial, blobs: dict[str, int]) -> None:
    RewardCriterion.objects.bulk_create(
        RewardCriterion(
            trial=trial,
            name=c.name[:300],
            score=c.score,
            weight=c.weight,
            reasoning=c.reasoning,
            evidence_refs=c.evidence_refs,
            raw=c.raw,
        )
        for c in parsed.criteria
    )
    Artifact.objects.bulk_create(
        Artifact(
            trial=trial,
            source=a.source[:1000],
            destination=a.destination[:1000],
            kind=a.kind[:20],
            status=a.status[:20],
            service=a.service[:100],
            blob_id=blobs.get(a.path),
            raw=a.raw,
        )
        for a in parsed.artifacts
    )
    RuntimeEvent.objects.bulk_create(event_row(e, trial, trial.pack) for e in parsed.events)
    write_permissions(trial, parsed.permissions)
    ContextRecord.objects.bulk_create(context_row(r, trial, trial.pack) for r in parsed.context_records)


def write_permissions(trial: Trial, permissions) -> None:
    PermissionDecision.objects.bulk_create(
        PermissionDecision(
            trial=trial,
            action_id=p.action_id[:200],
            tool_call_id=p.tool_call_id[:200],
            step_id=str(p.step_id)[:40],
            action_type=p.action_type[:100],
            tool_name=p.tool_name[:200],
            scope=p.scope,
            prompt=p.prompt,
            decision=p.decision,
            decided_by=p.decided_by[:200],
            reason=p.reason,
            side_effect_after_denial=p.side_effect_after_denial,
            requested_at=_aware(p.requested_at),
            resolved_at=_aware(p.resolved_at),
            raw=p.raw,
        )
        for p in permissions
    )


def event_row(event: ParsedEvent, trial: Trial | None, pack: Pack | None) -> RuntimeEvent:
    return RuntimeEvent(
        trial=trial,
        pack=pack,
        type=event.type[:100],
        event_id=event.event_id[:200],
        timestamp=_aware(event.timestamp),
        sequence=_count(event.sequence) if isinstance(event.sequence, int) else None,
        session_id=str(event.correlation.get("sessionId") or "")[:200],
        run_id=str(event.correlation.get("runId") or "")[:200],
        correlation=event.correlation,
        payload=event.payload,
        refs=event.refs,
        raw=event.raw,
    )


def context_row(record: ParsedContextRecord, trial: Trial | None, pack: Pack | None) -> ContextRecord:
    return ContextRecord(
        trial=trial,
        pack=pack,
        kind=record.kind[:20],
        record_id=record.record_id[:300],
        context_id=record.context_id[:200],
        status=record.status[:20],
        reason=record.reason,
        redaction_state=record.redaction_state[:30],
        step_id=str(record.correlation.get("stepId") or "")[:40],
        tool_call_id=str(record.correlation.get("toolCallId") or "")[:200],
        correlation=record.correlation,
        data=record.data,
    )


def find_trial(correlation: dict[str, Any]) -> Trial | None:
    """Join loose evidence to a trial by its ids: trial id first, then session, then run."""
    trial_id = correlation.get("trialId")
    if trial_id:
        found = Trial.objects.filter(name=trial_id).order_by("pk").first()
        if found:
            return found
    for field, key in (("session_id", "sessionId"), ("run_id", "runId")):
        value = correlation.get(key)
        if value:
            found = Trial.objects.filter(**{field: value}).order_by("pk").first()
            if found:
                return found
    return None


def find_trial_for_evidence_pack(parsed: ParsedTrial) -> Trial | None:
    trial_id = parsed.benchmark.get("trialId") or parsed.name
    return Trial.objects.filter(name=trial_id).exclude(source_format="lime").order_by("pk").first()


def join_evidence_pack(trial: Trial, parsed: ParsedTrial) -> None:
    with transaction.atomic():
        trial.benchmark = {**trial.benchmark, **{k: v for k, v in parsed.benchmark.items() if v}}
        trial.runtime_correlation = {**parsed.runtime_correlation, **trial.runtime_correlation}
        folder = str(trial.refs.get("harborTrialResultRef") or "").rpartition("/")[0]  # the trial's own folder

        def find(local: str) -> str | None:
            path = f"{folder}/{local}"
            return path if folder and PackFile.objects.filter(pack_id=trial.pack_id, path=path).exists() else None

        trial.refs = {**trial.refs, **completeness.own_files_for(parsed.refs, trial.refs, find)}
        trial.refs, unbacked = completeness.join_refs(trial.refs, parsed.refs)
        unbacked_problems = [harbor.unbacked_ref_problem(parsed.files[0], r, parsed.refs[r]) for r in unbacked]
        parsed.problems += unbacked_problems  # for the import's report
        trial.problems += [p.as_dict() for p in unbacked_problems]
        trial.documents = {**trial.documents, "evidence_pack": parsed.documents.get("evidence_pack")}
        trial.session_id = trial.session_id or str(trial.runtime_correlation.get("sessionId") or "")[:200]
        trial.run_id = trial.run_id or str(trial.runtime_correlation.get("runId") or "")[:200]
        if not trial.failure_category:
            trial.failure_category = parsed.failure_category[:60]
        if trial.attempt is None:
            trial.attempt = parsed.attempt
        replaced = trial.configuration
        if parsed.configuration:  # the pack's configuration id and role, with Harbor's agent and model
            trial.configuration = get_configuration(joined_configuration(parsed.configuration, replaced))
        apply_completeness(trial)
        trial.save()
        if agentcontext.has_redaction_marks(parsed.documents.get("evidence_pack")):  # (its `redactions`)
            redaction.scrub_trial(trial, settings.IMPORT_SPOOL_DIR)
        if replaced is not None and replaced != trial.configuration:
            Configuration.objects.filter(pk=replaced.pk, trials__isnull=True).delete()  # left with no trial


def joined_configuration(ref: ConfigurationRef, current: Configuration | None) -> ConfigurationRef:
    if current is None:
        return ref
    return dataclasses.replace(
        ref,
        agent_name=ref.agent_name or current.agent_name,
        agent_version=ref.agent_version or current.agent_version,
        model_name=ref.model_name or current.model_name,
        profiles={**current.profiles, **ref.profiles},
    )


def adopt_loose_events(trial_ids: list[int], spool: Path) -> None:
    """Events imported before their trial (in a file of their own, joined to no trial then): joined to it
    now by its session or run id, and a redaction among them applied to what it holds."""
    if not trial_ids or not RuntimeEvent.objects.filter(trial=None).exists():
        return
    for trial in Trial.objects.filter(pk__in=trial_ids):
        ids = Q(session_id=trial.session_id) if trial.session_id else Q()
        ids |= Q(run_id=trial.run_id) if trial.run_id else Q()
        if not ids:
            continue
        with transaction.atomic():
            loose = RuntimeEvent.objects.filter(ids, trial=None)
            raws = list(loose.values_list("raw", flat=True))
            if not raws:
                continue
            loose.update(trial=trial)
            if agentcontext.has_redaction_marks(raws):
                redaction.scrub_trial(trial, spool)


def write_loose_events(events: list[ParsedEvent], records: list[ParsedContextRecord], pack: Pack, spool: Path) -> int:
    """Events from a file of their own, joined to trials by correlation ids; a redaction among them
    scrubs what the trials it joins hold already (`redaction.scrub_trial`)."""
    cache: dict[tuple, Trial | None] = {}

    def trial_for(correlation: dict[str, Any]) -> Trial | None:
        key = tuple(sorted((k, str(v)) for k, v in correlation.items() if k in ("trialId", "sessionId", "runId")))
        if key not in cache:
            cache[key] = find_trial(correlation)
        return cache[key]

    with transaction.atomic():
        existing = set(RuntimeEvent.objects.filter(pack=pack).values_list("event_id", flat=True))
        rows = [event_row(e, trial_for(e.correlation), pack) for e in events if e.event_id not in existing]
        RuntimeEvent.objects.bulk_create(rows)
        by_trial: dict[int, list[ParsedEvent]] = {}
        for event, row in zip([e for e in events if e.event_id not in existing], rows, strict=True):
            if row.trial is not None:
                by_trial.setdefault(row.trial.pk, []).append(event)
                if (attempt := lime.attempt_of(event)) is not None:
                    Trial.objects.filter(pk=row.trial.pk, attempt__isnull=True).update(
                        attempt=attempt, updated_at=timezone.now()
                    )
                category = (event.payload or {}).get("failureCategory")
                if event.type == "benchmark.trial.failed" and category and category != "none":
                    Trial.objects.filter(pk=row.trial.pk, failure_category="").update(
                        failure_category=category, updated_at=timezone.now()
                    )
        for trial_pk, trial_events in by_trial.items():
            trial = Trial.objects.get(pk=trial_pk)
            write_permissions(trial, lime.permissions_from_events(trial_events))
        record_rows = []
        if not ContextRecord.objects.filter(pack=pack).exists():
            record_rows = ContextRecord.objects.bulk_create(
                context_row(r, trial_for(r.correlation), pack) for r in records
            )
        if agentcontext.has_redaction_marks([row.raw for row in rows] + [row.data for row in record_rows]):
            joined = {row.trial_id for row in [*rows, *record_rows] if row.trial_id is not None}
            for trial in Trial.objects.filter(pk__in=joined):
                redaction.scrub_trial(trial, spool)
    return len(rows)
