"""Instructions an import executes, counted by valgrind's callgrind: the same count however loaded the
machine is (its wall and CPU times move by a fifth within minutes), so two commits compare exactly.

Usage: .venv/bin/python bench/instructions_bench.py [--quick] [--against REV ...]

The packs, written once by this tree's `trials.demo`: a job of 40 trials of 50 steps (2 kB
observations) and one trajectory of 2,000 steps (10 kB observations, 21 MB). Each tree imports each
pack in a fresh child under `valgrind --tool=callgrind --instr-atstart=no`, counting only the
import itself: bench/import_bench.py's `child_import` reads `time.perf_counter` right before and
right after `run(root)`, and the child turns callgrind's instrumentation on and off there
(`callgrind_control -i`), so Django's start and the database's setup are not counted. `--against REV`:
the same packs imported by REV's code too, from a git worktree the script makes and removes (any
commit whose bench/import_bench.py has `child_import(root, data_dir)`: ec98b11 and later).
`--quick`: a job of 4 trials of 10 steps, this tree only; exits 0 when it counted something.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from database import environment, setup_django  # bench/database.py: this folder is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]

# Runs in the tree measured (its cwd), with that tree's bench/import_bench.py.
CHILD = """
import os, subprocess, sys, time
sys.path[:0] = [".", "bench"]
import import_bench
from pathlib import Path
perf_counter, seen = time.perf_counter, []
def switching():
    if sys._getframe(1).f_code.co_name == "child_import" and len(seen) < 2:
        seen.append(1)
        subprocess.run(["callgrind_control", "-i", "on" if len(seen) == 1 else "off", str(os.getpid())],
                       capture_output=True, check=True)
    return perf_counter()
time.perf_counter = switching
import_bench.child_import(Path(sys.argv[1]), Path(sys.argv[2]))
"""


def write_packs(folder: Path, quick: bool) -> dict[str, Path]:
    from trials.demo import write_job, write_trajectory

    tasks, steps = (2, 10) if quick else (20, 50)
    job = write_job(
        folder / "job",
        "job",
        role="baseline",
        configuration_id="bench",
        agent="bench-agent",
        model="bench-model",
        tasks=tasks,
        attempts=2,
        steps_per_trial=steps,
        observation_bytes=2_000,
        with_extras=False,
    )
    packs = {f"job: {tasks * 2} trials x {steps} steps": job}
    if not quick:
        (folder / "trajectory").mkdir()
        trajectory = folder / "trajectory" / "trajectory.json"
        write_trajectory(
            trajectory, steps=2_000, observation_bytes=10_000, seed=1, session_id="bench", model="bench-model"
        )
        packs["one trajectory, 2,000 steps"] = trajectory.parent
    return packs


def instructions(tree: Path, pack: Path) -> int:
    """Instructions of one import of `pack` by `tree`'s code, in a fresh child on a fresh database."""
    with tempfile.TemporaryDirectory(prefix="bench-db-") as data_dir:
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null"]
        run = subprocess.run(
            [*valgrind, sys.executable, "-c", CHILD, str(pack), data_dir],
            cwd=tree,
            capture_output=True,
            text=True,
            env=environment(data_dir),
        )
    counted = [line for line in run.stderr.splitlines() if "Collected :" in line]
    if run.returncode or not counted:
        raise SystemExit(f"{tree}: the import under callgrind failed:\n{run.stderr[-3000:]}")
    return int(counted[-1].split(":")[-1])


def worktree(rev: str, folder: Path) -> Path:
    tree = folder / f"tree-{rev}"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=REPO, check=True, capture_output=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--against", nargs="*", default=[], metavar="REV", help="commits to count beside this tree")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        folder = Path(tmp)
        setup_django(folder / "demo-db")  # (trials.demo needs Django's settings)
        packs = write_packs(folder, args.quick)
        trees = {"this tree": REPO} | {rev: worktree(rev, folder) for rev in args.against}
        try:
            print("| pack | " + " | ".join(trees) + " |")
            print("|---|" + "---:|" * len(trees))
            for label, pack in packs.items():
                counts = {name: instructions(tree, pack) for name, tree in trees.items()}
                here = counts.pop("this tree")
                cells = [f"{here:,}"] + [f"{n:,} (this tree {here / n:.3f}x)" for n in counts.values()]
                print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
        finally:
            for name, tree in trees.items():
                if name != "this tree":
                    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)


if __name__ == "__main__":
    main()
