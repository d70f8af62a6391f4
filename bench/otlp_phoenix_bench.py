"""OTLP traces side by side with Arize Phoenix: the same spans, sent by the OpenTelemetry SDK's own
OTLP/HTTP exporter, 50 a batch, to each server's `/v1/traces`, one batch after another as a
BatchSpanProcessor sends them; how long a batch takes to be accepted (a 2xx the exporter takes as
sent), spans accepted per second, and when the whole trace is queryable.

Usage: .venv/bin/python bench/otlp_phoenix_bench.py [--quick] [--spans 10000] [--batch 50]
       [--phoenix /tmp/phoenix-venv/bin/phoenix] [--database-url URL] [--redis-url URL] [--interleave]

The spans: one agent run, `invoke_agent` (the root, ended last, with its `benchmark.reward`) over
`--spans - 1` model-call spans (`chat`, tokens, a 200-character output message), made by the SDK
(TracerProvider) and encoded once (encode_spans), so every server is sent the same bytes.
Targets, one after another in this run:
  - Phoenix (`--phoenix`: its `phoenix` command, installed in a venv of its own, never the
    repo's: `python3.11 -m venv /tmp/phoenix-venv && /tmp/phoenix-venv/bin/pip install
    arize-phoenix`), on a fresh working folder and a free port; queryable: its GraphQL
    `recordCount` of the project reaches the spans sent;
  - Benchviewer embedded (gunicorn, SQLite, no REDIS_URL), the default deployment;
  - Benchviewer deployed (docs/deploy.md: gunicorn, a Celery worker on `--redis-url`,
    PostgreSQL `--database-url`, a database of its own the bench creates and drops), when a
    database URL is given (`--database-url`, else BENCH_DATABASE_URL);
  queryable: the trial's API (`GET /api/trials/<id>/`) says it is `passed` with every span's step.
`--interleave`: Phoenix and Benchviewer deployed up at once, each batch sent to one then the other, so
both are timed under the same machine load (one after another, the load of a shared machine can
double between them); they store at the same time too, so each one's queryable time is longer.
Goal (issue 43): a batch accepted at least as fast as Phoenix's, and queryable within 0.25x its time.

`--quick`: 300 spans, Benchviewer embedded (and what else is named); exits 1 when a span is lost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import urllib3
from database import SQLITE_NAME, copy_migrated_sqlite, environment, psql
from timing import p95  # bench/timing.py: this folder is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
TRIAL = "bench-otlp-phoenix"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def made_spans(count: int) -> list:
    """`count` finished spans of one agent run, as the SDK hands them to its exporter (the root last)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-runner", "benchmark.trial.id": TRIAL}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    with tracer.start_as_current_span("invoke_agent coder") as agent:
        agent.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder",
                              "benchmark.reward": 1.0})  # fmt: skip
        for n in range(count - 1):
            with tracer.start_as_current_span("chat bench/model") as chat:
                output = [{"role": "assistant", "parts": [{"type": "text", "content": f"call {n} " + "x" * 200}]}]
                chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "bench/model",
                                     "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
                                     "gen_ai.output.messages": json.dumps(output)})  # fmt: skip
    return list(memory.get_finished_spans())


