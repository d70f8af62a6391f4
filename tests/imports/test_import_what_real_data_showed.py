"""What real data showed was wrong: each file now shows what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import import_path
from trials.models import Job, Trial

pytestmark = pytest.mark.django_db


def competitor_smoke() -> dict:
    """An OpenChrome foundation envelope in the shape of its competitor-smoke.json: per-library rows."""
    row = {"mode": "dom-stub", "taskContract": "tabs_create/read_page/tabs_close", "durationMs": 164, "failure": ""}
    skip = "live competitor omitted; pass --include-live with required runtime/credentials"
    return {
        "axis": "foundation",
        "schemaVersion": "1.0.0",
        "environment": {"capturedAt": "2026-05-17T16:26:02.366Z", "gitSha": "542ab43f"},
        "competitors": [{"name": "OpenChrome", "version": "1.12.4"}, {"name": "Playwright", "version": "1.60.0"}],
        "results": [
            {**row, "library": "OpenChrome", "status": "passed", "skipCategory": "none", "skipReason": ""},
            {**row, "library": "Playwright", "status": "skipped", "skipCategory": "not_requested", "skipReason": skip},
            {**row, "library": "Crawlee", "status": "failed", "skipCategory": "none", "failure": "timeout after 30s"},
            {"library": "Puppeteer", "p50Ms": 812},  # a measurement row of another shape: stays a row
        ],
    }


def test_an_openchrome_envelopes_per_library_rows_are_trials_and_its_other_rows_are_shown(tmp_path, client_logged_in):
    path = tmp_path / "competitor-smoke.json"
    path.write_text(json.dumps(competitor_smoke()))
    import_path(path)
    job = Job.objects.get()
    trials = {t.configuration.key: t for t in Trial.objects.filter(job=job)}
    assert {k: (t.status, t.reward) for k, t in trials.items()} == {
        "OpenChrome": ("passed", 1.0),
        "Playwright": ("skipped", None),
        "Crawlee": ("failed", 0.0),
    }
    assert trials["Playwright"].provenance["skipReason"].startswith("live competitor omitted")
    assert trials["Crawlee"].exception_message == "timeout after 30s"
    assert trials["OpenChrome"].configuration.agent_version == "1.12.4"
    assert trials["OpenChrome"].task.name == "tabs_create/read_page/tabs_close"
    page = client_logged_in.get(job.get_absolute_url()).content.decode()
    assert "3 trials" in page and "No tasks." not in page
    assert 'id="kept-rows"' in page and "p50Ms" in page
    playwright = client_logged_in.get(trials["Playwright"].get_absolute_url()).content.decode()
    assert "live competitor omitted" in playwright


def agentv_run(folder: Path) -> Path:
    """An AgentV run bundle: one ok sample, one errored sample whose reason is only in its stderr.txt."""
    rows = [
        {"test_id": "t-ok", "target": "claude", "score": 1.0, "execution_status": "ok", "result_dir": "t-ok",
         "sample_index": 0},
        {"test_id": "t-err", "target": "claude", "score": 0.0, "execution_status": "execution_error",
         "result_dir": "t-err", "sample_index": 0, "stderr_path": "t-err/sample-0/stderr.txt"},
    ]  # fmt: skip
    (folder / ".internal").mkdir(parents=True)
    (folder / ".internal" / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "summary.json").write_text(json.dumps({"run_id": "run-1", "metadata": {"experiment": "exp"}}))
    (folder / "t-err" / "sample-0").mkdir(parents=True)
    (folder / "t-err" / "sample-0" / "stderr.txt").write_text(
        'Traceback (most recent call last):\n  File "agent.py", line 3\nProviderError: 529 overloaded\n'
    )
    (folder / "t-err" / "sample-0" / "target-execution.json").write_text(
        json.dumps({"exit_code": 1, "error_kind": "provider_error"})
    )
    (folder / "t-ok" / "sample-0").mkdir(parents=True)
    (folder / "t-ok" / "sample-0" / "stdout.txt").write_text("all good\n")
    return folder


def test_an_errored_agentv_sample_shows_the_reason_its_stderr_holds(tmp_path, client_logged_in):
    import_path(agentv_run(tmp_path / "run-1"))
    errored = Trial.objects.get(name="t-err")
    assert errored.status == "errored" and errored.exception_type == "provider_error"
    assert errored.exception_message == "ProviderError: 529 overloaded"
    assert errored.documents["target_execution"]["exit_code"] == 1
    exception = client_logged_in.get(f"{errored.get_absolute_url()}?tab=exception").content.decode()
    assert "No exception" not in exception and "ProviderError: 529 overloaded" in exception
    logs = client_logged_in.get(f"{errored.get_absolute_url()}?tab=logs").content.decode()
    assert "stderr.txt" in logs and "Traceback (most recent call last)" in logs
    ok = Trial.objects.get(name="t-ok")
    assert ok.texts == {"stdout.txt": "all good\n"} and ok.exception_message == ""


def test_a_row_path_out_of_the_run_folder_is_not_read(tmp_path):
    folder = agentv_run(tmp_path / "run-1")
    (tmp_path / "secret.txt").write_text("do not read")
    index = folder / ".internal" / "index.jsonl"
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    rows[1]["stderr_path"] = "../secret.txt"
    index.write_text("".join(json.dumps(r) + "\n" for r in rows))
    import_path(folder)
    assert "do not read" not in json.dumps(Trial.objects.get(name="t-err").texts)
