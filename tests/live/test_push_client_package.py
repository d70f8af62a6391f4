"""The runner client is a package of its own: it installs alone, without Django, and runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import urllib3

from tests.builders import REPO

CLIENT = REPO / "clients" / "benchviewer-push"

pytestmark = pytest.mark.sqlite_only("no database: installs a package into a venv of its own")


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300)


def test_the_runner_client_installs_alone_into_a_fresh_venv_and_runs_without_django(tmp_path):
    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=True)  # the bundled pip: no network
    python = fresh / "bin" / "python"
    # Its one dependency, copied from this environment (pure Python), instead of downloaded.
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    shutil.copytree(Path(urllib3.__file__).parent, site / "urllib3")

    # Built with this environment's setuptools (no download), installed alone from its wheel.
    source = shutil.copytree(CLIENT, tmp_path / "source", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    wheels = tmp_path / "wheels"  # (built from a copy: setuptools writes build/ beside the sources)
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, source)
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("benchviewer_push-*.whl")
    installed = run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    assert installed.returncode == 0, installed.stderr

    assert run(python, "-c", "import django").returncode != 0  # the venv has no Django to import
    imported = run(python, "-c", "import sys, benchviewer_push; print(sorted(m for m in sys.modules if 'django' in m))")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "[]"
    usage = run(fresh / "bin" / "benchviewer-push", "--help")
    assert usage.returncode == 0, usage.stderr
    assert "upload" in usage.stdout and "stream" in usage.stdout


def test_importing_the_runner_client_here_does_not_import_django():
    imported = run(sys.executable, "-c", "import sys, benchviewer_push; print('django' in sys.modules)")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "False"
