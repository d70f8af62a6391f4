"""The embedded default (no REDIS_URL): an upload answers at once, and a thread of the web
process runs the import, the way a worker would."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from core import locks
from tests.builders import HANG_GUARD, REFERENCE
from trials.imports import recovery
from trials.imports.blobs import store_file
from trials.models import Import, Trial
from trials.queue import create_import, embedded_worker

pytestmark = pytest.mark.django_db(transaction=True)  # the import thread has its own connection

PACK = REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json"


def wait_until_finished(client, import_id: str, timeout: float = HANG_GUARD) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/api/imports/{import_id}/").json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.05)
    raise AssertionError(f"import {import_id} still {body['status']} after {timeout} s")


@pytest.fixture
def in_thread(settings):
    settings.IMPORTS_IN_THREAD = True


@pytest.fixture
def busy_worker():
    """Keep the import thread busy, so what the request answers cannot depend on timing."""
    gate = threading.Event()
    embedded_worker().submit(gate.wait, 30)
    yield gate
    gate.set()


def test_an_api_upload_answers_queued_and_the_thread_then_imports_it(in_thread, busy_worker, client_logged_in):
    response = client_logged_in.post("/api/imports/", {"file": SimpleUploadedFile("pack.json", PACK.read_bytes())})
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert not Trial.objects.exists()

    busy_worker.set()
    body = wait_until_finished(client_logged_in, response.json()["id"])
    assert body["status"] == "done", body["problems"]
    assert body["progress"] == 1.0
    assert Trial.objects.get().name == "trial-tool-approval-candidate-1"
    embedded_worker().submit(lambda: None).result(timeout=HANG_GUARD)  # the thread's queue is drained
    assert Trial.objects.get().step_text_indexed  # the follow-up indexing ran in the same thread


def test_the_upload_page_redirects_at_once_and_its_imports_run_in_turn(in_thread, busy_worker, client_logged_in):
    files = [
        SimpleUploadedFile("a.jsonl", (REFERENCE / "agentv" / "camel-replay-index.jsonl").read_bytes()),
        SimpleUploadedFile("b.json", PACK.read_bytes()),
    ]
    response = client_logged_in.post("/imports/", {"files": files})
    assert response.status_code == 302
    assert set(Import.objects.values_list("status", flat=True)) == {"queued"}

    busy_worker.set()
    for imp in Import.objects.all():
        assert wait_until_finished(client_logged_in, str(imp.pk))["status"] == "done"
    assert Trial.objects.filter(name="trial-tool-approval-candidate-1").exists()


def test_a_new_server_process_runs_the_imports_a_previous_one_left_queued(in_thread, client_logged_in, tmp_path):
    pack = tmp_path / "pack.json"
    pack.write_bytes(PACK.read_bytes())
    left = create_import(origin=Import.Origin.UPLOAD, source_name="pack.json", upload=store_file(pack))
    Import.objects.filter(pk=left.pk).update(created_at=timezone.now() - timedelta(minutes=10))

    embedded_worker.cache_clear()  # as in a new process: no import thread yet
    client_logged_in.get("/")  # its first request starts the thread, which looks for stranded imports
    assert wait_until_finished(client_logged_in, str(left.pk))["status"] == "done"
    assert Trial.objects.get().name == "trial-tool-approval-candidate-1"


@pytest.mark.sqlite_only("on SQLite a running import holds a lock file; on PostgreSQL an advisory lock (faults/)")
def test_a_new_server_process_runs_the_import_a_killed_one_left_running(settings, client_logged_in, tmp_path):
    pack = tmp_path / "pack.json"
    pack.write_bytes(PACK.read_bytes())
    left = create_import(origin=Import.Origin.UPLOAD, source_name="pack.json", upload=store_file(pack))
    Import.objects.filter(pk=left.pk).update(status=Import.Status.RUNNING, started_at=timezone.now())
    lock = locks.lock_path(str(left.pk))
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(  # the process running it: holds its lock until it is killed
        [sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert [s.import_id for s in recovery.stale_imports()] == []  # its process is alive: not stranded
        assert client_logged_in.get(f"/api/imports/{left.pk}/").json()["worker_gone"] is False
    finally:
        holder.kill()
        holder.wait()
    assert [(s.import_id, s.reason) for s in recovery.stale_imports()] == [
        (str(left.pk), "running, but no worker holds it")
    ]
    assert client_logged_in.get(f"/api/imports/{left.pk}/").json()["worker_gone"] is True
    page = client_logged_in.get(f"/imports/{left.pk}/").content.decode()
    assert '<p class="message warning" id="import-worker-gone">No worker is working on this import' in page

    # A new server process: its first request starts the thread. (Before, no thread: one started while
    # the killed process still held the lock would find nothing stranded, or race the kill.)
    settings.IMPORTS_IN_THREAD = True
    embedded_worker.cache_clear()
    client_logged_in.get("/")
    assert wait_until_finished(client_logged_in, str(left.pk))["status"] == "done"
    assert not lock.exists()  # the lock file goes with the import that held it last


HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""
