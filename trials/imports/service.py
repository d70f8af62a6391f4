"""The import service: the one place that writes imported packs to the database.

The CLI, the API and the upload page create an Import and hand it to the Celery task,
which calls `run_import`. Steps: store every file's bytes (content-addressed), detect
each pack's format, parse it with a pure parser, then write its trials, each whole or not at
all: in batches (`write_trials`), or one transaction per trial (`write_trial`).
Re-running an import is safe: packs and trials are keyed by content and natural keys.

This module runs an import (`run_import`, `ImportRun`); queue.py creates and sends them,
pack_write.py writes one parsed pack,
writer.py writes trials, joins.py joins evidence that arrives apart from its trial.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from core.database import DatabaseOutage, is_unreachable, wait_until_reachable
from trials.imports.blobs import store_file, store_files
from trials.imports.pack_write import PackWrite
from trials.ingest.archives import MAX_NESTING, Budget, Expansion, Limits, extract
from trials.ingest.folders import relative_name
from trials.ingest.formats.detect import (
    Candidate,
    discover,
    over_the_limit,
    parse_candidate,
    screen_folder,
    skip_reason,
)
from trials.ingest.records import PackError, ParsedPack, Problem
from trials.models import Import, Pack, PackFile
from trials.storage.backend import remove_stale_partials, sha256_of_file
from trials.storage.sqlite_wal import checkpoints_in_background

log = logging.getLogger(__name__)


PROGRESS_EVERY = 0.5  # seconds between progress writes: one per trial was a commit per trial


def limits() -> Limits:
    return Limits(
        max_expanded_bytes=settings.IMPORT_MAX_EXPANDED_BYTES,
        max_ratio=settings.IMPORT_MAX_ARCHIVE_RATIO,
        max_members=settings.IMPORT_MAX_ARCHIVE_MEMBERS,
        max_file_bytes=settings.IMPORT_MAX_FILE_BYTES,
        max_run_rows=settings.IMPORT_MAX_RUN_ROWS,
    )


def remove_spool_leftovers(import_id: str) -> None:
    """What a killed run of this import left in the spool (extracted archives, step bodies),
    and the copies into the blob storage that killed processes left half-done long ago.

    Call it holding the import's lock (trials/imports/recovery.py): then no other run is using them.
    """
    for leftover in settings.IMPORT_SPOOL_DIR.glob(f"import-{import_id}-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    remove_stale_partials()


def run_import(
    import_id: str,
    on_progress: Callable[[Import], None] | None = None,
    still_ours: Callable[[], bool] = lambda: True,
) -> Import:
    """Run the import; through a database outage it pauses, then runs again (what was written stays,
    found as already there), unless another worker took the import over meanwhile (`still_ours`:
    the worker lock regained) or the database stays away past IMPORT_OUTAGE_WAIT (its error raised)."""
    while True:
        try:
            return _run_once(import_id, on_progress)
        except DatabaseOutage as exc:
            log.warning("import %s paused: the database is unreachable (%s); waiting for it", import_id, exc)
            wait_until_reachable(settings.IMPORT_OUTAGE_WAIT)
            if not still_ours():
                log.warning("import %s: another worker took it over while the database was away", import_id)
                return Import.objects.get(pk=import_id)
            log.info("import %s: the database is back; running it again", import_id)


def _run_once(import_id: str, on_progress: Callable[[Import], None] | None) -> Import:
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
        if is_unreachable(exc):  # an outage is no failure of the import: it runs again (run_import)
            raise DatabaseOutage(str(exc).strip()) from exc
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
    if Import.objects.filter(pk=imp.pk).exclude(status=Import.Status.RUNNING).exists():
        # failed meanwhile by the embedded worker's stall watch (trials/queue.py): its verdict stands
        return Import.objects.get(pk=imp.pk)
    imp.save()
    return imp


@contextmanager
def rare_full_collections() -> Iterator[None]:
    """Python's full garbage collections walk every live object, and an import keeps a batch of
    parsed trials alive while it makes and drops millions of objects: at the default
    threshold they took a tenth of a job's import (bench/README.md). Ten times rarer here."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


