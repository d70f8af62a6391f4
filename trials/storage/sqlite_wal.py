"""SQLite's WAL checkpoints in a thread of their own while an import writes.

In WAL mode every page is written twice: into the log at commit, then into the database
by a checkpoint. SQLite runs that checkpoint inside whichever commit takes the log past
1,000 pages, so an import stopped for it: a quarter to a third of a big import's time in
bench/import_bench.py. While an import runs, its connection makes no checkpoints; a second
connection makes them in a thread (sqlite3 lets go of the GIL while it works, so they run
on another core). A PASSIVE checkpoint never blocks the writer or readers.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

CHECKPOINT_EVERY = 0.05  # seconds; the log stays small, so each checkpoint is short
DEFAULT_AUTOCHECKPOINT = 1000  # pages: SQLite's own default


@contextmanager
def checkpoints_in_background() -> Iterator[None]:
    """Around a writing job on SQLite; on other databases it does nothing."""
    if connection.vendor != "sqlite":
        yield
        return
    connection.ensure_connection()
    path = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint=0")
    stop = threading.Event()
    thread = threading.Thread(target=_checkpoint_until, args=(str(path), stop), name="wal-checkpoints", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if connection.connection is not None:  # the job may have closed its connection
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA wal_autocheckpoint={DEFAULT_AUTOCHECKPOINT}")


def _checkpoint_until(path: str, stop: threading.Event) -> None:
    db = sqlite3.connect(path, timeout=30, check_same_thread=False)
    try:
        while not stop.wait(CHECKPOINT_EVERY):
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")  # what the last commits wrote
    finally:
        db.close()
