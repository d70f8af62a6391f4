"""Inspect AI log import: time and peak RSS of a 1,000-sample `.eval` and of one sample of 100,000 events.

    .venv/bin/python bench/inspect_bench.py           # 1,000 samples; one sample of 100,000 events
    .venv/bin/python bench/inspect_bench.py --quick   # 100 samples; 10,000 events: a smoke run (exit 0: imported right)

The logs are written by inspect_ai itself (a dev dependency): one eval run with its mockllm
model (tests/inspect_logs.py), then its samples copied under new ids, or one sample's model,
approval and tool events repeated, and written back with `write_eval_log` (Zstandard members,
as Inspect writes them). Each import runs in a child process on a fresh SQLite database, so
its peak RSS is its own; beside each big log a small one shows what the same process needs
anyway, so memory is flat when the big one's peak is close to the small one's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from database import setup_django, timed_import  # bench/: this folder is on sys.path when run as a script
from timing import peak_rss_kb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def template(folder: Path) -> Path:
    from tests.inspect_logs import write_agentic_log

    return write_agentic_log(folder)


# steps of each template sample's main lane: the input, then each model call
STEPS = {"add": 3, "wrong": 2, "loop": 4, "crash": 2}


def many_samples(source: Path, count: int, out: Path) -> tuple[Path, int]:
    """The template's 8 samples copied, under new ids, to `count` samples; and the steps they hold."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(source))
    assert log.samples
    originals = log.samples
    log.samples = [
        originals[i % len(originals)].model_copy(update={"id": f"{originals[i % len(originals)].id}-{i}"})
        for i in range(count)
    ]
    write_eval_log(log, str(out), format="eval")
    return out, sum(STEPS[str(s.id).rsplit("-", 1)[0]] for s in log.samples)


def many_events(source: Path, events: int, out: Path, records: bool = True) -> tuple[Path, int, int]:
    """One sample whose turn (a model call, its approval, the tool call and its sandbox call) is repeated
    to `events` events; and the trials (1) and steps it holds (the input, then one a turn).

    `records=False`: turns without the approval and sandbox events (permission decisions and runtime
    events), to show what the steps alone cost."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(source))
    assert log.samples
    sample = next(s for s in log.samples if s.id == "loop" and s.epoch == 1)
    models = [i for i, e in enumerate(sample.events) if e.event == "model"]
    turn = sample.events[models[0] : models[1]]
    assert {"model", "approval", "tool"} <= {e.event for e in turn}, [e.event for e in turn]
    turn = [e for e in turn if records or e.event not in ("approval", "sandbox")]
    repeated = []
    for number in range(events // len(turn)):
        copies = [e.model_copy(deep=True) for e in turn]
        for event in copies:
            if event.event == "model":
                event.output.choices[0].message.tool_calls[0].id = f"call-{number}"  # type: ignore[index]
            elif event.event == "tool":
                event.id = f"call-{number}"
            elif event.event == "span_begin" or event.event == "span_end":
                event.id = f"span-{number}"
        repeated += copies
    after_last_turn = models[-1] + (models[1] - models[0])
    sample.events = sample.events[: models[0]] + repeated + sample.events[after_last_turn:]
    log.samples = [sample]
    write_eval_log(log, str(out), format="eval")
    return out, 1, 1 + events // len(turn)


def child_import(path: Path, data_dir: Path) -> dict:
    setup_django(data_dir)
    from trials.models import PermissionDecision, RuntimeEvent, Step, ToolCall, Trial

    imp, seconds = timed_import(path)
    return {
        "status": imp.status,
        "errors": [p for p in imp.problems if p["severity"] == "error"][:3],
        "seconds": seconds,
        "trials": Trial.objects.count(),
        "steps": Step.objects.count(),
        "tool_calls": ToolCall.objects.count(),
        "approvals": PermissionDecision.objects.count(),
        "sandbox_calls": RuntimeEvent.objects.filter(type__startswith="sandbox.").count(),
    }


def largest_member_mb(path: Path) -> float:
    with zipfile.ZipFile(path) as archive:
        return round(max(info.file_size for info in archive.infolist()) / 1e6, 1)


def run_child(path: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-db-") as data_dir:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(path), data_dir],
            check=True,
            capture_output=True,
            text=True,
            cwd=REPO,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(label: str, path: Path, trials: int, steps: int) -> tuple[dict, bool]:
    result = run_child(path)
    right = result["status"] == "done" and not result["errors"]
    right = right and result["trials"] == trials and result["steps"] == steps
    row = {
        "scenario": label,
        "MB": round(path.stat().st_size / 1e6, 1),
        "largest_member_MB": largest_member_mb(path),
        "trials": result["trials"],
        "steps": result["steps"],
        "tool_calls": result["tool_calls"],
        "approvals": result["approvals"],
        "sandbox_calls": result["sandbox_calls"],
        "import_s": round(result["seconds"], 2),
        "peak_rss_MB": round(result["peak_rss_kb"] / 1024),
        "right": right,
    }
    print(json.dumps(row), flush=True)
    return row, right


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 samples and 10,000 events")
    parser.add_argument("--child", nargs=2, metavar=("LOG", "DATA_DIR"))
    args = parser.parse_args()
    if args.child:
        result = child_import(Path(args.child[0]), Path(args.child[1]))
        result["peak_rss_kb"] = peak_rss_kb()
        print(json.dumps(result))
        return
    samples, events = (100, 10_000) if args.quick else (1_000, 100_000)
    rows, all_right = [], True
    with tempfile.TemporaryDirectory(prefix="bench-inspect-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        source = template(folder / "template")
        small, small_steps = many_samples(source, 10, folder / "small.eval")
        big, big_steps = many_samples(source, samples, folder / "samples.eval")
        logs = [
            ("10 samples", small, 10, small_steps),
            (f"{samples:,} samples", big, samples, big_steps),
            ("one sample, 1,000 events", *many_events(source, 1_000, folder / "events-small.eval")),
            (f"one sample, {events:,} events", *many_events(source, events, folder / "events.eval")),
            (
                f"one sample, {events:,} events, no approval or sandbox event",
                *many_events(source, events, folder / "steps.eval", records=False),
            ),
        ]
        print(f"logs written by inspect_ai in {time.perf_counter() - start:.1f} s", flush=True)
        for label, path, trials, steps in logs:
            row, right = measure(label, path, trials, steps)
            rows.append(row)
            all_right = all_right and right
    print("\n| scenario | .eval MB | largest member MB | trials | steps | tool calls | approvals | sandbox calls "
          "| import s | peak RSS MB |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['scenario']} | {r['MB']} | {r['largest_member_MB']} | {r['trials']:,} | {r['steps']:,} | "
              f"{r['tool_calls']:,} | {r['approvals']:,} | {r['sandbox_calls']:,} | "
              f"{r['import_s']} | {r['peak_rss_MB']} |")  # fmt: skip
    if not all_right:
        print("FAILED: an import did not give the trials and steps expected", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
