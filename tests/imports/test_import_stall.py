"""The embedded worker survives a hung import: one that makes no progress for IMPORT_STALL_TIMEOUT
is failed with that reason, and the import queued behind it runs."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.builders import HANG_GUARD, REFERENCE
from trials.ingest.formats import agentv
from trials.models import Import, Trial
from trials.queue import embedded_worker

pytestmark = pytest.mark.django_db(transaction=True)  # the import thread has its own connection

PACK = REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json"
ROWS = REFERENCE / "agentv" / "camel-replay-index.jsonl"


def finished(client, import_id: str) -> dict:
    """The import as the API shows it, once done or failed."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        body = client.get(f"/api/imports/{import_id}/").json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.05)
    raise AssertionError(f"import {import_id} still {body['status']}")


def upload(client, name: str, path) -> str:
    response = client.post("/api/imports/", {"file": SimpleUploadedFile(name, path.read_bytes())})
    assert response.status_code == 202
    return response.json()["id"]


def test_an_import_with_no_progress_is_failed_with_why_and_the_next_queued_one_runs(
    settings, monkeypatch, client_logged_in
):
    settings.IMPORTS_IN_THREAD = True
    settings.IMPORT_STALL_TIMEOUT = 1
    release, hung_in = threading.Event(), []
    real_parse = agentv.parse_rows

    def hangs(*args, **kwargs):  # a parser that hangs (the fault), then answers when let go
        hung_in.append(threading.current_thread())
        release.wait(HANG_GUARD)
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(agentv, "parse_rows", hangs)
    gate = threading.Event()
    try:
        hung = upload(client_logged_in, "hung.jsonl", ROWS)
        # Next in the worker's queue: a gate, so the import behind it runs under the default timeout.
        embedded_worker().submit(gate.wait, HANG_GUARD)
        after = upload(client_logged_in, "next.json", PACK)

        body = finished(client_logged_in, hung)
        assert body["status"] == "failed"
        assert "import failed: no progress for 1 s" in [p["message"] for p in body["problems"]]
        assert Import.objects.get(pk=after).status == Import.Status.QUEUED

        settings.IMPORT_STALL_TIMEOUT = 600
        gate.set()
        body = finished(client_logged_in, after)
        assert body["status"] == "done", body["problems"]
        assert Trial.objects.get().name == "trial-tool-approval-candidate-1"
    finally:
        gate.set()
        release.set()
        for thread in hung_in:  # the hung run ends, its parse answered; it writes nothing after the verdict
            thread.join(HANG_GUARD)
    assert len(hung_in) == 1
    assert Trial.objects.get().name == "trial-tool-approval-candidate-1"  # none of the rows it parsed
    assert Import.objects.get(pk=hung).status == Import.Status.FAILED
    assert "import failed: no progress for 1 s" in [p["message"] for p in Import.objects.get(pk=hung).problems]
