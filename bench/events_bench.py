"""Reading runtime events: `lime.parse_event_rows` against orjson's parse of the same lines.

    .venv/bin/python bench/events_bench.py            # 10,000 events; --events N; --quick: a smoke run

Two files of the same events: one with no redaction in it, and one whose first event carries a
masked context item (so every event is walked and scrubbed, `redaction.scrub_tree`). Pure
parsing, no database: what an events file costs before its rows are written.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trials.ingest.formats import lime


def event(i: int) -> dict:
    return {
        "type": "tool.call.completed", "eventId": f"e{i}", "timestamp": "2026-01-01T00:00:00Z", "sequence": i,
        "sessionId": "s", "runId": "r", "turnId": f"t{i}",
        "payload": {"toolCallId": f"c{i}", "name": "bash", "arguments": {"cmd": "ls -la", "cwd": "/w"},
                    "result": {"exitCode": 0, "stdout": "x" * 500, "files": [{"path": f"/a/{j}"} for j in range(5)]}},
    }  # fmt: skip


def timed(work, repeat: int) -> float:
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        rounds.append(time.perf_counter() - start)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 500 events, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.events, args.repeat = 500, 1
    plain = [event(i) for i in range(args.events)]
    masked = {"item_id": "item-1", "context_kind": "credential", "content": "x", "redaction_state": "masked"}
    redacted = [{**plain[0], "type": "context.item.added", "payload": {"item": masked}}, *plain[1:]]
    for label, events in (("no redaction", plain), ("a redaction", redacted)):
        lines = [orjson.dumps(e) for e in events]
        parse = timed(lambda lines=lines: [orjson.loads(line) for line in lines], args.repeat)
        rows = [(n, orjson.loads(line)) for n, line in enumerate(lines, start=1)]
        read = timed(lambda rows=rows: lime.parse_event_rows(rows, "events.jsonl"), args.repeat)
        print(f"{label}: {args.events} events, orjson parse {parse:.3f} s, parse_event_rows {read:.3f} s "
              f"({read / parse:.1f}x the parse)")  # fmt: skip


if __name__ == "__main__":
    main()
