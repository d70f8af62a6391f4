"""Django set up for the bench scripts, on a fresh database: the one place they get it from.

SQLite (the default): a new database in `data_dir`, copied from a migrated template kept in
the temporary folder per set of migrations, because migrating from scratch takes 5 s of CPU
(15 s on the shared machine), more than a `--quick` run's whole measurement.
PostgreSQL: the server DATABASE_URL names (never a hard-coded address), in the database the
script names (`postgres_url`), which the script creates and drops.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
SQLITE_NAME = "benchviewer.sqlite3"  # where benchviewer/settings.py puts it in DATA_DIR


def environment(data_dir: str | Path, database_url: str | None = None, redis_url: str | None = None) -> dict[str, str]:
    """The environment a Benchviewer process of the bench reads (before Django starts): no Redis
    unless given (tasks run in-process), SQLite in `data_dir` unless a database URL is given."""
    env = {**os.environ, "DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "benchviewer.settings"}
    for name, value in (("DATABASE_URL", database_url), ("REDIS_URL", redis_url)):
        if value:
            env[name] = value
        else:
            env.pop(name, None)
    return env


def setup_django(data_dir: str | Path, database_url: str | None = None, redis_url: str | None = None) -> None:
    """Set up Django in this process on a migrated database: SQLite in `data_dir`, or `database_url`."""
    os.environ.clear()
    os.environ.update(environment(data_dir, database_url, redis_url))
    target = Path(data_dir) / SQLITE_NAME
    if not database_url and not target.exists():  # (a child process may open one a sibling filled)
        copy_migrated_sqlite(target)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)  # (nothing to do on a copy of the template)


def timed_import(source: Path) -> tuple[Any, float]:
    """One import of `source` in this process (after `setup_django`), as `import_packs` runs it:
    its Import row, and the seconds it took."""
    import time

    from trials.imports.service import run_import
    from trials.models import Import
    from trials.queue import create_import

    start = time.perf_counter()
    imp = create_import(origin=Import.Origin.CLI, source_name=source.name, source_path=str(source))
    return run_import(str(imp.pk)), time.perf_counter() - start


def copy_migrated_sqlite(target: Path) -> None:
    """A migrated SQLite database at `target`, copied from the template of these migrations."""
    migrations = sorted(REPO.glob("*/migrations/*.py"))
    key = hashlib.sha256(b"".join(p.read_bytes() for p in migrations) + sys.version.encode()).hexdigest()[:16]
    template = Path(tempfile.gettempdir()) / f"benchviewer-bench-{key}.sqlite3"
    if not template.exists():
        with tempfile.TemporaryDirectory(prefix="bench-migrate-") as folder:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
                cwd=REPO,
                env=environment(folder),
                check=True,
            )
            migrated = Path(folder) / SQLITE_NAME
            with sqlite3.connect(migrated) as db:  # (WAL: everything into the main file before the copy)
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            partial = template.with_name(f"{template.name}.{os.getpid()}")
            shutil.copyfile(migrated, partial)
            os.replace(partial, template)  # (another bench making it at once writes the same)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)


def postgres_url(database: str) -> str:
    """The URL of `database` on the PostgreSQL server DATABASE_URL names."""
    base = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(base)
    if not parts.scheme.startswith("postgres"):
        raise SystemExit(f"set DATABASE_URL to a PostgreSQL server (postgres://user@host:port/db), not {base!r}")
    return urlunsplit(parts._replace(path=f"/{database}"))


def psql(url: str, sql: str) -> None:
    """Run `sql` on the server of `url`, connected to its `postgres` database (to create or drop `url`'s)."""
    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    subprocess.run(["psql", admin, "-q", "-c", sql], check=True)
