"""While an import writes, SQLite's WAL checkpoints run in a thread of their own."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.builders import import_path, write_trial
from trials.models import Blob, Trial
from trials.storage.sqlite_wal import DEFAULT_AUTOCHECKPOINT, checkpoints_in_background

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.sqlite_only("WAL checkpoints and their PRAGMAs are SQLite's; PostgreSQL has neither"),
]


def pragma(name: str) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA {name}")
        return cursor.fetchone()


def test_the_writing_connection_makes_no_checkpoints_while_the_thread_does():
    with checkpoints_in_background():
        assert pragma("wal_autocheckpoint") == (0,)
        for i in range(50):  # fifty commits, each adding frames to the log
            Blob.objects.create(sha256=f"{i:064x}", size=i)
    assert pragma("wal_autocheckpoint") == (DEFAULT_AUTOCHECKPOINT,)
    busy, log_frames, checkpointed = pragma("wal_checkpoint(PASSIVE)")
    # The thread's last checkpoint already copied every committed frame into the database.
    assert busy == 0 and log_frames > 0 and checkpointed == log_frames


def test_an_import_leaves_automatic_checkpoints_on(tmp_path):
    imp = import_path(write_trial(tmp_path))
    assert imp.status == "done"
    assert Trial.objects.count() == 1
    assert pragma("wal_autocheckpoint") == (DEFAULT_AUTOCHECKPOINT,)