class StalledRun(Exception):
    """The import was failed while this run of it hung (trials/queue.py): it writes nothing more."""


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

    def row(self) -> QuerySet[Import]:
        """The import's row while it runs: a run the stall watch failed meanwhile (trials/queue.py) writes no more."""
        return Import.objects.filter(pk=self.imp.pk, status=Import.Status.RUNNING)

    def run(self) -> None:
        imp = self.imp
        if imp.upload is not None:
            rel = relative_name(imp.source_name) or "upload"  # (its folders kept: they name a TB1 submission)
            source = self.workdir / "upload" / rel
            source.parent.mkdir(parents=True)
            with imp.upload.open() as src, open(source, "wb") as dest:
                shutil.copyfileobj(src, dest, 1 << 20)
        else:
            source = Path(imp.source_path)
            rel = source.name
            if not source.exists():
                raise FileNotFoundError(f"no such file or folder: {imp.source_path}")
        candidates = discover(source, rel, top=True)
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
        # (a job's stats may name trials no folder holds: counted as they are written, never past the total)
        self.imp.progress_done = min(self.imp.progress_done + n, max(self.imp.progress_total, self.imp.progress_done))
        now = time.monotonic()
        if now - self.progress_saved_at >= PROGRESS_EVERY or self.imp.progress_done >= self.imp.progress_total:
            self.row().update(progress_done=self.imp.progress_done)
            self.progress_saved_at = now
        if self.on_progress:
            self.on_progress(self.imp)

    def between_trials(self) -> None:
        """A moment between two trials of a pack counted whole (none is half-written): `on_progress` hears of it
        too, so benchviewer view's pages go before an Inspect log's next sample, as before a job's next trial."""
        if self.on_progress:
            self.on_progress(self.imp)

    def outcome(self, candidate_rel: str, kind: str, outcome: str, pack: Pack | None = None, **extra: Any) -> None:
        line = {"pack": candidate_rel, "kind": kind, "outcome": outcome, **extra}
        if details := outcome_details(extra):
            line["details"] = details
        if pack is not None:  # so the import page can list the pack's trials
            line["pack_id"] = pack.pk
        self.imp.outcomes.append(line)
        self.row().update(outcomes=self.imp.outcomes)

    def reject(
        self, candidate: Candidate, problem: Problem, pack: Pack | None = None, noticed: Iterable[Problem] = ()
    ) -> None:
        problems = [problem.as_dict(), *(p.as_dict() for p in noticed)]
        self.imp.problems.extend(problems)
        self.row().update(problems=self.imp.problems)
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
            budget = Budget(self.expansion or Expansion(candidate.path), candidate.rel, self.limits)
            parsed = parse_candidate(candidate, budget)
            parsed.problems[:0] = screened
            Pack.objects.filter(pk=pack.pk).update(kind=parsed.kind)
            pack.kind = parsed.kind
            counts = self.write_pack(parsed, pack, files)
        except PackError as exc:
            self.reject(candidate, exc.problem, pack, exc.noticed)
            self.advance(self.weight(candidate))
            return
        except Exception as exc:  # a parser bug must not stop the other packs; the bytes are kept
            if is_unreachable(exc):  # the database went away: no fault of this pack's
                raise DatabaseOutage(str(exc).strip()) from exc
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
        self.row().update(problems=self.imp.problems)
        brought = any(
            counts.get(k) for k in ("trials", "joined", "adopted", "events", "documents", "job_results", "regrouped")
        )
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
        self.row().update(progress_total=self.imp.progress_total, problems=self.imp.problems)
        for child in inner:
            self.import_candidate(child)

    def pack_files(self, candidate: Candidate) -> tuple[dict[str, tuple[Path, str, int]], list[Problem]]:
        """pack-relative path -> (file, sha256, size) for every regular file of the pack, and what was left out."""
        if candidate.path.is_file():
            too_big = over_the_limit(candidate.path, candidate.rel, self.limits.max_file_bytes)
            paths, screened = ([], [too_big]) if too_big else ([(candidate.rel, candidate.path)], [])
        elif candidate.members:  # some files of a folder; the others are packs of their own
            members = [(f"{candidate.rel}/{path.name}", path) for path in candidate.members]
            checked = [over_the_limit(path, rel, self.limits.max_file_bytes) for rel, path in members]
            paths = [member for member, problem in zip(members, checked, strict=True) if problem is None]
            screened = [problem for problem in checked if problem is not None]
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
        if not self.row().exists():  # failed meanwhile by the stall watch: what a hung parse read is not written
            raise StalledRun(f"import {self.imp.pk} was failed while it ran")
        return PackWrite(
            self.imp, self.workdir, (self.advance, self.between_trials), self.ran_before, parsed, pack, files
        ).run()


# What an outcome line's counts say beside its trials (the import page's Details column).
OUTCOME_COUNTS = {
    "already": "already there",
    "differs": "imported before from other bytes",
    "joined": "joined to a trial",
    "regrouped": "joined to their job",
    "job_results": "job result applied",
    "adopted": "trials imported before joined to their job",
    "replaced": "trials known from the job's stats replaced by their folders",
    "rejected": "rejected",
    "events": "events",
    "documents": "documents",
    "inferred": "configurations inferred",
    "to_dataset": "trials imported before moved to the dataset holding their tasks",
    "steps": "steps",
    "members": "members",
    "skipped": "members skipped",
}


def outcome_details(counts: dict[str, Any]) -> str:
    return ", ".join(f"{counts[key]} {label}" for key, label in OUTCOME_COUNTS.items() if counts.get(key))