def send(targets: list[dict], spans: list, batch: int) -> dict[str, dict]:
    """The spans sent by the SDK's OTLPSpanExporter `batch` at a time to each target; with several, each
    batch to every target in turn (`--interleave`: the same machine load on all). Each export's ms, when
    the first was sent and when the last was accepted (perf_counter), by target. An export the exporter
    does not take as sent stops the run."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporters = {t["name"]: OTLPSpanExporter(endpoint=f"{t['url']}/v1/traces", headers=t["headers"], timeout=60)
                 for t in targets}  # fmt: skip
    sent = {t["name"]: {"times": [], "first": time.perf_counter()} for t in targets}
    for start in range(0, len(spans), batch):
        for name, exporter in exporters.items():
            started = time.perf_counter()
            result = exporter.export(spans[start : start + batch])
            sent[name]["times"].append((time.perf_counter() - started) * 1000)
            sent[name]["accepted"] = time.perf_counter()
            if result is not SpanExportResult.SUCCESS:
                raise SystemExit(f"{name}: the exporter did not take batch {start // batch} as sent ({result})")
    for exporter in exporters.values():
        exporter.shutdown()
    return sent


def wait_until(answered, what: str, limit: float = 900.0) -> float:
    """perf_counter when `answered()` first holds (polled every 0.1 s)."""
    deadline = time.perf_counter() + limit
    while not answered():
        if time.perf_counter() > deadline:
            raise SystemExit(f"{what}: not queryable after {limit:.0f} s")
        time.sleep(0.1)
    return time.perf_counter()


def wait_for_http(url: str, process: subprocess.Popen, limit: float = 120.0) -> None:
    http = urllib3.PoolManager()
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the server exited ({process.returncode})")
        try:
            http.request("GET", url, timeout=1, retries=False)
            return
        except urllib3.exceptions.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url}: no answer after {limit:.0f} s")


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


@contextmanager
def phoenix(command: str) -> Iterator[dict]:
    folder, port = tempfile.mkdtemp(prefix="otlp-phoenix-"), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": folder,
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
    }
    process = subprocess.Popen([command, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    http = urllib3.PoolManager()
    query = json.dumps({"query": "{ projects { edges { node { name recordCount } } } }"}).encode()

    def stored() -> int:
        answer = http.request("POST", f"{url}/graphql", body=query, headers={"Content-Type": "application/json"})
        return sum(edge["node"]["recordCount"] for edge in json.loads(answer.data)["data"]["projects"]["edges"])

    try:
        wait_for_http(url, process)
        yield {"name": "Phoenix", "url": url, "headers": {}, "stored": stored}
    finally:
        stop([process])
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def benchviewer(name: str, spans: int, database_url: str | None, redis_url: str | None) -> Iterator[dict]:
    """Benchviewer served as deployed: gunicorn (and with a broker, a Celery worker), a database of its own."""
    data_dir, port = tempfile.mkdtemp(prefix="otlp-bench-"), free_port()
    database_url = database_url or f"sqlite:///{data_dir}/{SQLITE_NAME}"
    env = {**environment(data_dir, database_url, redis_url), "DEBUG": "0"}
    if not database_url.startswith("sqlite"):
        env.setdefault("DB_CONN_MAX_AGE", "600")  # (kept connections: docs/configuration.md)
    if database_url.startswith("sqlite"):
        copy_migrated_sqlite(Path(data_dir) / SQLITE_NAME)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=REPO, env=env, check=True)
    token = subprocess.run(
        [sys.executable, "-c", TOKEN_SCRIPT], cwd=REPO, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    gunicorn = [str(REPO / ".venv/bin/gunicorn"), "benchviewer.wsgi", "--workers", "2", "--bind", f"127.0.0.1:{port}"]
    processes = [subprocess.Popen([*gunicorn, "--log-level", "warning"], cwd=REPO, env=env)]
    if redis_url:
        worker = [str(REPO / ".venv/bin/celery"), "-A", "benchviewer", "worker", "--concurrency", "1", "-l", "warning"]
        worker = ["nice", "-n", str(WORKER_NICE[0]), *worker] if WORKER_NICE[0] else worker
        processes.append(subprocess.Popen(worker, cwd=REPO, env=env))
    url = f"http://127.0.0.1:{port}"
    http = urllib3.PoolManager()
    headers = {"Authorization": f"Token {token}"}

    def stored() -> int:
        found = json.loads(http.request("GET", f"{url}/api/trials/?search={TRIAL}", headers=headers).data)
        rows = [t for t in found.get("results", []) if t.get("name") == TRIAL]
        return spans if rows and rows[0]["status"] == "passed" and rows[0]["step_count"] == spans - 1 else 0

    try:
        wait_for_http(url + "/", processes[0])
        yield {"name": name, "url": url, "headers": headers, "stored": stored}
    finally:
        stop(processes)
        shutil.rmtree(data_dir, ignore_errors=True)


def measured(targets: list[dict], spans: list, batch: int) -> dict[str, dict]:
    """The targets sent the spans (in turns, when several) and each one's queryable time (perf_counter)."""
    results = send(targets, spans, batch)
    waiting = list(targets)  # (all polled together: each is timed from its own first batch)

    def one_more() -> bool:
        for target in [t for t in waiting if t["stored"]() >= len(spans)]:
            results[target["name"]]["queryable"] = time.perf_counter()
            waiting.remove(target)
        return not waiting

    wait_until(one_more, ", ".join(t["name"] for t in waiting))
    return results


