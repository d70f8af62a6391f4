"""benchviewer-push: report to a Benchviewer server from a benchmark runner (docs/reporting-from-a-runner.md).

    benchviewer-push upload JOB_OR_TRIAL_FOLDER          # a finished folder (or archive), as an import
    benchviewer-push stream events.jsonl --start spine.json --follow --complete completed
    some-runner | benchviewer-push stream - --trial 42   # stdin
    benchviewer-push complete --trial 42 failed --reason "the verifier timed out"

`stream` sends a live trial's JSON lines (a line with `step_id` is an ATIF step, any other
a runtime event) in batches to POST /api/trials/<id>/events/. The server keeps each event
and step once, so a runner started again on the same file sends it all again safely.
`stream` and `complete` end with a summary of the trial: its status, steps, events, and URL.
Every request is retried with exponential backoff (urllib3's Retry) while the server is
unreachable or answers 429/5xx. Standard library and urllib3 only: no Django here.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import urllib3
from urllib3.util.retry import Retry

BATCH = 2000  # items a POST carries at most (bigger batches are cheaper per event: bench/README.md)
FLUSH_SECONDS = 0.5  # a batch waits at most this long for more lines
FINISHED = ("benchmark.trial.completed", "benchmark.trial.failed")


class Server:
    """The Benchviewer API at `url`, with a token, retrying with backoff."""

    def __init__(self, url: str, token: str, retries: int = 12, backoff: float = 0.5) -> None:
        self.url = url.rstrip("/")
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            backoff_factor=backoff,
            backoff_max=10,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=None,  # POSTs too: the server keeps each event and step once
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        self.http = urllib3.PoolManager(retries=retry, timeout=urllib3.Timeout(connect=5, read=60))
        self.headers = {"Authorization": f"Token {token}", "Accept": "application/json"}

    def post_json(self, path: str, body: Any) -> tuple[int, Any]:
        response = self.http.request(
            "POST",
            self.url + path,
            body=json.dumps(body).encode(),
            headers={**self.headers, "Content-Type": "application/json"},
        )
        return response.status, _json(response.data)

    def get_json(self, path: str) -> tuple[int, Any]:
        response = self.http.request("GET", self.url + path, headers=self.headers)
        return response.status, _json(response.data)

    def post_file(self, path: str, name: str, data: bytes) -> tuple[int, Any]:
        response = self.http.request("POST", self.url + path, fields={"file": (name, data)}, headers=self.headers)
        return response.status, _json(response.data)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return {"detail": data[:500].decode("utf-8", "replace")}


# ---------------------------------------------------------------- upload


def zipped(folder: Path) -> bytes:
    """The folder as a zip, its own name as the top folder (as Harbor's job and trial folders are)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, Path(folder.name) / path.relative_to(folder))
    return buffer.getvalue()


def upload(server: Server, path: Path) -> int:
    if path.is_dir():
        name, data = f"{path.name}.zip", zipped(path)
    else:
        name, data = path.name, path.read_bytes()
    status, body = server.post_file("/api/imports/", name, data)
    print(json.dumps(body, indent=2))
    return 0 if status in (200, 201, 202) else 1


# ---------------------------------------------------------------- stream


def lines_of(source: IO[str], follow: bool, idle_exit: float) -> Iterator[str | None]:
    """The file's lines; with `follow`, also those appended later (None while waiting: time to flush).

    Stops at the end of the file, or with `follow` after `idle_exit` seconds with no new line.
    """
    pending = ""
    quiet_since = time.monotonic()
    while True:
        line = source.readline()
        if line:
            pending += line
            if pending.endswith("\n"):  # (a line still being written is held back)
                yield pending
                pending = ""
                quiet_since = time.monotonic()
            continue
        if not follow or time.monotonic() - quiet_since > idle_exit:
            if pending.strip():
                yield pending
            return
        yield None
        time.sleep(0.1)


class Sent:
    """What a stream sent, as the server answered: for the summary."""

    def __init__(self) -> None:
        self.bad = 0  # batches the server refused items of, and lines that were not JSON
        self.unplaced = 0  # events kept that a derived trajectory places in no step


def stream(
    server: Server,
    trial: int,
    source: IO[str],
    follow: bool,
    idle_exit: float,
    batch: int = BATCH,
    sent: Sent | None = None,
) -> int:
    """Send the lines in batches; 0 when every item was kept, 1 when the server named bad ones."""
    events: list[Any] = []
    lines: list[int] = []  # each event's line in the source, to name it as the runner wrote it
    steps: list[Any] = []
    sent = sent or Sent()
    sent_at = time.monotonic()
    finished = False

    def flush() -> None:
        nonlocal events, lines, steps, sent_at
        if events or steps:
            status, body = server.post_json(f"/api/trials/{trial}/events/", {"events": events, "steps": steps})
            if status >= 400:
                sent.bad += 1
                print(f"benchviewer-push: {status} {json.dumps(body)[:2000]}", file=sys.stderr)
            if status >= 500 or status in (401, 403, 404):
                raise SystemExit(f"benchviewer-push: the server refused the batch ({status}); stopping")
            for item in body.get("unplaced", []) if isinstance(body, dict) else []:
                sent.unplaced += 1
                index = str(item.get("path", "")).removeprefix("events[").removesuffix("]")
                where = f"line {lines[int(index)]}" if index.isdigit() and int(index) < len(lines) else item.get("path")
                print(f"benchviewer-push: {where}: {item.get('why')}", file=sys.stderr)
        events, lines, steps, sent_at = [], [], [], time.monotonic()

    for number, line in enumerate(lines_of(source, follow, idle_exit), start=1):
        if line is None or not line.strip():
            if (events or steps) and time.monotonic() - sent_at > FLUSH_SECONDS:
                flush()
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            print(f"benchviewer-push: line {number} is not JSON ({exc}); skipped", file=sys.stderr)
            sent.bad += 1
            continue
        if isinstance(item, dict) and "step_id" in item and "type" not in item:
            steps.append(item)
        else:
            events.append(item)
            lines.append(number)
            finished = finished or (isinstance(item, dict) and item.get("type") in FINISHED)
        if len(events) + len(steps) >= batch or time.monotonic() - sent_at > FLUSH_SECONDS:
            flush()
        if finished and follow:
            break
    flush()
    return 1 if sent.bad else 0


def start(server: Server, spine_file: Path) -> int:
    status, body = server.post_json("/api/commands/start_benchmark_trial/", json.loads(spine_file.read_text()))
    if status not in (200, 201):
        raise SystemExit(f"benchviewer-push: could not start the trial ({status}): {body}")
    print(
        f"trial {body['trial_id']} ({'started' if status == 201 else 'started before: continuing it'})", file=sys.stderr
    )
    return int(body["trial_id"])


def complete(server: Server, trial: int, status_name: str, reason: str = "") -> None:
    body = {"trial_id": trial, "status": status_name, **({"reason": reason} if reason else {})}
    status, answer = server.post_json("/api/commands/complete_benchmark_trial/", body)
    if status != 200:
        raise SystemExit(f"benchviewer-push: could not complete trial {trial} ({status}): {answer}")


def summary(server: Server, trial: int, sent: Sent | None = None) -> str:
    """The trial as the server has it now: status, steps, events (and what was not placed), its page."""
    status, body = server.get_json(f"/api/trials/{trial}/live/")
    url = f"{server.url}/trials/{trial}/"
    if status != 200 or not isinstance(body, dict):
        return f"trial {trial}: the server did not say how it stands ({status})\n{url}"
    counts = f"{body.get('step_count')} steps, {body.get('event_count')} events"
    if sent is not None and sent.unplaced:
        counts += f" ({sent.unplaced} placed in no step: see above)"
    stalled = ", stalled" if body.get("stalled") else ""
    return f"trial {trial}: {body.get('status')}{stalled}, {counts}\n{url}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchviewer-push", description="Report to a Benchviewer server.")
    p.add_argument(
        "--server",
        default=os.environ.get("BENCHVIEWER_URL", "http://127.0.0.1:8000"),
        help="the server's address (env BENCHVIEWER_URL)",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("BENCHVIEWER_TOKEN", ""),
        help="an API token: POST /api/token/ (env BENCHVIEWER_TOKEN)",
    )
    p.add_argument("--retries", type=int, default=12, help="attempts per request, with backoff (default 12)")
    commands = p.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upload", help="upload a finished job or trial folder (or an archive)")
    up.add_argument("path", type=Path)
    live = commands.add_parser("stream", help="send a live trial's events and steps (JSON lines)")
    live.add_argument("source", help="a JSON-lines file, or - for stdin")
    which = live.add_mutually_exclusive_group(required=True)
    which.add_argument("--trial", type=int, help="the trial's id (from start_benchmark_trial)")
    which.add_argument("--start", type=Path, help="a JSON file of the seed's spine: start (or find) the trial first")
    live.add_argument("--follow", action="store_true", help="keep reading lines appended to the file")
    live.add_argument("--idle-exit", type=float, default=300, help="with --follow: stop after this many quiet seconds")
    live.add_argument("--complete", choices=["completed", "failed"], help="complete the trial at the end")
    live.add_argument("--batch", type=int, default=BATCH, help=f"items a request carries at most (default {BATCH})")
    done = commands.add_parser("complete", help="complete a live trial (completed or failed)")
    done.add_argument("status", choices=["completed", "failed"])
    which = done.add_mutually_exclusive_group(required=True)
    which.add_argument("--trial", type=int, help="the trial's id (from start_benchmark_trial)")
    which.add_argument("--start", type=Path, help="the trial's spine (JSON): the trial it started")
    done.add_argument("--reason", default="", help="why it failed (shown on its page)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(format="benchviewer-push: %(message)s")  # urllib3 says when it retries, and why
    if not args.token:
        raise SystemExit("benchviewer-push: give a token (--token or BENCHVIEWER_TOKEN)")
    server = Server(args.server, args.token, retries=args.retries)
    if args.command == "upload":
        return upload(server, args.path)
    trial = args.trial if args.trial is not None else start(server, args.start)
    if args.command == "complete":
        complete(server, trial, args.status, args.reason)
        print(summary(server, trial))
        return 0
    source = sys.stdin if args.source == "-" else open(args.source, encoding="utf-8")
    sent = Sent()
    with source:
        code = stream(server, trial, source, args.follow, args.idle_exit, args.batch, sent)
    if args.complete:
        complete(server, trial, args.complete)
    print(summary(server, trial, sent))
    return code


if __name__ == "__main__":
    sys.exit(main())
