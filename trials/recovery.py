"""Finding imports that no worker is going to finish, and sending them again.

An import can be stranded two ways:

- **queued, but its message is gone**: Redis lost its data (restarted without persistence,
  failed over) or was down when the import was sent. Every message sent for an import
  leaves a marker key next to it in the broker's Redis, and the task deletes the marker
  when it starts. Queued for longer than `IMPORT_QUEUED_GRACE` with no marker means the
  message is gone: the marker lives and dies with the messages it stands for.
- **running, but its worker is gone**: SIGKILL, out of memory, a lost machine. A running
  import holds a PostgreSQL advisory lock, on a connection of its own, for as long as its
  worker lives; PostgreSQL releases it when that connection closes, however the worker
  died. Running with the lock free means nobody is working on it. SQLite has no such
  lock, and its workers share one machine, so there the lock is an exclusive `flock` on a
  file in `IMPORT_LOCK_DIR`, which the kernel releases when its process ends.

`requeue_stale_imports` sends both kinds again. It runs every `IMPORT_RECOVERY_INTERVAL`
seconds from Celery beat and from `manage.py requeue_imports`. Sending an import twice is
safe: the task skips a finished import and one that another worker holds, and the import
itself keys packs by content and trials by natural key.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from trials.models import Import

log = logging.getLogger(__name__)

FINISHED = (Import.Status.DONE, Import.Status.FAILED)
MARKER_PREFIX = "benchviewer:import-sent:"
LOCK_POLL_SECONDS = 0.25
T = TypeVar("T")


# The "a worker is on it" lock ------------------------------------------------------------


def lock_key(import_id: str) -> int:
    """The advisory lock key of an import: the first 64 bits of its UUID, as a signed bigint."""
    return int.from_bytes(uuid.UUID(str(import_id)).bytes[:8], "big", signed=True)


def has_advisory_locks() -> bool:
    return connections[DEFAULT_DB_ALIAS].vendor == "postgresql"


@contextmanager
def own_connection() -> Iterator[BaseDatabaseWrapper]:
    """A database connection apart from Django's per-thread one: closing it drops its locks."""
    conn = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        yield conn
    finally:
        conn.close()


def try_lock(conn: BaseDatabaseWrapper, import_id: str) -> bool:
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock_key(import_id)])
        return bool(cursor.fetchone()[0])


@contextmanager
def import_lock(import_id: str, wait: float) -> Iterator[bool]:
    """Hold the import's lock while the block runs; yields False if another worker holds it.

    Waits up to `wait` seconds: a redelivered task can arrive a moment before PostgreSQL has
    noticed that the previous holder's connection closed. Without PostgreSQL, a file lock.
    """
    if not has_advisory_locks():
        with file_lock(lock_path(import_id), wait) as held:
            yield held
        return
    with own_connection() as conn:
        # Closing the connection releases the lock, even if unlocking were forgotten.
        yield keep_trying(lambda: try_lock(conn, import_id), wait)


def keep_trying(attempt: Callable[[], T], wait: float) -> T:
    """`attempt()` every LOCK_POLL_SECONDS until it gives neither False nor None, or `wait` is up."""
    deadline = time.monotonic() + wait
    result = attempt()
    while (result is False or result is None) and time.monotonic() < deadline:  # (a descriptor may be 0)
        time.sleep(LOCK_POLL_SECONDS)
        result = attempt()
    return result


def lock_path(import_id: str) -> Path:
    return Path(settings.IMPORT_LOCK_DIR) / f"{uuid.UUID(str(import_id))}.lock"


@contextmanager
def file_lock(path: Path, wait: float) -> Iterator[bool]:
    """An exclusive flock on `path`, or False after `wait` seconds; the file goes when released."""
    fd = keep_trying(lambda: try_file_lock(path), wait)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        path.unlink(missing_ok=True)  # still locked: whoever opened this file finds it gone and retries
        os.close(fd)


def try_file_lock(path: Path) -> int | None:
    """A descriptor holding the lock on the file at `path` now, or None if a process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass  # held, or released and removed between our open and our lock
    os.close(fd)
    return None


# The "a message is waiting for it" marker ------------------------------------------------

_clients: dict[str, redis.Redis] = {}


def broker_redis() -> redis.Redis | None:
    """A client for the broker's Redis, or None when the broker is not Redis (eager mode)."""
    from benchviewer.celery import app

    url = app.conf.broker_url
    if not isinstance(url, str) or url.split("://", 1)[0] not in ("redis", "rediss"):
        return None
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    return _clients[url]


def mark_sent(import_id: str) -> None:
    client = broker_redis()
    if client is None:
        return
    try:
        client.set(MARKER_PREFIX + import_id, timezone.now().isoformat(), ex=settings.IMPORT_SENT_MARKER_TTL)
    except redis.RedisError as exc:  # at worst the import is sent once more later: harmless
        log.warning("could not mark import %s as sent: %s", import_id, exc)


def clear_sent(import_id: str) -> None:
    client = broker_redis()
    if client is None:
        return
    try:
        client.delete(MARKER_PREFIX + import_id)
    except redis.RedisError as exc:  # the lock covers the import from here on
        log.warning("could not clear the sent marker of import %s: %s", import_id, exc)


def waiting_in_broker(import_id: str) -> bool:
    """Whether a message for the import is waiting in the broker (False when unknowable)."""
    client = broker_redis()
    return client is not None and bool(client.exists(MARKER_PREFIX + import_id))


# The sweep -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requeued:
    import_id: str
    reason: str


def stale_imports() -> list[Requeued]:
    """Queued imports whose message is gone and running imports whose worker is gone."""
    now = timezone.now()
    stale = []
    queued = Import.objects.filter(
        status=Import.Status.QUEUED, created_at__lt=now - timedelta(seconds=settings.IMPORT_QUEUED_GRACE)
    )
    for import_id in queued.values_list("pk", flat=True):
        if not waiting_in_broker(str(import_id)):
            stale.append(Requeued(str(import_id), "queued, but no message for it is waiting in the broker"))
    running = [str(pk) for pk in Import.objects.filter(status=Import.Status.RUNNING).values_list("pk", flat=True)]
    stale.extend(Requeued(import_id, "running, but no worker holds it") for import_id in unheld(running))
    return stale


def unheld(import_ids: list[str]) -> list[str]:
    """The ones of these running imports whose lock nobody holds: their worker is gone."""
    if has_advisory_locks():
        with own_connection() as conn:  # a lock taken here is released when the connection closes
            return [import_id for import_id in import_ids if try_lock(conn, import_id)]
    gone = []
    for import_id in import_ids:
        with file_lock(lock_path(import_id), wait=0) as held:
            if held:
                gone.append(import_id)
    return gone


def requeue_stale_imports(dry_run: bool = False) -> list[Requeued]:
    from trials.tasks import import_pack_task

    stale = stale_imports()
    for item in stale:
        log.warning("import %s: %s; sending it again", item.import_id, item.reason)
        if not dry_run:
            import_pack_task.delay(item.import_id)
    return stale
