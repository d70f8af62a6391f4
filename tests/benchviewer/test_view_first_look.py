"""`manage.py view` on a Harbor job: a trial is on the list while the rest of the job still imports.

The command runs as its user runs it (its own process, its own data folder, the printed sign-in
link followed); the test reads the trial list and the imports through the API the pages read,
and waits for states, never for a time: first a trial listed while the job's import is not done,
then every trial of the job listed with every import done.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from trials.demo import write_job

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(http://127\.0\.0\.1:\d+/)accounts/once/\S+/")
WAIT = 300  # seconds: the most one state is waited for (CI runs two test processes on two cores)


def lines_of(process: subprocess.Popen) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


@pytest.fixture
def viewing(tmp_path) -> Iterator[tuple[subprocess.Popen, queue.Queue[str], Path]]:
    job = write_job(tmp_path / "jobs", "first-look", role="baseline", configuration_id="first-look", agent="agent",
                    model="model", tasks=45, attempts=2, steps_per_trial=20, with_extras=False)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "TEST_SQLITE_PATH")}
    env |= {"DATA_DIR": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "view", str(job), "--no-browser", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        yield process, lines_of(process), job
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_a_trial_is_listed_while_the_rest_of_its_job_still_imports(viewing):
    process, lines, job = viewing
    trials_in_job = sum(1 for folder in job.iterdir() if (folder / "result.json").is_file() and folder.is_dir())
    seen = []
    while not (found := LINK.search(line := lines.get(timeout=WAIT))):
        seen.append(line)
    link, address = found.group(0), found.group(1)
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    browser.open(link, timeout=WAIT)  # signed in (the session cookie kept)

    def state() -> tuple[int, dict[str, str]]:
        """The trials listed, and each import's status by the path it imports."""
        listed = json.load(browser.open(f"{address}api/trials/", timeout=WAIT))["count"]
        imports = json.load(browser.open(f"{address}api/imports/", timeout=WAIT))
        return listed, {imp["source_name"]: imp["status"] for imp in imports.get("results", imports)}

    listed, imports = state()
    while not listed:  # until a trial is listed (a poll each 50 ms: the import gives way to each)
        assert process.poll() is None, "the view stopped"
        time.sleep(0.05)
        listed, imports = state()
    assert listed < trials_in_job
    assert imports.get(str(job)) != "done", imports  # the job's own import: not begun, or still running
    while not (listed == trials_in_job and imports.get(str(job)) == "done"):
        assert process.poll() is None, "the view stopped"
        time.sleep(0.05)
        listed, imports = state()
    assert set(imports.values()) == {"done"}, imports  # its first trial alone, then the job whole


@pytest.mark.django_db
@pytest.mark.parametrize(("asked", "landed"), [("/trials/", "/trials/"), ("https://elsewhere.example/", "/"),
                                               ("//elsewhere.example/trials/", "/")])  # fmt: skip
def test_the_link_view_opens_lands_on_the_trial_list_and_nowhere_else(client, django_user_model, asked, landed):
    from core import signin_link

    user = django_user_model.objects.create_user("someone")
    response = client.get(f"/accounts/once/{signin_link.issue(user.pk)}/", {"next": asked})
    assert response.status_code == 302 and response["Location"] == landed
    assert client.get("/trials/").status_code == 200  # signed in
