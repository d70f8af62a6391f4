"""A real runner process (benchviewer-push, a subprocess) streams a trial to a live server:
a browser watches the steps appear; a runner killed with SIGKILL leaves the trial stalled and
loses nothing, and a new runner on the same file continues it; a server that goes away and
comes back mid-stream gets every event once through the runner's retries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import urllib3
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import expect
from rest_framework.test import APIClient

from tests.builders import HANG_GUARD, write_trial
from tests.live.helpers import event, runner_client, spine, step
from trials.models import Import, RuntimeEvent, Step, Trial

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop in this thread
expect.set_options(timeout=20_000)


def lines(first: int, last: int) -> list[str]:
    """Steps first..last, each with a tool event after it: JSON lines as a runner writes them."""
    out = []
    for n in range(first, last + 1):
        out.append(json.dumps(step(n, "user" if n == 1 else "agent", f"live step {n}")))
        out.append(json.dumps(event(n, "tool.progress", done=n)))
    return out


def runner(server: str, token: str, path: Path, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "benchviewer_push", "--server", server, "--token", token, "--retries", "3",
               "stream", str(path), *extra]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def write_slowly(path: Path, rows: list[str], pause: float) -> None:
    with path.open("a") as f:
        for row in rows:
            f.write(row + "\n")
            f.flush()
            time.sleep(pause)


def wait_for(check, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def token(transactional_db) -> str:
    return runner_client()[1]


@pytest.fixture
def trial(token, live_server) -> Trial:
    """Started by the runner's own account: only it writes into the trial."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    pk = client.post("/api/commands/start_benchmark_trial/", spine("trial-streamed"), format="json").json()["trial_id"]
    return Trial.objects.get(pk=pk)


@pytest.mark.browser
def test_a_page_watches_the_steps_a_runner_streams_appear(browser, live_server, token, trial, tmp_path):
    viewer = get_user_model().objects.create_user("watcher", password="pw-watcher-1")
    client = Client()
    client.force_login(viewer)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"/trials/{trial.pk}/")
    expect(page.locator("#live-status")).to_have_text("running")

    feed = tmp_path / "trial.jsonl"
    feed.touch()
    process = runner(live_server.url, token, feed, "--trial", str(trial.pk), "--follow", "--idle-exit", "2",
                     "--complete", "completed")  # fmt: skip
    writer = threading.Thread(target=write_slowly, args=(feed, lines(1, 200), 0.005))
    writer.start()
    expect(page.locator("#live-steps tbody tr[data-step='100']")).to_be_visible()  # arriving, not all at once
    writer.join()
    assert process.wait(timeout=HANG_GUARD) == 0, process.stderr.read() if process.stderr else ""
    # completed: the page reloads and shows the finished trial with all its steps
    expect(page.locator("h1 .badge")).to_have_text("passed")
    assert Step.objects.filter(trial=trial).count() == 200
    assert errors == []
    context.close()


def test_a_killed_runner_leaves_the_trial_stalled_and_a_new_one_continues_it(
    live_server, token, trial, tmp_path, settings
):
    settings.LIVE_STALL_SECONDS = 1
    feed = tmp_path / "trial.jsonl"
    feed.touch()
    writer = threading.Thread(target=write_slowly, args=(feed, lines(1, 150), 0.01))  # the agent, still going
    writer.start()
    first = runner(live_server.url, token, feed, "--trial", str(trial.pk), "--follow", "--batch", "20")
    wait_for(lambda: Step.objects.filter(trial=trial).count() >= 40)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    writer.join()
    time.sleep(1.5)  # (a request the killed runner had sent may still land meanwhile)
    trial.refresh_from_db()
    assert trial.is_stalled and trial.status == "running"
    sent = Step.objects.filter(trial=trial).count()

    # a new runner starts over on the same file: what the first sent is kept once, the rest added
    second = runner(live_server.url, token, feed, "--trial", str(trial.pk), "--complete", "completed")
    assert second.wait(timeout=HANG_GUARD) == 0, second.stderr.read() if second.stderr else ""
    trial.refresh_from_db()
    assert not trial.is_stalled and trial.status == "passed"
    steps = list(Step.objects.filter(trial=trial).order_by("index").values_list("step_id", flat=True))
    assert sent < 150 and steps == [str(n) for n in range(1, 151)]  # nothing lost, nothing twice
    runtime = RuntimeEvent.objects.filter(trial=trial, type="tool.progress")
    assert runtime.count() == 150 and runtime.values("event_id").distinct().count() == 150


