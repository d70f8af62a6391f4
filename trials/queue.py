"""Creating imports and handing them to a worker: Celery with a broker, or without one
(the embedded default) a thread of the web server, which also picks up what a previous
server process left behind.
"""

from __future__ import annotations

import functools
import logging
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, BinaryIO

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.files.uploadedfile import UploadedFile
from django.db import connections, transaction
from django.utils import timezone

from trials.imports import recovery
from trials.imports.blobs import store_file
from trials.ingest.folders import relative_name
from trials.ingest.records import Problem
from trials.models import (
    Blob,
    Import,
)
from trials.tasks import import_pack_task

if TYPE_CHECKING:
    from celery import Task

log = logging.getLogger(__name__)


def create_import(
    *,
    origin: str,
    source_name: str,
    source_path: str = "",
    upload: Blob | None = None,
    user: User | AnonymousUser | None = None,
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

    def send() -> None:
        if settings.IMPORTS_IN_THREAD:
            embedded_worker().submit(run_in_embedded_worker, import_pack_task, str(imp.pk))
            return
        try:
            import_pack_task.delay(str(imp.pk))
        except Exception:  # broker down: the import stays queued and the recovery sweep sends it
            log.warning("could not queue import %s; trials.imports.recovery will send it again", imp.pk, exc_info=True)

    transaction.on_commit(send)


on_this_thread = threading.local()  # .worker: the EmbeddedWorker a thread works for


class EmbeddedWorker:
    """The jobs of the embedded default, run in turn on one thread of this process (a
    ThreadPoolExecutor's `submit`, one worker). A watch fails an import that makes no progress for
    IMPORT_STALL_TIMEOUT seconds and leaves its thread behind (Python cannot stop a thread): a new
    one runs the next job, and the old one ends when its job returns.
    """

    def __init__(self, name: str = "benchviewer-import") -> None:
        self.name = name
        self.jobs: SimpleQueue[tuple[Future, Callable[..., Any], tuple[Any, ...]]] = SimpleQueue()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.import_id: str | None = None  # the import the current thread runs, if its job is one
        self.closed = False
        self.start_thread()
        threading.Thread(target=self.watch, name=f"{name}-watch", daemon=True).start()

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        future: Future = Future()
        self.jobs.put((future, fn, args))
        return future

    def start_thread(self) -> None:
        thread = threading.Thread(target=self.work, name=self.name, daemon=True)
        with self.lock:
            self.thread, self.import_id = thread, None
        thread.start()

    def work(self) -> None:
        on_this_thread.worker = self
        while self.thread is threading.current_thread():  # a thread left behind takes no more jobs
            future, fn, args = self.jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # (the job's own error, given to whoever waits on it)
                if not future.done():
                    future.set_exception(exc)
            else:
                if not future.done():
                    future.set_result(result)

    def close(self) -> None:
        """Take no more jobs (the one running goes to its end) and stop watching: a test's own worker."""
        self.closed = True
        with self.lock:
            self.thread = None
        self.jobs.put((Future(), lambda: None, ()))  # wakes the thread, which is no longer the worker's

    def running(self, import_id: str | None) -> None:
        """Called on the worker's thread: the import it runs now (None: done with it)."""
        with self.lock:
            if self.thread is threading.current_thread():
                self.import_id = import_id

    def watch(self) -> None:
        seen: tuple[Any, ...] | None = None
        since = time.monotonic()
        while not self.closed:
            timeout = settings.IMPORT_STALL_TIMEOUT
            time.sleep(min(max(timeout / 10, 0.05), 5.0))
            with self.lock:
                import_id = self.import_id
            if import_id is None:
                seen = None
                continue
            try:
                now_seen = (import_id, *progress_of(import_id))
            finally:
                connections.close_all()  # this thread's own connection
            if now_seen != seen:
                seen, since = now_seen, time.monotonic()
            elif time.monotonic() - since >= timeout:
                log.error("import %s made no progress for %s s; failing it, the next import runs", import_id, timeout)
                try:
                    fail_stalled(import_id, timeout)
                finally:
                    connections.close_all()
                with self.lock:
                    stalled = self.import_id == import_id
                if stalled and not self.closed:
                    self.start_thread()
                seen = None


def progress_of(import_id: str) -> tuple[Any, ...]:
    """What an import records as it goes: its status, counts, and how many outcomes and problems."""
    row = (
        Import.objects.filter(pk=import_id)
        .values_list("status", "progress_done", "progress_total", "outcomes", "problems")
        .first()
    )
    if row is None:
        return ()
    status, done, total, outcomes, problems = row
    return (status, done, total, len(outcomes or ()), len(problems or ()))


def fail_stalled(import_id: str, timeout: int) -> None:
    """Fail a hung import with why; its thread's later writes leave that verdict (service._run_once)."""
    with transaction.atomic():
        imp = Import.objects.select_for_update().filter(pk=import_id).first()
        if imp is None or imp.status in recovery.FINISHED:
            return
        reason = f"import failed: no progress for {timeout} s"
        imp.problems.append(Problem(imp.source_name, reason, kept="every byte stored before it hung").as_dict())
        imp.status = Import.Status.FAILED
        imp.finished_at = timezone.now()
        imp.save(update_fields=["problems", "status", "finished_at"])


@functools.cache
def embedded_worker() -> EmbeddedWorker:
    """The embedded default's worker (no broker): one thread of this process, imports in turn.

    Its first job picks up the imports a previous server process left behind.
    """
    worker = EmbeddedWorker()
    worker.submit(resume_stranded_imports)
    return worker


def start_embedded_worker(**kwargs: object) -> None:
    """On a request (`request_started`): the server has started, so its import thread does."""
    if settings.IMPORTS_IN_THREAD:
        embedded_worker()


def resume_stranded_imports() -> None:
    """Imports queued in a thread that died with its process, or left running by a process now gone."""
    try:
        stranded = recovery.stale_imports()
    finally:
        connections.close_all()
    for item in stranded:
        log.warning("import %s: %s; running it again", item.import_id, item.reason)
        run_in_embedded_worker(import_pack_task, item.import_id)


def run_in_embedded_worker(task: Task, import_id: str) -> None:
    worker: EmbeddedWorker | None = getattr(on_this_thread, "worker", None)
    watched = worker is not None and task is import_pack_task  # (the live path sends a trial's id)
    if worker is not None and watched:
        worker.running(import_id)
    try:
        task.delay(import_id)  # Celery is eager here: the task runs in this thread
    except Exception:  # run_import records its own failures; this is a bug, and the thread goes on
        log.exception("import %s failed in the embedded worker", import_id)
    finally:
        if worker is not None and watched:
            worker.running(None)
        connections.close_all()  # this thread's own connections


def import_upload(
    fileobj: UploadedFile | BinaryIO, name: str, *, origin: str, user: User | AnonymousUser | None = None
) -> Import:
    """Store an uploaded file's bytes first (nothing is lost), then queue its import (`name`: its relative path)."""
    settings.IMPORT_SPOOL_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=settings.IMPORT_SPOOL_DIR, delete=False) as tmp:
        for chunk in fileobj.chunks() if hasattr(fileobj, "chunks") else iter(lambda: fileobj.read(1 << 20), b""):
            tmp.write(chunk)
        tmp_path = Path(tmp.name)
    try:
        blob = store_file(tmp_path)
    finally:
        tmp_path.unlink(missing_ok=True)
    imp = create_import(origin=origin, source_name=relative_name(name) or "upload", upload=blob, user=user)
    enqueue(imp)
    return imp
