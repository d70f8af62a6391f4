"""The trial export (`trials.export.write_trial_zip`): seconds and peak memory against the trial's size.

    .venv/bin/python bench/export_bench.py             # a 5,000-step trial (~50 MB); --steps N

A Harbor trial folder with one big trajectory is imported on an empty SQLite database in one
child process; a fresh child then exports it, so its peak RSS is the export's own. The floor is
reading the stored trajectory and hashing it (what any export must do), in the same child.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from database import setup_django, timed_import  # bench/: this folder is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child_import(folder: Path, data_dir: Path) -> dict:
    setup_django(data_dir)
    imp, _ = timed_import(folder)
    assert imp.status == "done", imp.problems
    return {}


def child_export(data_dir: Path) -> dict:
    setup_django(data_dir)
    import hashlib

    from trials.export import write_trial_zip
    from trials.models import Trial

    trial = Trial.objects.select_related("pack").get()
    blob = trial.trajectories.get().blob
    started = time.perf_counter()
    digest = hashlib.sha256()
    with blob.open() as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    floor = time.perf_counter() - started
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        write_trial_zip(trial, out)
        seconds = time.perf_counter() - started
        size = out.tell()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "floor": floor, "zip_mb": size / 1e6, "rss_before_mb": rss_before, "peak_mb": peak,
            "trajectory_mb": blob.size / 1e6}  # fmt: skip


def write_trial(folder: Path, steps: int) -> None:
    from trials.demo import write_trajectory

    (folder / "verifier").mkdir(parents=True)
    write_trajectory(folder / "agent" / "trajectory.json", steps=steps, observation_bytes=10_000, seed=1,
                     session_id="bench-export", model="bench-model")  # fmt: skip
    result = {"id": "bench-export-1", "trial_name": folder.name, "task_name": "bench", "finished_at": None,
              "verifier_result": {"rewards": {"reward": 1.0}}}  # fmt: skip
    (folder / "result.json").write_bytes(orjson.dumps(result))
    (folder / "verifier" / "reward.json").write_bytes(b'{"reward": 1.0}')


def run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs="+")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100 steps, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeat = 100, 1
    if args.child:
        kind, *rest = args.child
        result = child_import(Path(rest[0]), Path(rest[1])) if kind == "import" else child_export(Path(rest[0]))
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder, data_dir = Path(tmp) / "bench__EXPORT", Path(tmp) / "data"
        write_trial(folder, args.steps)
        run_child("import", str(folder), str(data_dir))
        rounds = [run_child("export", str(data_dir)) for _ in range(args.repeat)]
    rounds.sort(key=lambda r: r["seconds"])
    median = rounds[len(rounds) // 2]
    print(f"trajectory {median['trajectory_mb']:.1f} MB, {args.steps} steps -> zip {median['zip_mb']:.1f} MB")
    each = ", ".join(f"{r['seconds']:.2f}" for r in rounds)
    ratio = median["seconds"] / median["floor"]
    print(f"export {median['seconds']:.2f} s (rounds {each}); floor {median['floor']:.2f} s; × {ratio:.1f}")
    print(f"peak RSS {max(r['peak_mb'] for r in rounds):.0f} MB (before the export {median['rss_before_mb']:.0f} MB)")


if __name__ == "__main__":
    main()
