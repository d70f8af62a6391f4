"""core/sqlite_schema.sql, what a new data folder is made from, is what a fresh `migrate` makes.

The first test migrates a throwaway file as `manage.py sqlite_schema --write` does and compares its
dump with the shipped one, so a migration added without regenerating the file fails here. The
second loads the file into a new data folder as `benchviewer view` does, through the settings'
own connection, and checks Django then finds nothing to migrate and the FTS5 index works.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from core import sqlite_schema

REPO = Path(__file__).resolve().parents[2]
LOAD_TWICE = (
    "from django.db import connection; from core import sqlite_schema; "
    "print(sqlite_schema.create_if_new(connection), sqlite_schema.create_if_new(connection))"
)


def test_the_shipped_schema_is_what_a_fresh_migrate_makes():
    assert sqlite_schema.migrated_dump() == sqlite_schema.SCHEMA_FILE.read_text(), (
        "a migration changed what a new database holds: run .venv/bin/python manage.py sqlite_schema --write"
    )


def test_a_new_data_folder_loaded_from_it_has_nothing_to_migrate(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "TEST_SQLITE_PATH")}
    env |= {"DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "benchviewer.settings"}

    def django(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "django", *args], env=env, cwd=REPO, capture_output=True, text=True
        )

    loaded = django("shell", "-c", LOAD_TWICE)
    assert loaded.stdout.split()[-2:] == ["True", "False"], loaded.stderr  # loaded once, then left alone
    unapplied = django("migrate", "--check", "--plan")
    assert unapplied.returncode == 0, unapplied.stdout + unapplied.stderr
    database = tmp_path / "benchviewer.sqlite3"
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA page_size").fetchone() == (16384,)  # the settings' connection made it
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute(
            "SELECT count(*) FROM django_migrations WHERE applied = ?", [sqlite_schema.APPLIED]
        ).fetchone() == (0,)
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []  # (loaded with them off)
        db.execute("INSERT INTO trials_step_fts(trials_step_fts) VALUES ('integrity-check')")
    assert sqlite_schema.dump(database) == sqlite_schema.SCHEMA_FILE.read_text()
