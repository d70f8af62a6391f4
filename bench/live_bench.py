"""Benchmark of live runs: events accepted per second through the API, appends that cost the batch, and
the delay from POST to the page.

Usage: .venv/bin/python bench/live_bench.py [--quick] [--one-step 20000] [--events 50000] [--batch 1000]
       [--steps 2000] [--page-steps 10] [--otlp-spans 10000] [--database-url URL] [--port N]

A fresh database (`--database-url`, else BENCH_DATABASE_URL, else DATABASE_URL: PostgreSQL is
dropped and created again, so name one of your own; `--quick` without one uses SQLite in a
temporary folder), migrated; one gunicorn worker (sync) serving Benchviewer on a free port;
a runner's token. Then, from one client in this process (urllib3, keep-alive):
  - one step a POST: a trial of `--one-step` steps sent one POST each, then completed: the
    median POST of the first and the last 1,000 (target: the last within 1.5x of the first),
    and the bytes the blob storage holds at its completion against one copy of its step
    bodies (target: within 1.2x);
  - events: `--events` runtime events (300-byte payloads) POSTed to /api/trials/<id>/events/
    in batches of `--batch`, one after another: events stored per second;
  - steps: `--steps` ATIF steps in batches of 50 (a runner streaming a 2,000-step trial);
  - OTLP: `--otlp-spans` model-call spans POSTed to /v1/traces 512 at a time, half of them a
    subagent's sent before its own agent span, so the last POST writes those steps again in
    the subagent's lane and completes the trial: the median POST and that last one;
  - delay: one step POSTed at a time while a browser (Playwright, system Chromium) shows the
    trial's page; the time until its row is on the page (the page polls every 2 s), and the
    time until the poll endpoint returns it.

`--quick` (seconds: 100 one-step POSTs, 1,000 events, 100 steps, no browser) exits 1
when the stored bytes miss their target; a full run also when the POST times miss theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import urllib3
from browser import CHROMIUM, CHROMIUM_ARGS
from timing import p95  # bench/timing.py: this folder is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def fresh_database(url: str) -> None:
    if url.startswith("sqlite"):
        return  # (a new file in the run's own folder)
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(url: str, data_dir: str) -> tuple[str, str]:
    """Migrate; a runner's token and a logged-in session id."""
    os.environ.update(DATABASE_URL=url, DATA_DIR=data_dir, DJANGO_SETTINGS_MODULE="benchviewer.settings")
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from core import roles

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench-runner", password="pw-bench-1")
    roles.add_to_group(user, roles.RUNNER)
    client = Client()
    client.force_login(user)
    return Token.objects.create(user=user).key, client.cookies["sessionid"].value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(url: str, data_dir: str, port: int) -> subprocess.Popen:
    try:
        urllib3.request("GET", f"http://127.0.0.1:{port}/", timeout=1, retries=False)
        raise SystemExit(f"something already answers on port {port}: stop it, or give --port")
    except urllib3.exceptions.HTTPError:
        pass  # free
    env = {**os.environ, "DATABASE_URL": url, "DATA_DIR": data_dir, "DEBUG": "0"}
    env.pop("REDIS_URL", None)
    command = [
        str(REPO / ".venv/bin/gunicorn"),
        "benchviewer.wsgi",
        "--workers",
        "1",
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, cwd=REPO, env=env)
    http = urllib3.PoolManager()
    for _ in range(100):
        try:
            http.request("GET", f"http://127.0.0.1:{port}/", timeout=1, retries=False)
            return process
        except urllib3.exceptions.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("gunicorn did not start")


