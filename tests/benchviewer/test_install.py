"""Benchviewer installed as a user installs it: a wheel built from the repository, put in a fresh
virtualenv outside it, and `benchviewer view` on a copy of a shared Harbor job and Inspect log,
followed in Chromium through the link it prints.

Offline: the wheel is built with `--no-build-isolation` and installed with `--no-deps`; its
dependencies come from this suite's own site-packages through a .pth file written after the
install (so pip never sees, nor touches, the checkout's editable install). The virtualenv has no
system site-packages, and the command runs outside the repository: the package, its templates,
static files and migrations come from the wheel alone.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.builders import REFERENCE, REPO

pytestmark = [
    pytest.mark.browser,
    pytest.mark.sqlite_only("builds and installs the package: its embedded default is SQLite in a home folder"),
]
expect.set_options(timeout=30_000)  # CI runs two test processes on two cores

JOB = REFERENCE / "harbor" / "job-thinharness" / "job"
INSPECT_LOG = REFERENCE / "inspect" / "2025-05-12T20-28-26-04-00_security-guide.json"
LINK = re.compile(r"(http://127\.0\.0\.1:(\d+)/)accounts/once/\S+/")
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "data", "build", "*.egg-info", "__pycache__", ".*_cache")
WAIT = 300  # seconds: the most any one printed line is waited for (a first run migrates the data folder)


def run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, check=True, **kwargs)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtualenv holding the wheel built from the repository's files, and nothing of the clone."""
    work = tmp_path_factory.mktemp("install")
    source = work / "source"  # a copy: no build/ left by an earlier build goes into the wheel
    shutil.copytree(REPO, source, ignore=NOT_COPIED)
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", work / "dist", source)
    (wheel,) = (work / "dist").glob("benchviewer-*.whl")
    env = work / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", env)
    run(sys.executable, "-m", "pip", "--python", env / "bin" / "python", "install", "-q", "--no-deps", wheel)
    site = Path(
        run(env / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    )
    (site / "benchviewer-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return env


def test_the_wheel_is_what_runs(venv, tmp_path):
    where = run(venv / "bin" / "python", "-c", "import benchviewer, core, trials, shares; from benchviewer import "
                "settings; print(benchviewer.__file__, trials.__file__, shares.__file__, core.__file__, "
                "*settings.TEMPLATES[0]['DIRS'], "
                "*settings.STATICFILES_DIRS)", cwd=tmp_path, env=user_env(tmp_path)).stdout.split()  # fmt: skip
    assert all(path.startswith(str(venv)) for path in where), where
    installed = Path(where[0]).parent
    for bundled in ("static/plotly/plotly-benchviewer.min.js", "static/asciinema/asciinema-player.min.js",
                    "templates/base.html"):  # fmt: skip
        assert (installed / bundled).read_bytes() == (REPO / bundled).read_bytes(), bundled
    assert (Path(where[1]).parent / "migrations" / "0001_initial.py").is_file()
    schema = "sqlite_schema.sql"  # what a new data folder is made from
    assert (Path(where[3]).parent / schema).read_bytes() == (REPO / "core" / schema).read_bytes()


def user_env(home: Path) -> dict[str, str]:
    """A person's environment: their own home, none of this suite's settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DATA_DIR", "PYTHONPATH",
           "DJANGO_SETTINGS_MODULE", "TEST_SQLITE_PATH", "BENCHVIEWER_HOME", "XDG_DATA_HOME")}  # fmt: skip
    return env | {"HOME": str(home), "PYTHONUNBUFFERED": "1"}


class Output:
    """The lines a process prints (stdout and stderr), waited for one pattern at a time."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: str | re.Pattern) -> re.Match:
        while True:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(f"{pattern!r} not printed in {WAIT} s:\n{''.join(self.seen)}") from None
            if line is None:
                raise AssertionError(f"the process ended before printing {pattern!r}:\n{''.join(self.seen)}")
            self.seen.append(line)
            if found := re.search(pattern, line):
                return found


@pytest.fixture
def viewing(venv, tmp_path) -> Iterator[tuple[subprocess.Popen, Output, Path, Path]]:
    """`benchviewer view` on copies of a shared Harbor job and Inspect log, in a temporary home."""
    home, runs = tmp_path / "home", tmp_path / "runs"
    home.mkdir()
    shutil.copytree(JOB, runs / "job")
    shutil.copy(INSPECT_LOG, runs)
    process = subprocess.Popen(
        [venv / "bin" / "benchviewer", "view", runs / "job", runs / INSPECT_LOG.name, "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=user_env(home),
        start_new_session=True,  # so the test's own Ctrl-C does not reach it; the test sends its own
    )  # fmt: skip
    try:
        yield process, Output(process), home, runs
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_benchviewer_view_opens_a_folder_follows_it_and_stops_cleanly(viewing, browser, venv, tmp_path):
    process, output, home, runs = viewing
    link = output.wait_for(LINK)
    address, port = link.group(1), int(link.group(2))
    data = home / ".local" / "share" / "benchviewer"  # the platform's user data folder, under this home
    assert (data / "benchviewer.sqlite3").is_file()

    second = subprocess.run([venv / "bin" / "benchviewer", "view", runs / "job", "--no-browser"], capture_output=True,
                            text=True, cwd=tmp_path, env=user_env(home))  # fmt: skip
    assert second.returncode == 1
    assert "already running" in second.stderr and address in second.stderr, second.stderr

    samples = json.loads(INSPECT_LOG.read_text())["samples"]
    trial_names = [json.loads((runs / "job" / name / "result.json").read_text())["trial_name"]
                   for name in os.listdir(runs / "job") if (runs / "job" / name).is_dir()]  # fmt: skip
    output.wait_for(rf"imported\s+inspect\s+{re.escape(INSPECT_LOG.name)}")

    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(link.group(0))
    expect(page.locator("h1")).to_have_text("Dashboard")  # signed in
    page.goto(f"{address}trials/")
    expect(page.locator("a.trial-link")).to_have_count(len(samples) + len(trial_names))
    for name in trial_names:
        expect(page.locator("a.trial-link", has_text=name)).to_have_count(1)
    first = samples[0]
    page.locator("a.trial-link", has_text=f"{first['id']}_epoch_{first['epoch']}").click()
    prompt = first["input"] if isinstance(first["input"], str) else first["input"][0]["content"]
    opening = prompt.strip().splitlines()[0]  # step 1 is the sample's input (its system prompt is no step)
    expect(page.locator("#step-1")).to_contain_text(opening)

    stranger = browser.new_context().new_page()  # the link worked once
    assert stranger.goto(link.group(0)).status == 404

    staged = tmp_path / "staged" / "configure-git-webserver__Dropped1"  # written apart, then moved in whole
    shutil.copytree(runs / "job" / trial_names[0], staged)
    result = json.loads((staged / "result.json").read_text())
    result |= {"id": "00000000-0000-4000-8000-000000000001", "trial_name": staged.name}
    (staged / "result.json").write_text(json.dumps(result))
    staged.rename(runs / "job" / staged.name)
    output.wait_for(rf"imported\s+harbor-trial\s+{staged.name}")
    page.goto(f"{address}trials/")
    expect(page.locator("a.trial-link", has_text=staged.name)).to_have_count(1)

    process.send_signal(signal.SIGINT)
    output.wait_for(r"^stopped$")
    assert process.wait(timeout=WAIT) == 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert not running_from(venv), "a process of the installed benchviewer is still running"


def running_from(venv: Path) -> list[str]:
    """The command lines of live processes started from the virtualenv."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile, or not a process
            continue
        if proc.name.isdigit() and str(venv) in cmdline:
            found.append(cmdline)
    return found
