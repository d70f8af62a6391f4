"""Creating imports and handing them to a worker: Celery with a broker, or without one
(the embedded default) a thread of the web server, which also picks up what a previous
server process left behind.
"""

from __future__ import annotations

import functools
import logging
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.files.uploadedfile import UploadedFile
from django.db import connections, transaction

from trials.imports import recovery
from trials.imports.blobs import store_file
from trials.ingest.folders import relative_name
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


@functools.cache
def embedded_worker() -> ThreadPoolExecutor:
    """The embedded default's worker (no broker): one thread of this process, imports in turn.

    Its first job picks up the imports a previous server process left behind.
    """
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="benchviewer-import")
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
    try:
        task.delay(import_id)  # Celery is eager here: the task runs in this thread
    except Exception:  # run_import records its own failures; this is a bug, and the thread goes on
        log.exception("import %s failed in the embedded worker", import_id)
    finally:
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