def runtime_event(n: int) -> dict:
    return {
        "type": "tool.progress",
        "eventId": f"evt_bench_{n}",
        "sequence": n,
        "sessionId": "sess_bench",
        "threadId": "thread_bench",
        "turnId": "turn_bench",
        "stepId": str(n // 10),
        "toolCallId": f"call_{n // 10}",
        "timestamp": "2026-11-26T04:00:00Z",
        "payload": {"output": "x" * 300, "done": n},
    }


def one_step_a_post(args, post, data_dir: str) -> bool:
    """A trial streamed one step a POST, then completed: POST times first and last, stored bytes; targets met?"""
    from django.db.models import Sum

    from trials.models import Step

    spine = {"benchmark": {"trialId": "bench-one-step", "taskId": "bench-task", "harborJobRef": "jobs/bench"}}
    trial = post("/api/commands/start_benchmark_trial/", json.dumps(spine).encode())["trial_id"]
    url = f"/api/trials/{trial}/events/"
    times = []
    for n in range(1, args.one_step + 1):
        body = json.dumps({"steps": [{"step_id": n, "source": "agent", "message": f"step {n} " + "z" * 200}]})
        started = time.perf_counter()
        post(url, body.encode())
        times.append((time.perf_counter() - started) * 1000)
    post("/api/commands/complete_benchmark_trial/", json.dumps({"trial_id": trial, "status": "completed"}).encode())
    window = min(1_000, len(times) // 2)
    first, last = statistics.median(times[:window]), statistics.median(times[-window:])
    one_copy = Step.objects.filter(trial_id=trial).aggregate(n=Sum("size"))["n"]
    blobs = Path(data_dir) / "blobs"
    stored = sum(f.stat().st_size for f in blobs.rglob("*") if f.is_file())
    folders = sum(1 for f in blobs.rglob("*") if f.is_dir())
    print(
        f"one step a POST, {args.one_step:,} steps: median POST of the first {window:,} {first:.1f} ms, "
        f"of the last {window:,} {last:.1f} ms ({last / first:.2f}x; target 1.5x)"
    )
    print(
        f"stored at its completion: {stored:,} bytes of blobs against one copy of its steps {one_copy:,} "
        f"({stored / one_copy:.3f}x; target 1.2x; {folders:,} blob folders left)"
    )
    times_met = last <= 1.5 * first or args.quick  # (a quick run's few POSTs are too noisy to judge)
    return times_met and stored <= 1.2 * one_copy


def otlp_span(span_id: int, parent: int, name: str, attributes: dict, at: int) -> dict:
    """One span as an OTLP/JSON exporter writes it (trace and span ids in hex)."""
    return {
        "traceId": "b" * 32,
        "spanId": f"{span_id:016x}",
        "parentSpanId": f"{parent:016x}" if parent else "",
        "name": name,
        "startTimeUnixNano": str(at),
        "endTimeUnixNano": str(at + 1),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }


def otlp_trace(args, post) -> bool:
    """A trace of `--otlp-spans` model calls sent as an exporter sends them, 512 spans a POST to /v1/traces:
    the lead agent's half, then a subagent's half, whose own agent span comes in the last POST with the
    lead's (a span is sent once it has ended). That POST writes the subagent's steps again, in its lane,
    and completes the trial. Median POST, the last POST, and whether each lane holds its steps."""
    from trials.models import Trial

    lead, sub, half = 1, 2, args.otlp_spans // 2
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "bench/model"}
    spans = [
        otlp_span(10 + n, lead if n < half else sub, "chat", {**chat, "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": f"call {n} " + "x" * 300}]}])}, 1_000 + n)
        for n in range(args.otlp_spans)
    ]  # fmt: skip
    agent = {"gen_ai.operation.name": "invoke_agent"}
    agents = [
        otlp_span(sub, lead, "invoke_agent searcher", {**agent, "gen_ai.agent.name": "searcher"}, 999),
        otlp_span(lead, 0, "invoke_agent lead", {**agent, "gen_ai.agent.name": "lead"}, 1),
    ]
    resource = {"attributes": [{"key": "benchmark.trial.id", "value": {"stringValue": "bench-otlp"}}]}
    batches = [spans[i : i + 512] for i in range(0, len(spans), 512)] + [agents]
    times = []
    for batch in batches:
        body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": batch}]}]}
        started = time.perf_counter()
        post("/v1/traces", json.dumps(body).encode())
        times.append((time.perf_counter() - started) * 1000)
    # A task reads each kept body off the request: wait until the trial exists and its run has ended.
    for _ in range(3000):  # a hang's bound, not a time budget
        trial = Trial.objects.filter(key="lime:bench-otlp").first()
        if trial is not None and trial.status != "running":
            break
        time.sleep(0.1)
    assert trial is not None, "no trial from the OTLP batches"
    lanes = {t.agent["name"]: t.step_count for t in trial.trajectories.all()}
    right = trial.status == "passed" and lanes == {"lead": half, "searcher": args.otlp_spans - half}
    print(
        f"OTLP: {args.otlp_spans:,} model-call spans in {len(batches) - 1} POSTs of 512: median POST "
        f"{statistics.median(times[:-1]):.0f} ms; the last POST (the agents' spans: the subagent's "
        f"{args.otlp_spans - half:,} steps written again in its lane, the trial completed) {times[-1]:.0f} ms; "
        f"lanes {lanes}{'' if right else ' WRONG'}"
    )
    return right


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a small run of every part, no browser")
    parser.add_argument("--one-step", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--page-steps", type=int, default=10)
    parser.add_argument("--otlp-spans", type=int, default=10_000)
    parser.add_argument(
        "--database-url", default=os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL")
    )
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    args = parser.parse_args()
    if args.quick:
        args.one_step, args.events, args.batch, args.steps, args.page_steps = 100, 1_000, 500, 100, 0
        args.otlp_spans = 1_200
    data_dir = tempfile.mkdtemp(prefix="live-bench-")
    if not args.database_url:
        if not args.quick:
            raise SystemExit("name a database: --database-url, BENCH_DATABASE_URL or DATABASE_URL")
        args.database_url = f"sqlite:///{data_dir}/bench.sqlite3"
    args.port = args.port or free_port()

    fresh_database(args.database_url)
    token, session = setup_django(args.database_url, data_dir)
    server = serve(args.database_url, data_dir, args.port)
    base = f"http://127.0.0.1:{args.port}"
    http = urllib3.PoolManager(maxsize=2)
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def post(path: str, body: bytes) -> dict:
        response = http.request("POST", base + path, body=body, headers=headers)
        assert response.status in (200, 201), (response.status, response.data[:500])
        return json.loads(response.data)

    try:
        met = one_step_a_post(args, post, data_dir) if args.one_step else True  # (first: storage holds nothing)
        spine = {"benchmark": {"trialId": "bench-trial", "taskId": "bench-task", "harborJobRef": "jobs/bench"}}
        trial = post("/api/commands/start_benchmark_trial/", json.dumps(spine).encode())["trial_id"]
        events_url = f"/api/trials/{trial}/events/"

        if args.events:
            bodies = [
                json.dumps({"events": [runtime_event(n) for n in range(i, min(i + args.batch, args.events))]}).encode()
                for i in range(0, args.events, args.batch)
            ]
            per_request = []
            started = time.perf_counter()
            for body in bodies:
                t = time.perf_counter()
                post(events_url, body)
                per_request.append((time.perf_counter() - t) * 1000)
            seconds = time.perf_counter() - started
            print(
                f"events: {args.events:,} in {seconds:.2f} s = {args.events / seconds:,.0f} events/s "
                f"(batches of {args.batch}: median {statistics.median(per_request):.0f} ms, "
                f"p95 {p95(per_request):.0f} ms)"
            )
            again = time.perf_counter()
            post(events_url, bodies[0])
            print(f"a batch sent again (all duplicates): {(time.perf_counter() - again) * 1000:.0f} ms")

        if args.steps:
            step_batch = 50
            started = time.perf_counter()
            for first in range(1, args.steps + 1, step_batch):
                steps = [
                    {"step_id": n, "source": "agent", "message": f"step {n} " + "y" * 500}
                    for n in range(first, min(first + step_batch, args.steps + 1))
                ]
                post(events_url, json.dumps({"steps": steps}).encode())
            seconds = time.perf_counter() - started
            print(
                f"steps: {args.steps:,} in batches of {step_batch}: {seconds:.2f} s = "
                f"{args.steps / seconds:,.0f} steps/s"
            )

        if args.otlp_spans:
            met = otlp_trace(args, post) and met
        if args.page_steps:
            page_delay(args, base, session, trial, post, events_url, http)
    finally:
        server.terminate()
        server.wait(timeout=10)
    if not met:
        raise SystemExit("a target was missed (above)")


def page_delay(args, base: str, session: str, trial: int, post, events_url: str, http) -> None:
    from playwright.sync_api import sync_playwright

    first = args.steps + 1
    api_ms, page_ms = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=base)
        context.add_cookies([{"name": "sessionid", "value": session, "url": base}])
        page = context.new_page()
        page.goto(f"/trials/{trial}/")
        page.wait_for_selector(f"#live-steps tbody tr[data-step='{args.steps}']", timeout=30_000)
        for n in range(first, first + args.page_steps):
            started = time.perf_counter()
            post(
                events_url, json.dumps({"steps": [{"step_id": n, "source": "agent", "message": f"late {n}"}]}).encode()
            )
            while True:
                live = json.loads(
                    http.request(
                        "GET",
                        f"{base}/api/trials/{trial}/live/?after={n - 1}",
                        headers={"Cookie": f"sessionid={session}"},
                    ).data
                )
                if live["steps"]:
                    api_ms.append((time.perf_counter() - started) * 1000)
                    break
            page.wait_for_selector(f"#live-steps tbody tr[data-step='{n}']", timeout=10_000)
            page_ms.append((time.perf_counter() - started) * 1000)
        browser.close()
    print(
        f"POST to the poll endpoint returning the step: median {statistics.median(api_ms):.0f} ms, "
        f"p95 {p95(api_ms):.0f} ms (n={len(api_ms)})"
    )
    print(
        f"POST to the step's row on the page (polls every 2 s): median {statistics.median(page_ms):.0f} ms, "
        f"max {max(page_ms):.0f} ms (n={len(page_ms)})"
    )


if __name__ == "__main__":
    main()
