"""Imports through the real broker: Redis on 127.0.0.1 and a separate `celery worker` process."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import redis
from django.db import connection

from core import roles
from tests.builders import HANG_GUARD, TEST_REDIS_URL, database_url, on_broker, running_worker, write_trial
from tests.hostile_corpus import cases
from tests.imports.watch_helpers import Watcher, finish
from trials.models import Import, Step, Trial

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

REDIS_URL = TEST_REDIS_URL


@pytest.fixture
def worker(isolated_storage: Path):
    with running_worker(isolated_storage) as process:
        yield process


def wait_for(imp: Import, timeout: float = HANG_GUARD) -> Import:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        imp.refresh_from_db()
        if imp.status in (Import.Status.DONE, Import.Status.FAILED):
            return imp
        time.sleep(0.2)
    raise AssertionError(f"import still {imp.status} after {timeout}s")


def test_an_upload_is_imported_by_a_separate_worker_through_redis(worker, tmp_path, client, django_user_model):
    uploader = django_user_model.objects.create_user("uploader")
    roles.add_to_group(uploader, roles.REVIEWER)
    client.force_login(uploader)
    trial = write_trial(tmp_path / "src")
    archive = tmp_path / "trial.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(trial.parent), trial.name], check=True)
    with open(archive, "rb") as f:
        response = client.post("/api/imports/", {"file": f})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued"  # returned at once: the worker does the work
    imp = wait_for(Import.objects.get(pk=body["id"]))
    assert imp.status == "done", (imp.problems, (tmp_path / "worker.log").read_text()[-2000:])
    assert Trial.objects.get().name == trial.name
    assert Step.objects.count() == 2
    # The import's follow-up task, also through Redis, puts the steps into the search index.
    deadline = time.monotonic() + 30
    while not Trial.objects.get().step_text_indexed and time.monotonic() < deadline:
        time.sleep(0.2)
    assert Trial.objects.get().step_text_indexed
    assert worker.poll() is None  # still serving


def test_the_worker_survives_hostile_packs_and_serves_the_next_one(worker, tmp_path, client, django_user_model):
    uploader = django_user_model.objects.create_user("uploader")
    roles.add_to_group(uploader, roles.REVIEWER)
    client.force_login(uploader)
    hostile = dict(cases())
    names = [
        "truncated-trajectory-12",
        "nested-50000",
        "zip-bomb-ratio",
        "tar-traversal",
        "tar-chardev",
        "truncated-zip",
        "100k-tool-calls",
        "result-agent_info-2",
        "invalid-utf8-value-0",
        "binary-file",
    ]
    imports = []
    for name in names:
        folder = tmp_path / name
        folder.mkdir()
        path = hostile[name](folder)
        if path.is_dir():  # a trial folder: upload it as an archive, as a user would
            archive = tmp_path / f"{name}.tar.gz"
            subprocess.run(["tar", "-czf", str(archive), "-C", str(path.parent), path.name], check=True)
            path = archive
        with open(path, "rb") as f:
            imports.append(client.post("/api/imports/", {"file": f}).json()["id"])
    good = write_trial(tmp_path / "good")
    archive = tmp_path / "good.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(good.parent), good.name], check=True)
    with open(archive, "rb") as f:
        last = client.post("/api/imports/", {"file": f}).json()["id"]
    for import_id in imports:
        imp = wait_for(Import.objects.get(pk=import_id))
        assert imp.status == "done", (imp.source_name, imp.problems)
    assert wait_for(Import.objects.get(pk=last)).status == "done"
    assert Trial.objects.filter(name=good.name).exists()
    assert worker.poll() is None  # the same worker process served every one


def test_a_starting_worker_resumes_an_import_a_dead_worker_left_running_without_beat(isolated_storage, tmp_path):
    trial = write_trial(tmp_path / "src")
    imp = Import.objects.create(
        origin=Import.Origin.CLI, source_name=trial.name, source_path=str(trial), status=Import.Status.RUNNING
    )  # as a worker killed mid-import leaves it: running, its lock released with its process
    with running_worker(isolated_storage):  # no beat: the worker's own start-up sweep finds it
        imp = wait_for(imp)
    assert imp.status == Import.Status.DONE
    assert Trial.objects.get().name == trial.name


def test_the_command_line_says_when_no_worker_takes_its_import_and_finishes_once_one_starts(
    isolated_storage, tmp_path, monkeypatch, settings
):
    import io
    import threading

    from django.core.management import call_command

    from trials.management.commands.import_packs import Command

    monkeypatch.setattr(Command, "queued_hint_seconds", 0.5)
    settings.CELERY_TASK_ALWAYS_EAGER = False  # as with REDIS_URL set: the command waits for a worker
    trial = write_trial(tmp_path / "src")
    server = redis.Redis.from_url(REDIS_URL)
    server.flushdb()  # no message from an earlier test
    out, err = io.StringIO(), io.StringIO()

    def run_command() -> None:
        try:
            call_command("import_packs", str(trial), "--no-progress", stdout=out, stderr=err)
        finally:
            connection.close()  # the thread's own: left open, it would keep the test database from being dropped

    command = threading.Thread(target=run_command)
    with on_broker(broker_url=REDIS_URL, task_always_eager=False):
        command.start()
        deadline = time.monotonic() + HANG_GUARD  # only a broken build waits this long
        while "no Celery worker answered" not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "still queued: no Celery worker answered" in err.getvalue()
        assert command.is_alive()  # it waits for a worker, rather than giving up
    with running_worker(isolated_storage, flush=False):  # the message the command sent is waiting
        command.join(timeout=HANG_GUARD)
    assert not command.is_alive() and "imported" in out.getvalue()
    assert Trial.objects.get().name == trial.name


def test_a_watched_jobs_folder_is_queued_to_the_worker_through_redis_trial_by_trial(isolated_storage, tmp_path):
    job = tmp_path / "jobs" / "watched-job"
    job.mkdir(parents=True)
    finish(write_trial(job, "task-a__AAAAAAA"))
    env = {**os.environ, "REDIS_URL": REDIS_URL, "DATABASE_URL": database_url(), "DATA_DIR": str(isolated_storage),
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    with running_worker(isolated_storage):
        watcher = Watcher(env, job.parent)
        try:
            watcher.wait_for("imported", "task-a__AAAAAAA", timeout=HANG_GUARD)
            finish(write_trial(tmp_path / "elsewhere", "task-b__BBBBBBB"))
            # moved in whole while the watcher runs: one event, for the folder (none for its result.json)
            (tmp_path / "elsewhere" / "task-b__BBBBBBB").rename(job / "task-b__BBBBBBB")
            watcher.wait_for("imported", "task-b__BBBBBBB", timeout=HANG_GUARD)
        finally:
            assert watcher.stop() == 0
    log = (isolated_storage / "worker.log").read_text()
    assert log.count("import_pack_task") >= 2 and "succeeded" in log  # the worker imported them, not the watcher
    assert sorted(Trial.objects.values_list("name", flat=True)) == ["task-a__AAAAAAA", "task-b__BBBBBBB"]
    assert set(Import.objects.values_list("status", flat=True)) == {"done"}
