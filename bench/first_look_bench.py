"""A first look: from the command to the first trial's step 1 on screen, Benchviewer beside its peers.

    .venv/bin/python bench/first_look_bench.py            # 1,000 Inspect samples; a Harbor job of 1,000 trials; 3 runs
    .venv/bin/python bench/first_look_bench.py --quick    # 20 samples, 10 trials, 1 run: a smoke run
    .venv/bin/python bench/first_look_bench.py --harbor /tmp/harbor-venv/bin/harbor

Each run starts the command (the clock starts), then does what its user does in one headless
Chromium (launched beforehand, a fresh context per run): for `benchviewer view`, follow the
printed sign-in link, then open the trial list (again, until a trial is in it) and its first
trial, until that trial's step 1 is on screen; for `inspect view --log-dir` (inspect_ai, a dev
dependency), open its page once the server answers and click the first sample, until its
transcript's first turn is on screen; for `harbor view` (Harbor's own CLI, Python >= 3.12, in a
virtualenv of its own: `--harbor`), open the job, then its first trial, until step #1 of its
trajectory is on screen. The tools run in turns, `--runs` rounds (medians; each run in brackets).

Benchviewer runs twice a round: on a data folder already migrated (a copy of the bench's
template: a second folder opened by someone who has used it before) and on an empty one
(the very first `benchviewer view`, which migrates it). The Inspect log is written by
inspect_ai with its mockllm model (bench/inspect_bench.py), the Harbor job by trials.demo;
Harbor 0.26 refuses a trial config naming its task by both path and name, as the demo writes
it, so the job's copy drops the name (both tools then read the same files).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from browser import CHROMIUM, CHROMIUM_ARGS, wait_until_up  # bench/: this folder is on sys.path
from database import copy_migrated_sqlite, environment
from inspect_bench import many_samples, template

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
LINK = re.compile(r"http://127\.0\.0\.1:\d+/accounts/once/\S+/")
TIMEOUT_MS = 120_000


def write_inspect_log(folder: Path, samples: int) -> tuple[Path, str]:
    """A folder holding one `.eval` log of `samples` samples; the id of the sample Inspect lists first."""
    logs = folder / "logs"
    logs.mkdir(parents=True)
    many_samples(template(folder / "template"), samples, logs / f"samples-{samples}.eval")
    return logs, "add-0"


def write_harbor_job(folder: Path, trials: int) -> Path:
    """A jobs folder holding one job of `trials` trials, its task named by path alone (see above)."""
    from trials.demo import write_job

    jobs = folder / "jobs"
    job = write_job(jobs, "job-first-look", role="baseline", configuration_id="bench", agent="bench-agent",
                    model="bench-model", tasks=max(trials // 2, 1), attempts=2, with_extras=False)  # fmt: skip
    for trial in job.iterdir():
        for name, config in (("config.json", lambda d: d), ("result.json", lambda d: d.get("config", {}))):
            path = trial / name
            if trial.is_dir() and path.is_file():
                data = json.loads(path.read_text())
                config(data).get("task", {}).pop("name", None)
                path.write_text(json.dumps(data, indent=2))
    return jobs


class Lines:
    """A child's output, line by line, read on a thread; `wait` for the first line matching a pattern."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        threading.Thread(target=self.read, args=(process.stdout,), daemon=True).start()

    def read(self, stream) -> None:
        for line in stream:
            self.lines.put(line)

    def wait(self, pattern: re.Pattern, seconds: float = 120) -> re.Match:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            if found := pattern.search(line):
                return found
        raise SystemExit(f"no line matched {pattern.pattern}; the output was:\n{''.join(self.seen)}")