class Forward(BaseHTTPRequestHandler):
    """Passes each request on to the live server: a server the test can stop and start again."""

    target = ""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
        answer = urllib3.request(self.command, self.target + self.path, body=body, headers=headers, retries=False)
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(answer.data)))
        self.end_headers()
        self.wfile.write(answer.data)

    def log_message(self, *args):
        pass


def serve_forward(port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_runner_retries_through_a_server_restart_and_lands_every_event_once(live_server, token, trial, tmp_path):
    Forward.target = live_server.url
    front = serve_forward(0)
    port = front.server_address[1]
    feed = tmp_path / "trial.jsonl"
    feed.touch()
    writer = threading.Thread(target=write_slowly, args=(feed, lines(1, 100), 0.01))
    writer.start()
    process = runner(
        f"http://127.0.0.1:{port}",
        token,
        feed,
        "--trial",
        str(trial.pk),
        "--follow",
        "--idle-exit",
        "2",
        "--batch",
        "10",
        "--complete",
        "completed",
    )
    wait_for(lambda: Step.objects.filter(trial=trial).count() >= 20)
    front.shutdown()
    front.server_close()  # down: the runner's requests are refused, and retried with backoff
    time.sleep(1.5)
    front = serve_forward(port)  # back
    writer.join()
    try:
        _, stderr = process.communicate(timeout=HANG_GUARD)
    finally:
        front.shutdown()
        front.server_close()
    assert process.returncode == 0, stderr
    assert "Retrying" in stderr  # (urllib3's warning: a request was refused while the server was down)
    steps = list(Step.objects.filter(trial=trial).order_by("index").values_list("step_id", flat=True))
    assert steps == [str(n) for n in range(1, 101)]
    assert RuntimeEvent.objects.filter(trial=trial, type="tool.progress").count() == 100
    assert Trial.objects.get(pk=trial.pk).status == "passed"


def test_the_runner_uploads_a_finished_trial_folder_as_an_import(live_server, token, tmp_path):
    folder = write_trial(tmp_path / "jobs", "task-up__AAAAAAA")
    command = [
        sys.executable,
        "-m",
        "benchviewer_push",
        "--server",
        live_server.url,
        "--token",
        token,
        "upload",
        str(folder),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    imported = Import.objects.get(pk=json.loads(done.stdout)["id"])
    assert imported.origin == Import.Origin.API
    wait_for(lambda: Trial.objects.filter(name="task-up__AAAAAAA").exists())


def test_the_runner_names_the_lines_no_step_holds_and_sums_up_the_trial(live_server, token, trial, tmp_path):
    feed = tmp_path / "trial.jsonl"
    rows = [
        event(1, "turn.submitted", text="Fix it."),
        event(2, "user.message", text="a guess"),
        event(3, "model.completed", text="Fixed."),
    ]
    feed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    process = runner(live_server.url, token, feed, "--trial", str(trial.pk), "--complete", "completed")
    out, err = process.communicate(timeout=HANG_GUARD)
    assert process.returncode == 0, err
    assert "benchviewer-push: line 2: 'user.message' is not an event type" in err
    assert out.splitlines() == [
        f"trial {trial.pk}: passed, 2 steps, 5 events (1 placed in no step: see above)",  # (with start and completion)
        f"{live_server.url}/trials/{trial.pk}/",
    ]
