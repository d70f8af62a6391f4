"""`import_packs --watch DIR` follows a Harbor jobs folder as a running job writes it, trial by trial."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.builders import REPO, write_trial
from tests.imports.watch_helpers import Watcher, finish
from trials.demo import write_job

pytestmark = pytest.mark.sqlite_only("the watcher runs in a process of its own, on a SQLite file this test reads")


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql).fetchall()


def test_a_watched_job_folder_is_imported_trial_by_trial_and_never_twice(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1", "IMPORTS_IN_THREAD": "0"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    db = tmp_path / "data" / "benchviewer.sqlite3"
    jobs = tmp_path / "jobs"
    job = jobs / "watched-job"
    job.mkdir(parents=True)
    (job / "config.json").write_bytes(orjson.dumps({"job_name": "watched-job", "agents": [{"name": "test-agent"}]}))
    running = {"id": "job-watched-1", "started_at": "2026-11-26T00:00:00Z", "finished_at": None, "n_total_trials": 2}
    (job / "result.json").write_bytes(orjson.dumps(running | {"stats": {}}))
    finish(write_trial(job, "task-a__AAAAAAA"))

    watcher = Watcher(env, jobs)
    watcher.wait_for("imported", "task-a__AAAAAAA")
    assert rows(db, "select t.name, j.name from trials_trial t join trials_job j on j.id = t.job_id") == [
        ("task-a__AAAAAAA", "watched-job")
    ]

    second = write_trial(job, "task-b__BBBBBBB")  # its result.json has no finished_at yet: still running
    running_result = (second / "result.json").read_bytes()
    time.sleep(2)
    (second / "result.json").write_bytes(orjson.dumps(orjson.loads(running_result) | {"finished_at": "x"})[:60])
    time.sleep(2)  # half-written: not JSON yet
    assert rows(db, "select count(*) from trials_trial") == [(1,)]
    (second / "result.json").write_bytes(running_result)
    finish(second)
    watcher.wait_for("imported", "task-b__BBBBBBB")
    (job / "result.json").write_bytes(orjson.dumps(running | {"finished_at": "2026-11-26T02:00:00Z", "stats": {}}))
    watcher.wait_for("harbor-job", "watched-job")
    assert rows(db, "select name, finished_at is not null from trials_job") == [("watched-job", 1)]
    assert watcher.stop() == 0

    imports = rows(db, "select count(*) from trials_import")
    again = Watcher(env, jobs)  # a restart: everything is imported already
    again.wait_for("watching")
    time.sleep(2)
    assert again.stop() == 0
    assert rows(db, "select count(*) from trials_import") == imports
    assert rows(db, "select name from trials_trial order by name") == [("task-a__AAAAAAA",), ("task-b__BBBBBBB",)]


def test_a_job_copied_in_trial_by_trial_with_its_result_last_stays_the_job_imported_before(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1", "IMPORTS_IN_THREAD": "0"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    db = tmp_path / "data" / "benchviewer.sqlite3"
    source = write_job(tmp_path / "source", "copied-job", role="baseline", configuration_id="c", agent="a", model="m",
                       tasks=2, attempts=2, steps_per_trial=4, with_extras=False)  # fmt: skip
    first, *others = sorted(p for p in source.iterdir() if p.is_dir())
    job = tmp_path / "jobs" / "copied-job"
    job.mkdir(parents=True)
    shutil.copytree(first, job / first.name)
    shutil.copy(source / "config.json", job)
    earlier = [sys.executable, "manage.py", "import_packs", str(job), "--no-progress"]
    subprocess.run(earlier, cwd=REPO, env=env, check=True, capture_output=True)
    [(job_id,)] = rows(db, "select id from trials_job")

    watcher = Watcher(env, tmp_path / "jobs")
    watcher.wait_for("watching")
    for trial in others:
        shutil.copytree(trial, job / trial.name)
        watcher.wait_for("imported", trial.name)
    shutil.copy(source / "result.json", job)
    line = watcher.wait_for("harbor-job", "copied-job")
    assert watcher.stop() == 0
    assert "already imported" not in line and "1 job result applied" in line
    result = orjson.loads((source / "result.json").read_bytes())
    assert rows(db, "select id, key, started_at is not null from trials_job") == [
        (job_id, f"harbor:{result['id']}", True)  # its start comes from its result.json
    ]
    [(stored,)] = rows(db, "select result from trials_job")
    assert orjson.loads(stored) == result  # its stats and its finish as written
    assert rows(db, "select count(*), count(distinct job_id), min(job_id) from trials_trial") == [(4, 1, job_id)]
