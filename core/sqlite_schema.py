"""A new SQLite database made from `sqlite_schema.sql`, what a fresh `migrate` leaves, in one transaction.

Running the 62 migrations on a new data folder cost 3.7 s of CPU (Django rendering migration states),
most of the first `benchviewer view`. The schema file holds every table, index and FTS5 table a fresh
`migrate` makes, and the rows it and its post_migrate handlers write (`django_migrations`, content
types, permissions, the role groups): sqlite3's `iterdump()` of a migrated file, the FTS5 tables'
shadow tables left to their `CREATE VIRTUAL TABLE` (which makes them, as the migration did).
`manage.py sqlite_schema --write` regenerates it; `tests/core/test_sqlite_schema.py` fails when a
migration changed without it. An existing database, and PostgreSQL, migrate as before.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from django.db.backends.base.base import BaseDatabaseWrapper

SCHEMA_FILE = Path(__file__).with_name("sqlite_schema.sql")
APPLIED = "2000-01-01 00:00:00"  # every migration's `applied` in the file; the load sets its own time
VIRTUAL_ROW = "INSERT INTO sqlite_master(type,name,tbl_name,rootpage,sql)VALUES('table','{}'"


def dump(database: Path) -> str:
    """The database's schema and rows as SQL statements in one transaction, the same for the same schema."""
    with closing(sqlite3.connect(database)) as db:
        db.execute("UPDATE django_migrations SET applied = ?", [APPLIED])  # read as changed, never committed
        return "".join(f"{statement}\n" for statement in _statements(db))


def _statements(db: sqlite3.Connection) -> Iterator[str]:
    """iterdump(), with each FTS5 table written as its CREATE VIRTUAL TABLE instead of by writable_schema."""
    virtual = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'"))
    shadow = [row[1] for row in db.execute("PRAGMA table_list") if row[2] == "shadow"]
    made_by_virtual = tuple(f"CREATE TABLE '{name}'" for name in shadow) + tuple(
        f'INSERT INTO "{name}" ' for name in shadow
    )
    for statement in db.iterdump():
        if statement.startswith("PRAGMA writable_schema") or statement.startswith(made_by_virtual):
            continue
        name = next((name for name in virtual if statement.startswith(VIRTUAL_ROW.format(name))), None)
        yield f"{virtual[name]};" if name else statement


def migrated_dump() -> str:
    """The dump of a throwaway SQLite file that `migrate` has just made (in a process of its own)."""
    with tempfile.TemporaryDirectory(prefix="benchviewer-schema-") as folder:
        database = Path(folder) / "schema.sqlite3"
        env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "TEST_SQLITE_PATH")}
        env |= {"DATABASE_URL": f"sqlite:///{database}", "DATA_DIR": folder}
        env.setdefault("DJANGO_SETTINGS_MODULE", "benchviewer.settings")
        command = [sys.executable, "-m", "django", "migrate", "--no-input", "--verbosity", "0"]
        subprocess.run(command, env=env, check=True, cwd=Path(__file__).resolve().parents[1])
        return dump(database)


def create_if_new(connection: BaseDatabaseWrapper) -> bool:
    """Load the schema file into the SQLite database of `connection` if it has no table yet; whether it did."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master")
        if cursor.fetchone()[0]:
            return False
    statements = SCHEMA_FILE.read_text().removesuffix("COMMIT;\n")
    # Foreign keys off while loading: the dump's tables come by name, a row before the table it refers to.
    # One transaction: a load cut short leaves an empty database, which the next start loads again.
    connection.connection.executescript(
        f"PRAGMA foreign_keys = OFF;\n{statements}"
        "UPDATE django_migrations SET applied = strftime('%Y-%m-%d %H:%M:%f', 'now');\nCOMMIT;\n"
        "PRAGMA foreign_keys = ON;\n"
    )
    return True
