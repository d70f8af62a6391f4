"""A Terminal-Bench 1 submission of about 3,000 files imported: time and peak RSS.

    .venv/bin/python bench/tb1_bench.py            # 333 trial folders (9 files each) + the run files
    .venv/bin/python bench/tb1_bench.py --quick    # 20 trial folders, a smoke run: exits 0 on success

The submission is generated (nothing shipped): `<date>_<agent>_<model>/<run_id>/` with
results.json (the folders' rows and as many again with no folder), run_metadata.json, tb.lock,
run.log, and per trial `<task>/<task>.1-of-1.<run_id>/` holding results.json, commands.txt,
panes/{pre-agent,post-agent,post-test}.txt and sessions/{agent,tests}.{cast,log}. The import
(trials.imports.service.run_import) runs in a fresh child process on an empty SQLite database,
so the peak RSS is its own; the child checks the trial count and that the job's accuracy
reproduces results.json's.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from database import setup_django, timed_import  # bench/: this folder is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RUN_ID = "2026-01-02__03-04-05"
FILES_PER_TRIAL = 9


def cast(rng: random.Random, events: int) -> str:
    lines = [json.dumps({"version": 2, "width": 160, "height": 40, "timestamp": 1767323045})]
    t = 0.0
    for i in range(events):
        t += rng.random()
        kind = "i" if i % 10 == 0 else "o"
        text = f"ls -la /app/build-{i}\r" if kind == "i" else f"drwxr-xr-x 2 root root 4096 file-{rng.random():.6f}\r\n"
        lines.append(json.dumps([round(t, 6), kind, text]))
    return "\n".join(lines) + "\n"


def write_submission(root: Path, trials: int) -> tuple[Path, float]:
    """The submission folder, and the accuracy its results.json publishes."""
    rng = random.Random(7)
    run = root / "20260102_bench-agent_bench-model" / RUN_ID
    run.mkdir(parents=True)
    rows = []
    for n in range(trials * 2):  # half the rows have a trial folder, as in real submissions
        task = f"task-{n:04d}"
        resolved = rng.choice([True, False, None])
        row = {
            "id": f"00000000-0000-4000-8000-{n:012d}",
            "trial_name": f"{task}.1-of-1.{RUN_ID}",
            "task_id": task,
            "instruction": f"Do task {n}.",
            "is_resolved": resolved,
            "failure_mode": "unset" if resolved is not None else rng.choice(["test_timeout", "parse_error"]),
            "parser_results": {"test_a": "passed", "test_b": "failed" if resolved is False else "passed"},
            "recording_path": None,
            "total_input_tokens": rng.randint(1000, 90000),
            "total_output_tokens": rng.randint(100, 9000),
            "trial_started_at": "2026-01-02T03:04:05+00:00",
            "trial_ended_at": "2026-01-02T03:14:05+00:00",
            "agent_started_at": "2026-01-02T03:05:05+00:00",
            "agent_ended_at": "2026-01-02T03:12:05+00:00",
            "test_started_at": "2026-01-02T03:12:10+00:00",
            "test_ended_at": "2026-01-02T03:13:05+00:00",
        }
        rows.append(row)
        if n >= trials:
            continue
        folder = run / task / row["trial_name"]
        (folder / "panes").mkdir(parents=True)
        (folder / "sessions").mkdir()
        (folder / "results.json").write_text(json.dumps(row, indent=4))
        commands = [["asciinema rec --stdin /logs/agent.cast", "Enter"], ["clear", "Enter"]]
        commands += [[f"make step-{i}", "Enter"] for i in range(30)] + [["C-d"]]
        (folder / "commands.txt").write_text("".join(f"{c!r}\n" for c in commands))
        for pane in ("pre-agent", "post-agent", "post-test"):
            (folder / "panes" / f"{pane}.txt").write_text("root@bench:/app# \n" * 40)
        for session, events in (("agent", 600), ("tests", 150)):
            (folder / "sessions" / f"{session}.cast").write_text(cast(rng, events))
            (folder / "sessions" / f"{session}.log").write_text("output line\n" * events)
    resolved = sum(1 for r in rows if r["is_resolved"])
    accuracy = resolved / len(rows)
    results = {
        "id": "11111111-2222-4333-8444-555555555555",
        "results": rows,
        "pass_at_k": {},
        "n_resolved": resolved,
        "n_unresolved": len(rows) - resolved,
        "resolved_ids": [r["task_id"] for r in rows if r["is_resolved"]],
        "unresolved_ids": [r["task_id"] for r in rows if not r["is_resolved"]],
        "accuracy": accuracy,
    }
    (run / "results.json").write_text(json.dumps(results, indent=4))
    metadata = {"run_id": RUN_ID, "uuid": "bench-run", "dataset_name": "terminal-bench-core",
                "dataset_version": "0.1.1", "agent_name": "bench-agent", "model_name": "bench/model",
                "accuracy": accuracy}  # fmt: skip
    (run / "run_metadata.json").write_text(json.dumps(metadata, indent=4))
    (run / "tb.lock").write_text(json.dumps({"lockfile_version": "1.0", "harness": {"version": "0.2.15"}}))
    (run / "run.log").write_text("bench run\n")
    return run.parent, accuracy


def child_import(root: Path, data_dir: Path, accuracy: float, trials: int) -> dict:
    setup_django(data_dir)
    from trials.models import Job, Step, Trial

    imp, seconds = timed_import(root)
    assert imp.status == "done", imp.problems
    job = Job.objects.get()
    assert Trial.objects.filter(job=job).count() == trials * 2
    passed = Trial.objects.filter(job=job, status="passed").count()
    assert passed / (trials * 2) == accuracy == job.result["accuracy"]
    return {"seconds": seconds, "trials": Trial.objects.count(), "steps": Step.objects.count()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=4, metavar=("ROOT", "DATA_DIR", "ACCURACY", "TRIALS"))
    args = parser.parse_args()
    if args.child:
        root, data_dir, accuracy, trials = args.child
        result = child_import(Path(root), Path(data_dir), float(accuracy), int(trials))
        result["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps(result))
        return
    trials = 20 if args.quick else 333
    with tempfile.TemporaryDirectory(prefix="tb1-bench-") as tmp:
        root, accuracy = write_submission(Path(tmp) / "data", trials)
        files = sum(1 for p in root.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        data_dir = Path(tmp) / "db"
        data_dir.mkdir()
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(root), str(data_dir), repr(accuracy), str(trials)],
            check=True,
            capture_output=True,
            text=True,
            cwd=REPO,
        )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    row = {
        "files": files,
        "MB": round(size / 1e6, 1),
        "trials": result["trials"],
        "steps": result["steps"],
        "import_s": round(result["seconds"], 2),
        "files/s": round(files / result["seconds"]),
        "peak_rss_MB": round(result["peak_rss_kb"] / 1024),
    }
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