WORKER_NICE = [0]  # --worker-nice: the Celery worker's niceness (0: as docs/deploy.md runs it)

TOKEN_SCRIPT = """
import django; django.setup()
from tests.live.helpers import runner_client
print(runner_client(name="bench-otlp")[1])
"""


def report(name: str, result: dict, spans: int) -> float:
    """One line of figures; the seconds from the first batch sent to the trace queryable."""
    times = result["times"]
    seconds = (result["accepted"] - result["first"]) or 1e-9
    queryable = result["queryable"] - result["first"]
    print(
        f"{name:<34} batch median {statistics.median(times):7.0f} ms  p95 {p95(times):7.0f} ms  "
        f"max {max(times):7.0f} ms  {spans / seconds:7,.0f} spans/s accepted  queryable at {queryable:6.1f} s"
    )
    return queryable


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="300 spans, a smoke run")
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--phoenix", default="", help="the `phoenix` command of Phoenix's own venv")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    parser.add_argument("--redis-url", default="")
    parser.add_argument(
        "--interleave", action="store_true",
        help="Phoenix and Benchviewer deployed up at once, each batch sent to one then the other (the same load "
        "on both; they store at the same time too); embedded not run",
    )  # fmt: skip
    parser.add_argument("--worker-nice", type=int, default=0, help="run the Celery worker under `nice -n N`")
    args = parser.parse_args()
    WORKER_NICE[0] = args.worker_nice
    if args.quick:
        args.spans = 300
    spans = made_spans(args.spans)
    order = "in turns, " if args.interleave else ""
    print(f"{args.spans:,} spans (one trace, the root last) in batches of {args.batch}, {order}the SDK's exporter:")
    deployed = "Benchviewer deployed (PG, Celery)" if args.redis_url else "Benchviewer (PostgreSQL)"
    if args.database_url:
        psql(args.database_url, f'DROP DATABASE IF EXISTS "{args.database_url.rsplit("/", 1)[1]}"')
        psql(args.database_url, f'CREATE DATABASE "{args.database_url.rsplit("/", 1)[1]}"')
    results: dict[str, float] = {}
    with ExitStack() as servers:
        if args.interleave:
            if not (args.phoenix and args.database_url):
                raise SystemExit("--interleave needs --phoenix and --database-url")
            ours = benchviewer(deployed, args.spans, args.database_url, args.redis_url or None)
            targets = [servers.enter_context(phoenix(args.phoenix)), servers.enter_context(ours)]
            for name, result in measured(targets, spans, args.batch).items():
                results[name] = report(name, result, args.spans)
        else:
            runs = [phoenix(args.phoenix)] if args.phoenix else []
            runs.append(benchviewer("Benchviewer embedded (SQLite)", args.spans, None, None))
            if args.database_url:
                runs.append(benchviewer(deployed, args.spans, args.database_url, args.redis_url or None))
            for run in runs:
                with run as target:
                    result = measured([target], spans, args.batch)[target["name"]]
                    results[target["name"]] = report(target["name"], result, args.spans)
    if "Phoenix" in results:
        for name, seconds in results.items():
            if name != "Phoenix":
                print(f"{name}: queryable at {seconds / results['Phoenix']:.2f}x Phoenix's time (goal 0.25x)")


if __name__ == "__main__":
    main()
