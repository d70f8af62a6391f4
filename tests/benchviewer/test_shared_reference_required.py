"""Without ../shared/reference the tests that read it fail, naming the path, instead of running fewer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.builders import REFERENCE, REPO


def run_pytest_with_shared_at(shared: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BENCHVIEWER_SHARED": str(shared), "DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)  # (those tests read files: SQLite, in a folder of its own)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_the_reference_tests_fail_naming_the_path_when_the_reference_folder_is_missing(tmp_path):
    missing = tmp_path / "no-shared-here"
    done = run_pytest_with_shared_at(missing, tmp_path, "tests/imports/test_parsers_seeds.py")
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{missing / 'reference'} is missing" in done.stdout
    assert not re.search(r"\d+ (passed|skipped)", summary), summary  # every one fails: none runs, none skips
    failed = re.fullmatch(r"(\d+) errors? in .*", summary)  # (failed in its set-up, before it reads a file)
    assert failed and int(failed.group(1)) >= 40, summary  # (its tests of each sample file, and the seeds' cases)


def test_the_same_tests_run_when_the_reference_folder_is_there(tmp_path):
    assert REFERENCE.is_dir(), f"{REFERENCE} is missing"
    done = run_pytest_with_shared_at(REFERENCE.parent, tmp_path, "tests/imports/test_parsers_seeds.py")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "failed" not in done.stdout.strip().splitlines()[-1]