def started(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip


def stopped(process: subprocess.Popen) -> None:
    """The child and whatever it started, gone (each tool runs in a session of its own)."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def benchviewer(page, path: Path, home: Path, port: int) -> float:
    """Seconds from `benchviewer view PATH` to its first trial's step 1 on screen."""
    env = {**environment(home), "BENCHVIEWER_HOME": str(home)}
    command = [str(VENV_BIN / "benchviewer"), "view", str(path), "--port", str(port), "--no-browser", "--no-progress"]
    start = time.perf_counter()
    process = started(command, env)
    try:
        link = Lines(process).wait(LINK).group(0)
        phases = [f"link {time.perf_counter() - start:.2f}"]
        page.goto(f"{link}?next=/trials/")  # as the browser `view` opens goes
        trials = f"http://127.0.0.1:{port}/trials/"
        while True:  # what its user does until the import's first trial is in: reload the list
            if page.url != trials:
                page.goto(trials)
            if page.locator("a.trial-link").count():
                break
            time.sleep(0.1)
            page.reload()
        phases.append(f"listed {time.perf_counter() - start:.2f}")
        page.locator("a.trial-link").first.click()
        page.locator("#step-1").wait_for(state="visible", timeout=TIMEOUT_MS)
        print(f"    ({', '.join(phases)})", flush=True)
        return time.perf_counter() - start
    finally:
        stopped(process)


def inspect_view(page, logs: Path, first_sample: str, port: int) -> float:
    """Seconds from `inspect view --log-dir LOGS` to its first sample's first turn on screen."""
    command = [str(VENV_BIN / "inspect"), "view", "--log-dir", str(logs), "--port", str(port)]
    start = time.perf_counter()
    process = started(command, dict(os.environ))
    try:
        wait_until_up(f"http://127.0.0.1:{port}/", seconds=120)
        page.goto(f"http://127.0.0.1:{port}/")
        page.get_by_text(first_sample, exact=True).first.click(timeout=TIMEOUT_MS)
        page.get_by_text(re.compile(r"^turn 1/")).first.wait_for(state="visible", timeout=TIMEOUT_MS)
        return time.perf_counter() - start
    finally:
        stopped(process)


def harbor_view(page, harbor: str, jobs: Path, port: int) -> float:
    """Seconds from `harbor view JOBS` to its first trial's step #1 on screen."""
    command = [harbor, "view", str(jobs), "--port", str(port)]
    start = time.perf_counter()
    process = started(command, dict(os.environ))
    try:
        wait_until_up(f"http://127.0.0.1:{port}/", seconds=120)
        page.goto(f"http://127.0.0.1:{port}/")
        page.get_by_text("job-first-look", exact=True).first.click(timeout=TIMEOUT_MS)
        page.locator("tbody tr", has_text="__").first.click(timeout=TIMEOUT_MS)
        page.get_by_text("#1", exact=True).first.wait_for(state="visible", timeout=TIMEOUT_MS)
        return time.perf_counter() - start
    finally:
        stopped(process)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def describe(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.2f} ({', '.join(f'{s:.2f}' for s in seconds)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--harbor", default=shutil.which("harbor") or "/tmp/harbor-venv/bin/harbor",
                        help="Harbor's CLI (pip install harbor, Python >= 3.12); left out if not there")  # fmt: skip
    parser.add_argument("--only", default="", help="only the cases whose name holds this text")
    parser.add_argument("--quick", action="store_true", help="20 samples, 10 trials, 1 run")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.trials, args.runs = 20, 10, 1
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchviewer.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()  # (trials.demo reads no database; it needs the app registry)

    harbor = args.harbor if Path(args.harbor).is_file() else None
    if harbor is None:
        print(f"harbor view left out: no Harbor CLI at {args.harbor} (--harbor)")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-first-look-") as tmp:
        folder = Path(tmp)
        logs, first_sample = write_inspect_log(folder / "inspect", args.samples)  # (before Playwright's event loop)
        jobs = write_harbor_job(folder / "harbor", args.trials)
        migrated = folder / "migrated-home"
        copy_migrated_sqlite(migrated / "benchviewer.sqlite3")
        measure_all(args, folder, logs, first_sample, jobs, migrated, harbor, results)
    print(f"\nseconds from the command to the first trial's step 1 on screen (median of {args.runs}; each run)")
    width = max(map(len, results))
    for name, seconds in results.items():
        print(f"{name:<{width}}  {describe(seconds)}")


def measure_all(args, folder: Path, logs: Path, first_sample: str, jobs: Path, migrated: Path, harbor: str | None,
                results: dict[str, list[float]]) -> None:  # fmt: skip
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        cases: list[tuple[str, Callable[..., float]]] = []
        for label, path in (
            (f"Inspect log, {args.samples} samples", logs),
            (f"Harbor job, {args.trials} trials", jobs),
        ):
            cases.append(
                (
                    f"{label}: benchviewer view (migrated home)",
                    lambda page, p=path: benchviewer(
                        page, p, home_copy(migrated, folder / f"home-{time.monotonic_ns()}"), free_port()
                    ),
                )
            )
            cases.append(
                (
                    f"{label}: benchviewer view (empty home)",
                    lambda page, p=path: benchviewer(page, p, folder / f"home-{time.monotonic_ns()}", free_port()),
                )
            )
            if path == logs:
                cases.append(
                    (
                        f"{label}: inspect view --log-dir",
                        lambda page: inspect_view(page, logs, first_sample, free_port()),
                    )
                )
            elif harbor:
                cases.append((f"{label}: harbor view", lambda page: harbor_view(page, harbor, jobs, free_port())))
        cases = [(name, run) for name, run in cases if args.only in name]
        for _ in range(args.runs):
            for name, run in cases:
                context = browser.new_context()
                try:
                    results.setdefault(name, []).append(run(context.new_page()))
                finally:
                    context.close()
                print(f"  {name}: {results[name][-1]:.2f} s", flush=True)
        browser.close()


def home_copy(migrated: Path, home: Path) -> Path:
    shutil.copytree(migrated, home)
    return home


if __name__ == "__main__":
    main()
