"""The "a worker is on it" lock of a task's work (an import, a comparison): a PostgreSQL
advisory lock on a connection of its own, or without PostgreSQL an exclusive flock on a file
in IMPORT_LOCK_DIR. Either is released when its holder dies, however it died, so work that
is running with its lock free has lost its worker (trials/imports/recovery.py,
comparisons/computing/recovery.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

LOCK_POLL_SECONDS = 0.25


T = TypeVar("T")


def lock_key(name: str) -> int:
    """The advisory lock key of a name, as a signed bigint: the first 64 bits of an import's UUID,
    or of any other name's sha256."""
    try:
        raw = uuid.UUID(str(name)).bytes
    except ValueError:
        raw = hashlib.sha256(str(name).encode()).digest()
    return int.from_bytes(raw[:8], "big", signed=True)


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


def try_lock(conn: BaseDatabaseWrapper, name: str) -> bool:
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock_key(name)])
        return bool(cursor.fetchone()[0])


class HeldLock:
    """Whether the lock is held (it is truthy then), and `regain()`: after a database outage an
    advisory lock went with its connection; True if it is ours again, False if another worker took it."""

    def __init__(self, held: bool, regain: Callable[[], bool] = lambda: True):
        self.held = held
        self.regain = regain

    def __bool__(self) -> bool:
        return self.held


@contextmanager
def worker_lock(name: str, wait: float) -> Iterator[HeldLock]:
    """Hold the lock of `name` (an import's id, "comparison-<id>") while the block runs; yields
    a false HeldLock if another worker holds it.

    Waits up to `wait` seconds: a redelivered task can arrive a moment before PostgreSQL has
    noticed that the previous holder's connection closed. Without PostgreSQL, a file lock
    (which no database outage takes away).
    """
    if not has_advisory_locks():
        with file_lock(lock_path(name), wait) as held:
            yield HeldLock(held)
        return
    with own_connection() as conn:

        def regain() -> bool:
            conn.close()  # (the next query opens a new connection; the old one's locks died with it)
            return try_lock(conn, name)

        # Closing the connection releases the lock, even if unlocking were forgotten.
        yield HeldLock(keep_trying(lambda: try_lock(conn, name), wait), regain)


def keep_trying(attempt: Callable[[], T], wait: float) -> T:
    """`attempt()` every LOCK_POLL_SECONDS until it gives neither False nor None, or `wait` is up."""
    deadline = time.monotonic() + wait
    result = attempt()
    while (result is False or result is None) and time.monotonic() < deadline:  # (a descriptor may be 0)
        time.sleep(LOCK_POLL_SECONDS)
        result = attempt()
    return result


def lock_path(name: str) -> Path:
    try:
        name = str(uuid.UUID(str(name)))  # an import's id, written as its UUID
    except ValueError:
        name = "".join(c for c in str(name) if c.isalnum() or c in "-_")
    return Path(settings.IMPORT_LOCK_DIR) / f"{name}.lock"


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


def unheld(names: list[str]) -> list[str]:
    """The ones of these names (of running work) whose lock nobody holds: their worker is gone."""
    if has_advisory_locks():
        with own_connection() as conn:  # a lock taken here is released when the connection closes
            return [name for name in names if try_lock(conn, name)]
    gone = []
    for name in names:
        with file_lock(lock_path(name), wait=0) as held:
            if held:
                gone.append(name)
    return gone
