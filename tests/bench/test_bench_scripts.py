"""Every bench script runs: `python bench/X_bench.py --quick` exits 0, so a bench cannot rot unseen.

The scripts are found, not listed, so a new one is covered the day it is added; each must
have a `--quick` mode (small sizes, seconds). The figures are not checked here: speed
targets live in the scripts and bench/README.md, not in timed tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

from tests.builders import REPO, TEST_REDIS_URL, database_url, free_port

BENCH = REPO / "bench"
SCRIPTS = sorted(BENCH.glob("*_bench.py"))

# What a script needs beyond SQLite and Python; the others run anywhere the suite does.
NEEDS_POSTGRES_AND_REDIS = {"scale_bench.py", "live_bench.py"}
MARKS = {
    "page_load_bench.py": [pytest.mark.browser],
    "triage_bench.py": [pytest.mark.browser],  # (a scripted triager in Chromium)
    **{name: [pytest.mark.services] for name in NEEDS_POSTGRES_AND_REDIS},
}


def _params() -> list:
    return [pytest.param(script, marks=MARKS.get(script.name, []), id=script.name) for script in SCRIPTS]


def test_the_bench_folder_has_scripts_to_run():
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("script", _params())
def test_a_bench_script_has_a_quick_mode(script: Path):
    assert re.search(r"""["']--quick["']""", script.read_text()), f"{script.name} has no --quick mode"


@pytest.mark.parametrize("script", _params())
def test_a_bench_script_runs_its_quick_mode_to_the_end(script: Path, tmp_path: Path):
    if "--quick" not in script.read_text():
        pytest.fail(f"{script.name} has no --quick mode")
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)  # (a bench makes its own database: never the suite's)
    env.pop("REDIS_URL", None)
    args = [sys.executable, str(script), "--quick"]
    if script.name in NEEDS_POSTGRES_AND_REDIS:
        if connection.vendor != "postgresql":
            pytest.skip(f"{script.name} needs PostgreSQL and Redis: it runs with the suite on PostgreSQL")
        server = database_url()  # (the suite's server; the bench makes and drops a database of its own on it)
        own = f"{urlsplit(server).path.strip('/')}_{script.stem}"
        env.update(DATABASE_URL=server, REDIS_URL=TEST_REDIS_URL, BENCH_DATABASE=own)
        if script.name == "scale_bench.py":
            args += ["--database", own]
    if 'add_argument("--port"' in script.read_text():  # (a script that serves: on a free port, not its default)
        args += ["--port", str(free_port())]
    # (a hang's bound, not a time budget: a quick run took over 300 s beside two CPU burners)
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (
        f"{script.name} --quick exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
