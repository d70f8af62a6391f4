"""Deterministic generator of realistic Harbor trial packs, for the demo and for benchmarks.

Everything here is produced by code from a seed: no reference file is copied. The same
arguments always give byte-identical files (no clock, no absolute output paths, no
process-dependent hashing), so tests can compare trees and benchmarks can be repeated.

Layout written by `write_job` (one Harbor job directory):

    <job>/config.json, result.json, lock.json, job.log
    <job>/<task[:32]>__<7 chars>/
        config.json, result.json, lock.json, trial.log, exception.txt (errored only),
        benchmark-trial-pack.json,
        agent/trajectory.json, agent/runtime-events.jsonl, agent/context-events.jsonl,
        verifier/reward.json | reward.txt, reward-details.json, test-stdout.txt, ctrf.json,
        artifacts/manifest.json + the artifact files at their destinations.

Pure Python (stdlib + orjson); no Django imports, so scripts can use it directly.
"""

from __future__ import annotations

import hashlib
import math
import random
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson

DATASET_NAME = "benchviewer-demo/terminal-tasks"
DATASET_VERSION = "2026.11"
ATIF_VERSION = "ATIF-v1.7"
LIME_SCHEMA = "lime-profile-0.4.0"
CONTEXT_SCHEMA = "0.1.1"
RUNTIME_ID = "lime_runtime_demo"
# The one secret every trial carries in a masked context item. Importers must drop it.
SECRET = "sk-demo-REDACTED-SECRET-0001"
# trial_uri / trials_dir point at the machine that "ran" the job, never at the output dir,
# so two runs into different directories stay byte-identical.
RUN_ROOT = "/srv/harbor/jobs"
AGENT_VERSION = {"baseline": "0.9.2", "candidate": "0.9.3+feedback-v3"}
BASE_TIME = datetime(2026, 11, 2, 14, 0, 0, tzinfo=UTC)
AGENT_TIMEOUT_SEC = 900.0
SHORT_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
FAILURE_CATEGORIES = ("tool-result-missing", "stream-stuck", "permission-bypass", "stale-success")
INCOMPLETE_KINDS = ("trajectory", "reward_details", "manifest", "trial_pack")
# Prices in units of 1e-7 USD per token (3 $/M input, 0.30 $/M cached, 15 $/M output).
# Integer units keep `cost_usd` sums exact: total = sum(step units) / 1e7.
PRICE_INPUT, PRICE_CACHED, PRICE_OUTPUT = 30, 3, 150
MAX_CONTEXT_TOKENS = 190_000

JSON_OPTS = orjson.OPT_INDENT_2


# --------------------------------------------------------------------------------------
# Small deterministic helpers
# --------------------------------------------------------------------------------------


def _rng(*parts: object) -> random.Random:
    """A Random seeded from a string key: stable across runs and PYTHONHASHSEED."""
    return random.Random("/".join(str(p) for p in parts))


def _uuid(*parts: object) -> str:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _hex(n: int, *parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()[:n]


def _iso(dt: datetime) -> str:
    """Trial timestamps: UTC with a Z, microseconds, as Harbor writes them."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _iso_ms(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _naive(dt: datetime) -> str:
    # Job result.json times are naive in real Harbor output (local time of the runner);
    # our pretend runner is on UTC.
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def _secs(rng: random.Random, lo: float, hi: float) -> timedelta:
    return timedelta(microseconds=round(rng.uniform(lo, hi) * 1_000_000))


def _dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=JSON_OPTS) + b"\n")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


# --------------------------------------------------------------------------------------
# The task catalogue (shared by both jobs)
# --------------------------------------------------------------------------------------

# name, instruction, the main file the agent edits, pytest test names
_TASKS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "configure-nginx-reverse-proxy",
        "Configure nginx so that /api is proxied to the service "
        "on port 8080 and static files are served from /srv/www.",
        "/etc/nginx/conf.d/app.conf",
        ("test_proxy_pass", "test_static_root", "test_nginx_config_valid"),
    ),
    (
        "fix-failing-pytest-suite",
        "The test suite in /app is failing after a dependency upgrade. Make all tests pass without deleting tests.",
        "/app/src/parser.py",
        ("test_parse_dates", "test_parse_numbers", "test_roundtrip", "test_no_tests_deleted"),
    ),
    (
        "git-recover-lost-commit",
        "A commit with the release notes was lost after a hard reset. Recover it onto the main branch.",
        "/repo/RELEASE_NOTES.md",
        ("test_commit_on_main", "test_notes_content"),
    ),
    (
        "sqlite-migrate-schema",
        "Add a non-null `created_at` column to the `orders` table in "
        "/data/shop.db, backfilling existing rows with the import date.",
        "/app/migrate.sql",
        ("test_column_exists", "test_backfill", "test_row_count_unchanged"),
    ),
    (
        "write-log-rotation-script",
        "Write /usr/local/bin/rotate-logs that gzips logs older "
        "than 7 days in /var/log/app and keeps at most 10 archives.",
        "/usr/local/bin/rotate-logs",
        ("test_script_executable", "test_gzip_old", "test_keep_ten"),
    ),
    (
        "python-cli-add-subcommand",
        "Add an `export --format csv|json` subcommand to the CLI in /app/cli.py with tests.",
        "/app/cli.py",
        ("test_export_csv", "test_export_json", "test_help_lists_export"),
    ),
    (
        "docker-compose-healthcheck",
        "Add healthchecks to every service in /app/docker-compose.yml and make `web` wait for a healthy `db`.",
        "/app/docker-compose.yml",
        ("test_healthchecks_present", "test_depends_on_condition"),
    ),
    (
        "rust-fix-borrow-checker",
        "The crate in /app does not compile. Fix the borrow checker "
        "errors without using unsafe or clone on the hot path.",
        "/app/src/cache.rs",
        ("test_cargo_build", "test_cargo_test", "test_no_unsafe"),
    ),
    (
        "csv-dedupe-large-file",
        "Deduplicate /data/events.csv (2M rows) by event_id keeping the "
        "latest timestamp; write /data/events.dedup.csv.",
        "/app/dedupe.py",
        ("test_output_exists", "test_unique_ids", "test_latest_kept", "test_memory_bound"),
    ),
    (
        "systemd-timer-backup",
        "Create a systemd timer that runs /opt/backup.sh nightly at 02:30 and persists across reboots.",
        "/etc/systemd/system/backup.timer",
        ("test_timer_unit", "test_service_unit", "test_persistent"),
    ),
    (
        "regex-extract-invoice-ids",
        "Write /app/extract.py that prints every invoice id "
        "(INV-YYYY-NNNNN) found in /data/mail/*.eml, sorted and unique.",
        "/app/extract.py",
        ("test_known_ids", "test_sorted_unique", "test_ignores_quoted"),
    ),
    (
        "postgres-slow-query-index",
        "The report query in /app/report.sql takes 40s. Add an index "
        "so that it runs under 1s without changing results.",
        "/app/migrations/0007_index.sql",
        ("test_index_exists", "test_query_plan_uses_index", "test_results_unchanged"),
    ),
    (
        "bash-parallel-downloads",
        "Make /app/fetch.sh download the URLs in urls.txt with at most 4 parallel jobs and retry failures twice.",
        "/app/fetch.sh",
        ("test_parallelism", "test_retries", "test_all_files_present"),
    ),
    (
        "flask-add-rate-limit",
        "Add a per-IP rate limit of 60 requests/minute to the Flask app "
        "in /app/app.py returning HTTP 429 with Retry-After.",
        "/app/app.py",
        ("test_under_limit", "test_over_limit_429", "test_retry_after_header"),
    ),
    (
        "node-fix-memory-leak",
        "The Node service in /app leaks memory under load. Find and fix "
        "the leak; heap must stay under 200MB after 10k requests.",
        "/app/server.js",
        ("test_heap_bound", "test_responses_ok"),
    ),
    (
        "ssl-cert-renewal-check",
        "Write a script that exits non-zero when any certificate in /etc/ssl/app expires within 14 days.",
        "/usr/local/bin/check-certs",
        ("test_expiring_detected", "test_valid_ok", "test_exit_codes"),
    ),
    (
        "makefile-parallel-build",
        "Fix the Makefile in /app so `make -j8` builds correctly; today it races on generated headers.",
        "/app/Makefile",
        ("test_parallel_build", "test_incremental_build"),
    ),
    (
        "k8s-manifest-resource-limits",
        "Add CPU and memory requests/limits to every container in /app/k8s/*.yaml following the policy in POLICY.md.",
        "/app/k8s/deployment.yaml",
        ("test_limits_present", "test_policy_values", "test_yaml_valid"),
    ),
    (
        "json-schema-validate-configs",
        "Validate every file in /app/configs against schema.json and fix the three invalid ones.",
        "/app/configs/billing.json",
        ("test_all_valid", "test_values_preserved"),
    ),
    (
        "go-race-condition-fix",
        "`go test -race ./...` reports a data race in /app/worker. Fix it without a global lock.",
        "/app/worker/pool.go",
        ("test_race_free", "test_throughput", "test_no_global_mutex"),
    ),
    (
        "awk-report-summary",
        "Produce /out/summary.txt with per-country totals from /data/sales.tsv using only awk/sort.",
        "/app/summary.sh",
        ("test_totals", "test_sorted", "test_only_awk"),
    ),
    (
        "cron-env-path-bug",
        "A cron job fails with 'command not found' but works in a shell. Fix the crontab so it runs.",
        "/etc/cron.d/report",
        ("test_cron_path", "test_job_runs"),
    ),
    (
        "redis-cache-invalidation",
        "Stale prices are served from Redis after updates. Add cache invalidation on write in /app/prices.py.",
        "/app/prices.py",
        ("test_invalidated_on_write", "test_cache_hit_rate"),
    ),
    (
        "tar-incremental-backup",
        "Implement incremental backups of /srv/data with GNU tar snapshot files into /backups.",
        "/app/backup.sh",
        ("test_full_then_incremental", "test_restore"),
    ),
)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    instruction: str
    main_file: str
    tests: tuple[str, ...]
    checksum: str
    base_success: float  # probability of passing before any success_bias


def demo_tasks(count: int, seed: int = 0) -> list[TaskSpec]:
    """The dataset's tasks. Depends only on (count, seed), so both jobs share names and
    checksums."""
    out = []
    for i in range(count):
        name, instruction, main_file, tests = _TASKS[i % len(_TASKS)]
        if i >= len(_TASKS):  # benchmark sizes: reuse the catalogue with a suffix
            name = f"{name}-{i // len(_TASKS) + 1}"
        rng = _rng(seed, DATASET_NAME, name, "task")
        out.append(
            TaskSpec(
                name=name,
                instruction=instruction,
                main_file=main_file,
                tests=tests,
                checksum=hashlib.sha256(f"{DATASET_NAME}@{DATASET_VERSION}/{name}/{seed}".encode()).hexdigest(),
                base_success=rng.choice((0.2, 0.4, 0.55, 0.7, 0.85)),
            )
        )
    return out


# --------------------------------------------------------------------------------------
# Trajectory streaming
# --------------------------------------------------------------------------------------

TOOL_DEFINITIONS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the task container and return its output.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_sec": {"type": "integer"},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file from the task container.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or overwrite a file. May require approval.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
]

SYSTEM_PROMPT = (
    "You are an autonomous software engineer working in a Linux container. Use the tools "
    "bash, read_file and write_file to complete the task. Writes outside /app and /etc may "
    "need approval. When you are done, reply with a short summary and no tool calls."
)

XSS_SNIPPET = (
    '<div class="comment">Nice build!</div>\n'
    "<script>alert(1)</script>\n"
    "<img src=x onerror=alert(2)>\n"
    '<a href="javascript:alert(3)">details</a>\n'
)

_WORDS = (
    "build ok warning deprecated cache miss hit retry connect timeout listening worker pool "
    "config loaded parsed index table row column commit branch merge upstream request "
    "response status handler module import error trace frame"
).split()
_DIRS = ("/app/src", "/app/tests", "/etc/app", "/var/log/app", "/srv/data", "/app/lib")


def _text_pool(rng: random.Random, min_bytes: int) -> str:
    """Realistic-looking terminal output to cut observations from (built once per file)."""
    lines: list[str] = []
    size = 0
    n = 0
    while size < min_bytes:
        n += 1
        kind = n % 4
        if kind == 0:
            line = f"{rng.choice(_DIRS)}/{rng.choice(_WORDS)}_{n % 97}.py:{rng.randint(1, 400)}: "
            line += " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
        elif kind == 1:
            line = f"-rw-r--r-- 1 root root {rng.randint(80, 99999):>6} Nov  2 13:{n % 60:02d} "
            line += f"{rng.choice(_WORDS)}-{n}.{rng.choice(('py', 'txt', 'json', 'log'))}"
        elif kind == 2:
            line = f"[{n:05d}] INFO {rng.choice(_WORDS)}: " + " ".join(
                rng.choice(_WORDS) for _ in range(rng.randint(4, 12))
            )
        else:
            line = f"    {rng.randint(1, 999):>4}\t" + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 10)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


@dataclass
class ToolCallRecord:
    """What the runtime-events and reward-details writers need to know about a call."""

    step_id: int
    tool_call_id: str
    function_name: str
    path: str
    started_at: datetime
    completed_at: datetime | None  # None: no result was recorded (tool-result-missing)
    output_bytes: int
    gated: bool = False  # the write that asked for permission


@dataclass
class TrajectorySpec:
    steps: int
    observation_bytes: int
    seed: object
    session_id: str
    model: str
    agent_name: str = "terminus-2"
    agent_version: str = "0.9.2"
    instruction: str = "Make the failing test suite in /app pass."
    main_file: str = "/app/src/main.py"
    started_at: datetime = BASE_TIME
    budget_sec: float | None = None  # agent steps are spread over this many seconds
    compaction: bool = False
    xss: bool = False
    permission: str | None = None  # approve | deny | bypass: the first write_file is gated
    missing_result: bool = False  # one tool call never gets a result
    cut_off: bool = False  # timeout/crash: the last step's tool call has no result
    stale_success: bool = False  # final message claims success anyway


@dataclass
class TrajectoryTotals:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_units: int = 0  # 1e-7 USD
    steps: int = 0
    llm_calls: int = 0
    finished_at: datetime = BASE_TIME
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    compaction_step: int | None = None
    copied_step: int | None = None
    xss_step: int | None = None

    @property
    def cost_usd(self) -> float:
        return self.cost_units / 1e7


class _NullSink:
    """Stands in for the file when a trial's trajectory is 'lost' but totals are needed."""

    def write(self, data: bytes) -> int:
        return len(data)


def _tool_arguments(fn: str, path: str, rng: random.Random, main_file: str) -> dict[str, Any]:
    if fn == "bash":
        cmd = rng.choice(
            (
                "ls -la /app && git -C /app status --short",
                f"grep -rn 'TODO\\|FIXME' {path.rsplit('/', 1)[0]} | head -50",
                "cd /app && python -m pytest -x -q 2>&1 | tail -40",
                "journalctl -u app --no-pager -n 60",
                f"sed -n '1,80p' {main_file}",
                "cat /etc/os-release && df -h /",
            )
        )
        return {"command": cmd, "timeout_sec": 120}
    if fn == "read_file":
        return {"path": path}
    body = f"# patched by agent\n# target: {path}\n" + "\n".join(
        f"line_{i} = {rng.randint(0, 9999)}" for i in range(rng.randint(3, 12))
    )
    return {"path": path, "content": body + "\n"}


def _iter_plan(spec: TrajectorySpec, rng: random.Random) -> Iterator[tuple[str, int]]:
    """Yield (kind, step_id) for every step: system, user, agent, compaction, copied, final."""
    total = max(3, spec.steps)
    compaction_at = 3 + (total - 3) // 2 if spec.compaction and total >= 9 else None
    yield "system", 1
    yield "user", 2
    for step_id in range(3, total + 1):
        if step_id == total and not spec.cut_off:  # a cut-off run has no final message
            yield "final", step_id
        elif compaction_at is not None and step_id == compaction_at:
            yield "compaction", step_id
        elif compaction_at is not None and step_id == compaction_at + 1:
            yield "copied", step_id
        else:
            yield "agent", step_id


def _stream_trajectory(out: BinaryIO | _NullSink, spec: TrajectorySpec) -> TrajectoryTotals:
    """Write one ATIF trajectory step by step; never holds more than one step in memory."""
    rng = _rng(spec.seed, spec.session_id, "trajectory")
    pool = _text_pool(rng, max(64 * 1024, 2 * spec.observation_bytes))
    totals = TrajectoryTotals()
    n_steps = max(3, spec.steps)
    n_agent = max(1, n_steps - 2)
    # Average spacing of agent steps; a budget (timeouts) squeezes them into a window.
    mean_dt = (spec.budget_sec / n_agent) if spec.budget_sec else rng.uniform(6.0, 18.0)
    mean_dt = max(mean_dt, 0.5)

    header = {
        "schema_version": ATIF_VERSION,
        "session_id": spec.session_id,
        "agent": {
            "name": spec.agent_name,
            "version": spec.agent_version,
            "model_name": spec.model,
            "tool_definitions": TOOL_DEFINITIONS,
        },
    }
    # The envelope is written around the steps by hand: '{...,"steps":[' step,step '],...}'.
    head = orjson.dumps(header)
    out.write(head[:-1] + b',"steps":[\n')

    now = spec.started_at
    context_tokens = 1200 + len(spec.instruction) // 4
    prev_prompt = 0
    call_no = 0
    agent_no = 0
    write_count = 0
    read_count = 0
    missing_done = False
    # The last step with tool calls: the one before the final message, or the very last
    # one when the run was cut off.
    last_agent_step = n_steps if spec.cut_off else n_steps - 1
    ts = now

    for kind, step_id in _iter_plan(spec, rng):
        step: dict[str, Any] = {"step_id": step_id, "timestamp": _iso_ms(now)}
        if kind == "system":
            step |= {"source": "system", "message": SYSTEM_PROMPT}
        elif kind == "user":
            step |= {"source": "user", "message": spec.instruction}
        elif kind == "compaction":
            now += _secs(rng, 0.5, 2.0)
            step["timestamp"] = _iso_ms(now)
            summary = (
                f"Summary of steps 3-{step_id - 1}: explored the repository, read "
                f"{spec.main_file}, ran the tests and identified the failing cases. "
                "Next: apply the fix and re-run the tests."
            )
            step |= {
                "source": "system",
                "message": "Context window nearly full; earlier turns were summarized.",
                "observation": {"results": [{"source_call_id": None, "content": summary}]},
                "extra": {"context_management": {"type": "compaction", "boundary": "replace"}},
            }
            totals.compaction_step = step_id
            context_tokens = 1200 + len(summary) // 4 + len(spec.instruction) // 4
            prev_prompt = 0
        elif kind == "copied":
            step |= {"source": "user", "message": spec.instruction, "is_copied_context": True}
            totals.copied_step = step_id
        else:
            agent_no += 1
            now += timedelta(microseconds=round(mean_dt * rng.uniform(0.8, 1.2) * 1_000_000))
            step["timestamp"] = _iso_ms(now)
            completion = rng.randint(60, 700)
            prompt = min(context_tokens, MAX_CONTEXT_TOKENS)
            cached = min(prev_prompt, prompt) if prev_prompt else min(1024, prompt)
            units = (prompt - cached) * PRICE_INPUT + cached * PRICE_CACHED
            units += completion * PRICE_OUTPUT
            step |= {"source": "agent", "model_name": spec.model}
            tool_calls: list[dict[str, Any]] = []
            results: list[dict[str, Any]] = []
            if kind == "final":
                step["message"] = (
                    "All tests pass now; the fix is complete."
                    if spec.stale_success
                    else f"Done. I updated {spec.main_file} and re-ran the checks; "
                    "see the summary in /app/output/summary.md."
                )
                step["reasoning_content"] = "The last command finished; summarizing the changes."
            else:
                n_calls = 2 if rng.random() < 0.2 else 1
                cursor = now  # calls of one step run one after another
                for k in range(n_calls):
                    call_no += 1
                    if agent_no == 1 and k == 0:
                        fn = "bash"
                    elif agent_no == 2 and k == 0:
                        fn = "read_file"
                    elif agent_no == 3 and k == 0:
                        fn = "write_file"
                    else:
                        fn = rng.choices(("bash", "read_file", "write_file"), (5, 3, 2))[0]
                    path = spec.main_file if fn != "bash" else "/app"
                    if fn == "read_file" and read_count % 3 == 2:
                        path = f"{rng.choice(_DIRS)}/{rng.choice(_WORDS)}.py"
                    call_id = f"call_{call_no}"
                    args = _tool_arguments(fn, path, rng, spec.main_file)
                    gated = fn == "write_file" and write_count == 0 and spec.permission
                    # Content of the observation, sized to observation_bytes.
                    if fn == "write_file":
                        write_count += 1
                        if gated and spec.permission == "deny":
                            content = f"Error: permission denied: write to {path} blocked by policy:default-deny-writes"
                        else:
                            content = f"Wrote {len(args['content'])} bytes to {path}"
                    else:
                        if fn == "read_file":
                            read_count += 1
                        off = rng.randrange(0, max(1, len(pool) - spec.observation_bytes))
                        off = pool.find("\n", off) + 1
                        content = pool[off : off + spec.observation_bytes]
                        if len(content) < spec.observation_bytes:
                            content += pool[: spec.observation_bytes - len(content)]
                        if spec.xss and totals.xss_step is None and fn == "read_file":
                            # Untrusted markup inside a tool result: the viewer must escape it.
                            args = {"path": "/app/templates/comments.html"}
                            content = XSS_SNIPPET + content
                            totals.xss_step = step_id
                    tool_calls.append({"tool_call_id": call_id, "function_name": fn, "arguments": args})
                    started = cursor + _secs(rng, 0.05, 0.3)
                    cut = spec.cut_off and step_id == last_agent_step and k == n_calls - 1
                    lose = (
                        spec.missing_result
                        and not missing_done
                        and fn != "write_file"
                        and ((agent_no >= 3 and fn == "bash") or step_id == last_agent_step)
                    )
                    denied = gated and spec.permission == "deny"
                    if cut or lose:
                        missing_done = missing_done or lose
                        completed = None
                    else:
                        results.append({"source_call_id": call_id, "content": content})
                        completed = started + _secs(rng, 0.05, min(1.5, mean_dt * 0.3))
                    cursor = completed or started
                    totals.tool_calls.append(
                        ToolCallRecord(
                            step_id=step_id,
                            tool_call_id=call_id,
                            function_name=fn,
                            path=args.get("path", "") if fn != "bash" else "",
                            started_at=started,
                            completed_at=None if denied else completed,
                            output_bytes=len(content.encode()),
                            gated=bool(gated),
                        )
                    )
                    context_tokens += len(content) // 4 + 40
                step["message"] = rng.choice(
                    (
                        "",
                        "Let me look at the current state first.",
                        "Running the tests to see what fails.",
                        f"I'll update {spec.main_file}.",
                        "Checking the output of the last command.",
                    )
                )
                step["reasoning_content"] = (
                    f"Step {agent_no}: the task asks to {spec.instruction[:60].lower()}... "
                    f"Next I call {', '.join(c['function_name'] for c in tool_calls)}."
                )
                step["tool_calls"] = tool_calls
                if results:
                    step["observation"] = {"results": results}
            step["metrics"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "cached_tokens": cached,
                "cost_usd": units / 1e7,
            }
            totals.prompt_tokens += prompt
            totals.completion_tokens += completion
            totals.cached_tokens += cached
            totals.cost_units += units
            totals.llm_calls += 1
            prev_prompt = prompt
            context_tokens += completion
        if step_id > 1:
            out.write(b",\n")
        out.write(orjson.dumps(step))
        ts = now
        totals.steps = step_id

    totals.finished_at = ts
    tail = {
        "final_metrics": {
            "total_prompt_tokens": totals.prompt_tokens,
            "total_completion_tokens": totals.completion_tokens,
            "total_cached_tokens": totals.cached_tokens,
            "total_cost_usd": totals.cost_usd,
            "total_steps": totals.steps,
        }
    }
    out.write(b"\n]," + orjson.dumps(tail)[1:] + b"\n")
    return totals


def write_trajectory(
    path: Path,
    *,
    steps: int,
    observation_bytes: int,
    seed: object,
    session_id: str,
    model: str,
) -> None:
    """Stream an ATIF trajectory of `steps` steps to `path` without building it in memory.

    Size is roughly steps * observation_bytes, so a 200 MB file is e.g. 20_000 steps of
    10 kB observations.
    """
    spec = TrajectorySpec(
        steps=steps,
        observation_bytes=observation_bytes,
        seed=seed,
        session_id=session_id,
        model=model,
    )
    _write_trajectory_file(path, spec)


def _write_trajectory_file(path: Path, spec: TrajectorySpec) -> TrajectoryTotals:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb", buffering=1 << 20) as fh:
        return _stream_trajectory(fh, spec)


# --------------------------------------------------------------------------------------
# Planning a job: every trial's outcome is decided before anything is written
# --------------------------------------------------------------------------------------


@dataclass
class TrialPlan:
    index: int
    task: TaskSpec
    attempt: int
    trial_name: str
    outcome: str  # passed | failed | timeout | crash | no_verifier
    passed_tests: int
    efficiency: float
    missing: str | None = None  # one of INCOMPLETE_KINDS
    reward_txt: bool = False  # only verifier/reward.txt, no reward.json
    compaction: bool = False
    xss: bool = False
    permission: str | None = None  # approve | deny | bypass
    missing_context: bool = False
    failure_category: str = "none"

    @property
    def errored(self) -> bool:
        return self.outcome in ("timeout", "crash", "no_verifier")

    @property
    def passed(self) -> bool:
        return self.passed_tests == len(self.task.tests)


def _trial_name(task: str, rng: random.Random, taken: set[str]) -> str:
    while True:
        name = f"{task[:32]}__{''.join(rng.choice(SHORT_ALPHABET) for _ in range(7))}"
        if name not in taken:
            taken.add(name)
            return name


def _plan_job(
    job_name: str,
    role: str,
    tasks: list[TaskSpec],
    attempts: int,
    seed: int,
    success_bias: float,
    with_extras: bool,
) -> list[TrialPlan]:
    plans: list[TrialPlan] = []
    taken: set[str] = set()
    for task in tasks:
        for attempt in range(1, attempts + 1):
            rng = _rng(seed, job_name, task.name, attempt)
            # The pass/fail draw is shared by both jobs (common random numbers), so the
            # candidate's bias shows up as a clean improvement instead of noise.
            u = _rng(seed, task.name, attempt, "success").random()
            passed = u < task.base_success + success_bias
            n_tests = len(task.tests)
            passed_tests = n_tests if passed else rng.randint(0, n_tests - 1)
            # ~9% errored: 3.5% timeouts (reward still valid), 3% agent crashes (verifier
            # still ran), 2.5% runner failures where the verifier never ran (no reward).
            x = rng.random()
            if x < 0.035:
                outcome = "timeout"
            elif x < 0.065:
                outcome = "crash"
            elif x < 0.09:
                outcome = "no_verifier"
            else:
                outcome = "passed" if passed else "failed"
            if outcome in ("crash", "no_verifier"):
                passed_tests = 0
            plan = TrialPlan(
                index=len(plans),
                task=task,
                attempt=attempt,
                trial_name=_trial_name(task.name, rng, taken),
                outcome=outcome,
                passed_tests=passed_tests,
                efficiency=round(rng.uniform(0.55, 0.98) if passed else rng.uniform(0.1, 0.6), 3),
                reward_txt=rng.random() < 0.12,
                compaction=rng.random() < 0.08,
                xss=rng.random() < 0.06,
                missing_context=rng.random() < 0.15,
            )
            p = rng.random()
            if p < 0.15:
                plan.permission = "approve"
            elif p < 0.25:
                plan.permission = "deny"
            if with_extras and rng.random() < 0.10:
                plan.missing = rng.choice(INCOMPLETE_KINDS)
            plans.append(plan)

    _guarantee_variety(plans, role, with_extras)
    for plan in plans:
        plan.failure_category = _failure_category(plan, _rng(seed, job_name, plan.trial_name))
    return plans


def _guarantee_variety(plans: list[TrialPlan], role: str, with_extras: bool) -> None:
    """Make sure every case the viewer must handle exists, whatever the seed.

    Fixed slots are picked from the back half so small jobs still get most of them.
    """
    n = len(plans)
    if n == 0:
        return

    def slot(k: int) -> TrialPlan:
        return plans[(n - 1 - 2 * k) % n]

    if not any(p.outcome == "no_verifier" for p in plans):
        slot(0).outcome, slot(0).passed_tests = "no_verifier", 0
    if n > 2 and not any(p.outcome == "timeout" for p in plans):
        slot(1).outcome = "timeout"
    if n > 4 and not any(p.outcome == "crash" for p in plans):
        slot(2).outcome, slot(2).passed_tests = "crash", 0
    if not any(p.compaction for p in plans):
        plans[min(1, n - 1)].compaction = True
    if not any(p.xss for p in plans):
        plans[min(2, n - 1)].xss = True
    if not any(p.missing_context for p in plans):
        plans[0].missing_context = True
    if not any(p.reward_txt for p in plans if not p.errored):
        plans[min(3, n - 1)].reward_txt = True
    healthy = [p for p in plans if not p.errored] or plans
    if role == "candidate":
        # Exactly one permission bypass: a denied write that still completed.
        bypass = next((p for p in healthy if p.permission == "deny"), healthy[0])
        bypass.permission = "bypass"
    if with_extras and len(healthy) >= 12:
        for k, kind in enumerate(INCOMPLETE_KINDS):
            if not any(p.missing == kind for p in plans):
                healthy[4 + 2 * k].missing = kind


def _failure_category(plan: TrialPlan, rng: random.Random) -> str:
    if plan.permission == "bypass":
        return "permission-bypass"
    if plan.outcome == "timeout":
        return "stream-stuck"
    if plan.outcome == "crash":
        return "tool-result-missing"
    if plan.outcome == "no_verifier":
        return "stream-stuck"
    if plan.outcome == "passed":
        return "none"
    return rng.choice(("tool-result-missing", "stale-success"))


# --------------------------------------------------------------------------------------
# Writing one trial
# --------------------------------------------------------------------------------------


@dataclass
class JobContext:
    out: Path
    job_name: str
    job_id: str
    role: str
    configuration_id: str
    agent: str
    model: str
    agent_version: str
    seed: int
    steps_per_trial: int
    observation_bytes: int
    with_extras: bool

    @property
    def model_short(self) -> str:
        return self.model.split("/", 1)[-1]

    @property
    def provider(self) -> str | None:
        return self.model.split("/", 1)[0] if "/" in self.model else None


@dataclass
class TrialSummary:
    """What the job's result.json needs from each trial."""

    trial_name: str
    rewards: dict[str, float] | None
    exception_type: str | None
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_units: int
    finished_at: datetime


def _rewards(plan: TrialPlan) -> dict[str, float] | None:
    if plan.outcome == "no_verifier":
        return None
    n = len(plan.task.tests)
    return {
        "reward": 1.0 if plan.passed_tests == n else 0.0,
        "correctness": round(plan.passed_tests / n, 4),
        "efficiency": plan.efficiency,
    }


def _traceback(plan: TrialPlan, ctx: JobContext) -> tuple[str, str, str]:
    """(type, message, traceback) in the shape Harbor records."""
    harbor = "/srv/harbor/.venv/lib/python3.12/site-packages/harbor"
    if plan.outcome == "timeout":
        msg = f"Agent execution timed out after {AGENT_TIMEOUT_SEC} seconds"
        tb = (
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.12/asyncio/tasks.py", line 520, in wait_for\n'
            "    return await fut\n"
            "           ^^^^^^^^^\n"
            "asyncio.exceptions.CancelledError\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "Traceback (most recent call last):\n"
            f'  File "{harbor}/trial/trial.py", line 412, in _execute_agent\n'
            "    await asyncio.wait_for(\n"
            '  File "/usr/lib/python3.12/asyncio/tasks.py", line 519, in wait_for\n'
            "    async with timeouts.timeout(timeout):\n"
            "TimeoutError\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n"
            f'  File "{harbor}/trial/trial.py", line 418, in _execute_agent\n'
            "    raise AgentTimeoutError(\n"
            f"harbor.trial.errors.AgentTimeoutError: {msg}\n"
        )
        return "AgentTimeoutError", msg, tb
    if plan.outcome == "crash":
        msg = f"{ctx.agent} runner exited with code 137 while a tool call was running (OOM?)"
    else:
        msg = f"{ctx.agent} runner failed: event stream closed without a final message"
    tb = (
        "Traceback (most recent call last):\n"
        f'  File "{harbor}/trial/trial.py", line 405, in _execute_agent\n'
        "    await asyncio.wait_for(\n"
        '  File "/usr/lib/python3.12/asyncio/tasks.py", line 520, in wait_for\n'
        "    return await fut\n"
        "           ^^^^^^^^^\n"
        f'  File "{harbor}/agents/installed/base.py", line 233, in run\n'
        '    raise RuntimeError(f"{self.name()} runner failed: {detail}")\n'
        f"RuntimeError: {msg}\n"
    )
    return "RuntimeError", msg, tb


def _ctrf(plan: TrialPlan, rng: random.Random, start: datetime) -> dict[str, Any]:
    t = start.timestamp()
    tests = []
    failing = set(rng.sample(range(len(plan.task.tests)), len(plan.task.tests) - plan.passed_tests))
    for i, name in enumerate(plan.task.tests):
        duration = round(rng.uniform(0.01, 3.5), 6)
        test: dict[str, Any] = {
            "name": f"test_outputs.py::{name}",
            "status": "failed" if i in failing else "passed",
            "raw_status": "call_failed" if i in failing else "passed",
            "duration": duration,
            "start": round(t, 6),
            "stop": round(t + duration, 6),
            "retries": 0,
            "file_path": "test_outputs.py",
        }
        if i in failing:
            test["message"] = "The test failed in the call phase due to an assertion error"
            test["trace"] = (
                f"def {name}():\n>       assert check_{name.removeprefix('test_')}(), "
                f'"{name} did not hold"\nE       AssertionError: {name} did not hold\n\n'
                f"/tests/test_outputs.py:{10 + 7 * i}: AssertionError"
            )
        tests.append(test)
        t += duration + 0.001
    n_failed = len(failing)
    return {
        "results": {
            "tool": {"name": "pytest", "version": "8.4.1"},
            "summary": {
                "tests": len(tests),
                "passed": len(tests) - n_failed,
                "failed": n_failed,
                "skipped": 0,
                "pending": 0,
                "other": 0,
                "start": round(start.timestamp(), 6),
                "stop": round(t, 6),
            },
            "tests": tests,
        }
    }


def _test_stdout(ctrf: dict[str, Any]) -> str:
    tests = ctrf["results"]["tests"]
    marks = "".join("." if t["status"] == "passed" else "F" for t in tests)
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.12.7, pytest-8.4.1, pluggy-1.6.0",
        "rootdir: /tests",
        "plugins: json-ctrf-0.3.5",
        f"collected {len(tests)} items",
        "",
        f"../tests/test_outputs.py {marks}",
        "",
    ]
    failed = [t for t in tests if t["status"] == "failed"]
    if failed:
        lines.append("=================================== FAILURES ===================================")
        for t in failed:
            lines += [f"____ {t['name'].split('::')[1]} ____", "", t["trace"], ""]
    summary = ctrf["results"]["summary"]
    secs = summary["stop"] - summary["start"]
    parts = [f"{summary['failed']} failed"] if summary["failed"] else []
    parts.append(f"{summary['passed']} passed")
    lines.append(f"========================= {', '.join(parts)} in {secs:.2f}s =========================")
    return "\n".join(lines) + "\n"


def _reward_details(plan: TrialPlan, rewards: dict[str, float], totals: TrajectoryTotals) -> dict[str, Any]:
    calls = totals.tool_calls
    test_call = next((c for c in reversed(calls) if c.function_name == "bash"), None)
    write_call = next((c for c in calls if c.function_name == "write_file"), None)

    def refs(call: ToolCallRecord | None) -> list[str]:
        return [f"step:{call.step_id}", f"tool:{call.tool_call_id}"] if call else []

    n = len(plan.task.tests)
    criteria = [
        {
            "name": "tests-pass",
            "score": rewards["correctness"],
            "weight": 0.7,
            "reasoning": f"{plan.passed_tests} of {n} verifier tests passed.",
            "evidence": refs(test_call),
        },
        {
            "name": "efficiency",
            "score": rewards["efficiency"],
            "weight": 0.2,
            "reasoning": f"Finished in {totals.steps} steps and {len(calls)} tool calls.",
            "evidence": [f"step:{totals.steps}"],
        },
        {
            "name": "no-denied-side-effects",
            "score": 0.0 if plan.permission == "bypass" else 1.0,
            "weight": 0.1,
            "reasoning": (
                "A write went through after the user/policy denied it."
                if plan.permission == "bypass"
                else "No write happened without approval."
            ),
            "evidence": refs(write_call),
        },
    ]
    return {"reward": rewards["reward"], "criteria": criteria}


def _trial_config(plan: TrialPlan, ctx: JobContext) -> dict[str, Any]:
    return {
        "task": {
            "path": f"datasets/terminal-tasks/{plan.task.name}",
            "name": plan.task.name,
            "source": DATASET_NAME,
        },
        "trial_name": plan.trial_name,
        "trials_dir": f"{RUN_ROOT}/{ctx.job_name}",
        "timeout_multiplier": 1.0,
        "agent": {
            "name": ctx.agent,
            "model_name": ctx.model,
            "kwargs": {"configuration_id": ctx.configuration_id},
        },
        "environment": {"type": "docker", "delete": True},
        "verifier": {"disable": False},
        "artifacts": ["/app/output/summary.md", "/logs/artifacts/agent-diff.patch"],
        "job_id": ctx.job_id,
    }


def _write_trial(ctx: JobContext, plan: TrialPlan, start: datetime) -> TrialSummary:
    tdir = ctx.out / plan.trial_name
    rng = _rng(ctx.seed, ctx.job_name, plan.trial_name, "write")
    extras = ctx.with_extras
    missing = plan.missing if extras else None
    session_id = _uuid(ctx.seed, ctx.job_name, plan.trial_name, "session")

    # --- timeline of the four phases ---
    env_start = start + _secs(rng, 0.05, 0.2)
    env_end = env_start + _secs(rng, 4, 35)
    setup_end = env_end + _secs(rng, 8, 60)
    exec_start = setup_end + _secs(rng, 0.0001, 0.001)
    steps = ctx.steps_per_trial
    budget = None
    if plan.outcome == "timeout":
        budget = AGENT_TIMEOUT_SEC * 0.8
    elif plan.outcome in ("crash", "no_verifier"):
        steps = max(4, steps // 2)  # the agent died halfway

    spec = TrajectorySpec(
        steps=steps,
        observation_bytes=ctx.observation_bytes,
        seed=ctx.seed,
        session_id=session_id,
        model=ctx.model_short,
        agent_name=ctx.agent,
        agent_version=ctx.agent_version,
        instruction=plan.task.instruction,
        main_file=plan.task.main_file,
        started_at=exec_start,
        budget_sec=budget,
        compaction=plan.compaction,
        xss=plan.xss,
        permission=plan.permission if extras else None,
        missing_result=plan.failure_category == "tool-result-missing" and not plan.errored,
        cut_off=plan.errored,
        stale_success=plan.failure_category == "stale-success",
    )
    traj_path = tdir / "agent" / "trajectory.json"
    if missing == "trajectory":
        totals = _stream_trajectory(_NullSink(), spec)
    else:
        totals = _write_trajectory_file(traj_path, spec)

    if plan.outcome == "timeout":
        exec_end = exec_start + timedelta(seconds=AGENT_TIMEOUT_SEC)
    else:
        exec_end = totals.finished_at + _secs(rng, 0.5, 3)
    rewards = _rewards(plan)
    verifier_timing = None
    if rewards is not None:
        ver_start = exec_end + _secs(rng, 0.3, 1.5)
        ver_end = ver_start + _secs(rng, 4, 30)
        verifier_timing = {"started_at": _iso(ver_start), "finished_at": _iso(ver_end)}
        finished = ver_end + _secs(rng, 0.1, 0.5)
    else:
        ver_start = ver_end = exec_end
        finished = exec_end + _secs(rng, 0.3, 1.5)

    exception = None
    if plan.errored:
        etype, emsg, etb = _traceback(plan, ctx)
        exception = {
            "exception_type": etype,
            "exception_message": emsg,
            "exception_traceback": etb,
            "occurred_at": _iso(exec_end),
        }

    # reward.txt holds only the headline number; Harbor turns it into {"reward": x}.
    recorded = rewards
    if rewards is not None and plan.reward_txt:
        recorded = {"reward": rewards["reward"]}
    config = _trial_config(plan, ctx)
    result = {
        "id": _uuid(ctx.seed, ctx.job_name, plan.trial_name, "id"),
        "task_name": plan.task.name,
        "trial_name": plan.trial_name,
        "trial_uri": f"file://{RUN_ROOT}/{ctx.job_name}/{plan.trial_name}",
        "task_id": {"path": f"datasets/terminal-tasks/{plan.task.name}"},
        "source": DATASET_NAME,
        "task_checksum": plan.task.checksum,
        "config": config,
        "agent_info": {
            "name": ctx.agent,
            "version": ctx.agent_version,
            "model_info": {"name": ctx.model_short, "provider": ctx.provider},
        },
        "agent_result": {
            "n_input_tokens": totals.prompt_tokens,
            "n_cache_tokens": totals.cached_tokens,
            "n_output_tokens": totals.completion_tokens,
            "cost_usd": totals.cost_usd,
            "rollout_details": None,
            "metadata": {
                "model_requests": totals.llm_calls,
                "tool_calls": len(totals.tool_calls),
                "configuration_id": ctx.configuration_id,
            },
        },
        "verifier_result": {"rewards": recorded} if recorded is not None else None,
        "verifier_environment_mode": "shared",
        "exception_info": exception,
        "started_at": _iso(start),
        "finished_at": _iso(finished),
        "environment_setup": {"started_at": _iso(env_start), "finished_at": _iso(env_end)},
        "agent_setup": {"started_at": _iso(env_end), "finished_at": _iso(setup_end)},
        "agent_execution": {"started_at": _iso(exec_start), "finished_at": _iso(exec_end)},
        "verifier": verifier_timing,
        "step_results": None,
    }
    _dump(tdir / "config.json", config)
    _dump(tdir / "result.json", result)

    # --- verifier output ---
    if rewards is not None:
        if plan.reward_txt:
            _write_text(tdir / "verifier" / "reward.txt", f"{rewards['reward']}\n")
        else:
            _dump(tdir / "verifier" / "reward.json", rewards)

    summary = TrialSummary(
        trial_name=plan.trial_name,
        rewards=recorded,
        exception_type=exception["exception_type"] if exception else None,
        input_tokens=totals.prompt_tokens,
        cached_tokens=totals.cached_tokens,
        output_tokens=totals.completion_tokens,
        cost_units=totals.cost_units,
        finished_at=finished,
    )
    if not extras:
        return summary

    # --- everything beyond the plain Harbor files ---
    _dump(tdir / "lock.json", _trial_lock(plan, ctx))
    _write_text(tdir / "trial.log", _trial_log(plan, ctx, result, totals))
    if exception:
        _write_text(tdir / "exception.txt", exception["exception_traceback"])
    if rewards is not None:
        ctrf = _ctrf(plan, rng, ver_start + _secs(rng, 0.5, 2))
        _dump(tdir / "verifier" / "ctrf.json", ctrf)
        _write_text(tdir / "verifier" / "test-stdout.txt", _test_stdout(ctrf))
        if missing != "reward_details":
            _dump(tdir / "verifier" / "reward-details.json", _reward_details(plan, rewards, totals))
    manifest = _write_artifacts(tdir, plan, rng, totals, write_manifest=missing != "manifest")

    ids = _runtime_ids(ctx, plan, session_id)
    refs = _refs(ctx, plan)
    _write_jsonl(
        tdir / "agent" / "runtime-events.jsonl",
        _runtime_events(ctx, plan, ids, refs, totals, rewards, exec_start, finished),
    )
    _write_jsonl(
        tdir / "agent" / "context-events.jsonl",
        _context_events(ctx, plan, ids, totals, exec_start),
    )
    if missing != "trial_pack":
        pack = _trial_pack(ctx, plan, ids, refs, totals, rewards, manifest, start, finished)
        _dump(tdir / "benchmark-trial-pack.json", pack)
    return summary


def _trial_lock(plan: TrialPlan, ctx: JobContext) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "task": {
            "name": plan.task.name,
            "type": "local",
            "digest": f"sha256:{plan.task.checksum}",
            "source": DATASET_NAME,
        },
        "install_only": False,
        "timeout_multiplier": 1.0,
        "agent": {"name": ctx.agent, "model_name": ctx.model, "skills": []},
        "environment": {"type": "docker", "delete": True},
        "verifier": {"disable": False, "environment_mode": "shared"},
    }


def _trial_log(plan: TrialPlan, ctx: JobContext, result: dict[str, Any], totals: TrajectoryTotals) -> str:
    def line(ts: str, level: str, msg: str) -> str:
        return f"{ts.replace('T', ' ').rstrip('Z')[:23]} {level} harbor.trial: {msg}"

    lines = [
        line(
            result["started_at"],
            "INFO",
            f"Starting trial {plan.trial_name} (task={plan.task.name}, agent={ctx.agent}, model={ctx.model})",
        ),
        line(result["environment_setup"]["started_at"], "INFO", "Building docker environment"),
        line(result["agent_setup"]["started_at"], "INFO", f"Installing agent {ctx.agent}"),
        line(result["agent_execution"]["started_at"], "INFO", "Running agent"),
        line(
            result["agent_execution"]["finished_at"],
            "INFO",
            f"Agent finished: {totals.steps} steps, {len(totals.tool_calls)} tool calls",
        ),
    ]
    if result["exception_info"]:
        info = result["exception_info"]
        lines.append(
            line(
                info["occurred_at"],
                "ERROR",
                f"{info['exception_type']}: {info['exception_message']}",
            )
        )
    if result["verifier"]:
        lines.append(line(result["verifier"]["started_at"], "INFO", "Running verifier"))
        lines.append(
            line(
                result["verifier"]["finished_at"],
                "INFO",
                f"Rewards: {orjson.dumps(result['verifier_result']['rewards']).decode()}",
            )
        )
    else:
        lines.append(line(result["finished_at"], "WARNING", "Verifier skipped: agent failed"))
    lines.append(line(result["finished_at"], "INFO", "Trial finished"))
    return "\n".join(lines) + "\n"


def _write_artifacts(
    tdir: Path,
    plan: TrialPlan,
    rng: random.Random,
    totals: TrajectoryTotals,
    *,
    write_manifest: bool,
) -> list[dict[str, Any]]:
    adir = tdir / "artifacts"
    entries = [
        {
            "source": "/app/output/summary.md",
            "destination": "app/output/summary.md",
            "type": "file",
            "status": "ok",
            "service": "main",
        },
        {
            "source": "/logs/artifacts/agent-diff.patch",
            "destination": "logs/artifacts/agent-diff.patch",
            "type": "file",
            "status": "ok",
            "service": "main",
        },
    ]
    _write_text(
        adir / "app/output/summary.md",
        (
            f"# {plan.task.name}\n\nAttempt {plan.attempt}: {plan.outcome}.\n"
            f"Tests passed: {plan.passed_tests}/{len(plan.task.tests)}.\n"
            f"Steps: {totals.steps}, tool calls: {len(totals.tool_calls)}.\n"
        ),
    )
    _write_text(
        adir / "logs/artifacts/agent-diff.patch",
        (
            f"--- a{plan.task.main_file}\n+++ b{plan.task.main_file}\n@@ -1,3 +1,4 @@\n"
            f" # {plan.task.name}\n-old_value = {rng.randint(0, 99)}\n"
            f"+new_value = {rng.randint(100, 999)}\n+# patched by agent\n"
        ),
    )
    extra = rng.random()
    if extra < 0.3:
        entries.append(
            {
                "source": "/app/coverage.xml",
                "destination": "app/coverage.xml",
                "type": "file",
                "status": "empty",
                "service": "main",
            }
        )
        _write_text(adir / "app/coverage.xml", "")
    elif extra < 0.5 or plan.errored:
        # Collection failed: listed in the manifest, no file on disk.
        entries.append(
            {
                "source": "/var/log/app/server.log",
                "destination": "var/log/app/server.log",
                "type": "file",
                "status": "failed",
                "service": "main",
            }
        )
    if write_manifest:
        _dump(adir / "manifest.json", entries)
    return entries if write_manifest else []


# --------------------------------------------------------------------------------------
# Lime runtime events, Agent Context events and the trial evidence pack
# --------------------------------------------------------------------------------------


def _runtime_ids(ctx: JobContext, plan: TrialPlan, session_id: str) -> dict[str, str]:
    key = (ctx.seed, ctx.job_name, plan.trial_name)
    return {
        "runtimeId": RUNTIME_ID,
        "sessionId": session_id,
        "threadId": f"thread_{_hex(12, *key, 'thread')}",
        "turnId": f"turn_{_hex(12, *key, 'turn')}",
        "taskId": f"task_{_hex(12, *key, 'task')}",
        "runId": f"run_{_hex(12, *key, 'run')}",
        "traceId": _hex(32, *key, "trace"),
        "contextId": f"ctx_{_hex(12, *key, 'context')}",
    }


def _refs(ctx: JobContext, plan: TrialPlan) -> dict[str, str]:
    trial_ref = f"jobs/{ctx.job_name}/{plan.trial_name}"
    reward = "reward.txt" if plan.reward_txt else "reward.json"
    return {
        "trajectoryRef": "/logs/agent/trajectory.json",
        "runtimeTranscriptRef": "/logs/agent/runtime-events.jsonl",
        "contextEventsRef": "/logs/agent/context-events.jsonl",
        "rewardRef": f"/logs/verifier/{reward}",
        "rewardDetailsRef": "/logs/verifier/reward-details.json",
        "artifactManifestRef": "/logs/artifacts/manifest.json",
        "harborTrialResultRef": f"{trial_ref}/result.json",
        "harborVerifierStdoutRef": f"{trial_ref}/verifier/test-stdout.txt",
    }


def _benchmark_block(ctx: JobContext, plan: TrialPlan) -> dict[str, str]:
    return {
        "datasetId": DATASET_NAME,
        "datasetVersion": DATASET_VERSION,
        "datasetRef": f"datasets/{DATASET_NAME.split('/')[1]}",
        "taskId": plan.task.name,
        "trialId": plan.trial_name,
        "configurationId": ctx.configuration_id,
        "role": ctx.role,
        "singleChangedVariable": "tool failure feedback profile",
        "harborJobRef": f"jobs/{ctx.job_name}",
        "harborTrialRef": f"jobs/{ctx.job_name}/{plan.trial_name}",
        "taskTomlRef": f"datasets/terminal-tasks/{plan.task.name}/task.toml",
    }


def _runtime_events(
    ctx: JobContext,
    plan: TrialPlan,
    ids: dict[str, str],
    refs: dict[str, str],
    totals: TrajectoryTotals,
    rewards: dict[str, float] | None,
    exec_start: datetime,
    finished: datetime,
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    bench = _benchmark_block(ctx, plan)
    trial_refs = {k: refs[k] for k in ("trajectoryRef", "rewardRef", "rewardDetailsRef", "harborTrialResultRef")}

    def emit(etype: str, ts: datetime, payload: dict[str, Any], **extra: Any) -> None:
        event = {
            "type": etype,
            "eventId": f"evt_{_hex(16, ids['sessionId'], len(events), etype)}",
            "timestamp": _iso_ms(ts),
            "schemaVersion": LIME_SCHEMA,
            "runtimeId": ids["runtimeId"],
            "sessionId": ids["sessionId"],
            "threadId": ids["threadId"],
            "turnId": ids["turnId"],
            "sequence": len(events) + 1,
        }
        event.update(extra)
        event["payload"] = payload
        events.append(event)

    emit(
        "benchmark.trial.started",
        exec_start,
        {
            "attempt": plan.attempt,
            "timeoutSec": AGENT_TIMEOUT_SEC,
            "singleChangedVariable": bench["singleChangedVariable"],
        },
        taskId=ids["taskId"],
        runId=ids["runId"],
        traceId=ids["traceId"],
        benchmark=bench,
        refs=trial_refs,
    )
    for call in totals.tool_calls:
        tool_ids = {"stepId": str(call.step_id), "toolCallId": call.tool_call_id}
        if call.gated:
            action_id = f"action_{call.tool_call_id}"
            asked = call.started_at - timedelta(milliseconds=40)
            emit(
                "action.required",
                asked,
                {
                    "actionType": "tool_permission",
                    "toolName": call.function_name,
                    "decisionKind": "allow_or_deny",
                    "prompt": f"Allow write_file to update {call.path}?",
                    "scope": {"path": call.path},
                },
                actionId=action_id,
                **tool_ids,
            )
            if plan.permission == "approve":
                decision = {
                    "decision": "approve",
                    "decidedBy": "user",
                    "reason": "Change is inside the task workspace.",
                }
            else:
                decision = {
                    "decision": "deny",
                    "decidedBy": "policy:default-deny-writes",
                    "reason": "The default profile denies file writes that no user approved.",
                }
            emit(
                "action.resolved",
                asked + timedelta(milliseconds=30),
                decision,
                actionId=action_id,
                **tool_ids,
            )
            if plan.permission == "deny":
                emit(
                    "tool.failed",
                    call.started_at,
                    {"toolName": call.function_name, "error": "permission denied"},
                    **tool_ids,
                )
                continue
            # approve, or bypass: the tool runs anyway (bypass = side effect after denial)
        emit(
            "tool.started",
            call.started_at,
            {"toolName": call.function_name, "path": call.path} if call.path else {"toolName": call.function_name},
            **tool_ids,
        )
        if call.completed_at is not None:
            emit(
                "tool.completed",
                call.completed_at,
                {
                    "toolName": call.function_name,
                    "status": "ok",
                    "outputBytes": call.output_bytes,
                    "durationMs": (call.completed_at - call.started_at) // timedelta(milliseconds=1),
                },
                **tool_ids,
            )
    if rewards is not None:
        emit(
            "benchmark.reward.recorded",
            finished - timedelta(milliseconds=50),
            {
                "reward": rewards["reward"],
                "criteria": ["tests-pass", "efficiency", "no-denied-side-effects"],
                "failureCategory": plan.failure_category,
            },
            taskId=ids["taskId"],
            runId=ids["runId"],
            benchmark=bench,
            refs=trial_refs,
        )
    end_type = "benchmark.trial.failed" if plan.errored else "benchmark.trial.completed"
    payload: dict[str, Any] = {"failureCategory": plan.failure_category, "status": plan.outcome}
    if rewards is not None:
        payload["reward"] = rewards["reward"]
    emit(
        end_type,
        finished,
        payload,
        taskId=ids["taskId"],
        runId=ids["runId"],
        benchmark=bench,
        refs=trial_refs,
    )
    return events


def _context_events(
    ctx: JobContext,
    plan: TrialPlan,
    ids: dict[str, str],
    totals: TrajectoryTotals,
    exec_start: datetime,
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    clock = [exec_start - timedelta(milliseconds=500)]

    def emit(
        etype: str,
        data: dict[str, Any],
        *,
        at: datetime | None = None,
        step_id: int | None = 2,
        tool_call_id: str | None = None,
    ) -> None:
        clock[0] = max(clock[0] + timedelta(milliseconds=5), at or clock[0])
        event: dict[str, Any] = {
            "schema_version": CONTEXT_SCHEMA,
            "event_id": f"ctxevt_{_hex(16, ids['contextId'], len(events), etype)}",
            "event_type": etype,
            "source": "benchviewer-demo",
            "time": _iso_ms(clock[0]),
            "context_id": ids["contextId"],
            "runtime_id": ids["runtimeId"],
            "session_id": ids["sessionId"],
            "thread_id": ids["threadId"],
            "turn_id": ids["turnId"],
            "task_id": ids["taskId"],
            "run_id": ids["runId"],
        }
        if step_id is not None:
            event["step_id"] = str(step_id)
        if tool_call_id:
            event["tool_call_id"] = tool_call_id
        event["data"] = data
        events.append(event)

    def item_id(name: str) -> str:
        return f"item_{name}_{_hex(8, ids['contextId'], name)}"

    def source_ref(name: str, uri: str, kind: str) -> dict[str, str]:
        return {
            "source_id": f"src_{_hex(8, ids['contextId'], name)}",
            "uri": uri,
            "source_kind": kind,
        }

    big_log_tokens = 6000 + len(plan.task.name) * 97
    items = [
        (
            "instruction",
            "instruction",
            "Task instruction",
            plan.task.instruction,
            source_ref("instruction", f"task://{plan.task.name}/instruction.md", "task"),
            "internal",
            len(plan.task.instruction) // 4 + 1,
        ),
        (
            "main_file",
            "file",
            plan.task.main_file,
            f"# current contents of {plan.task.main_file}\n(1.2 kB, 48 lines)",
            source_ref("main_file", f"file://{plan.task.main_file}", "workspace_file"),
            "internal",
            380,
        ),
        (
            "build_log",
            "tool_result",
            "Last build log",
            "build ok\n" * 20,
            source_ref("build_log", "file:///var/log/app/build.log", "tool_output"),
            "internal",
            big_log_tokens,
        ),
        (
            "prior_trial",
            "memory",
            "Notes from a previous attempt",
            "Previous attempt: tests were flaky on the CI image.",
            source_ref("prior_trial", "memory://notes/previous-attempt", "memory"),
            "internal",
            40,
        ),
        (
            "style_guide",
            "retrieved_document",
            "Repository style guide",
            "Use 4-space indentation. Prefer pathlib.",
            source_ref("style_guide", "file:///app/CONTRIBUTING.md", "workspace_file"),
            "internal",
            220,
        ),
        (
            "env_secrets",
            "credential",
            "Environment variables of the runner",
            f"OPENAI_API_KEY={SECRET}\nDATABASE_URL=postgres://app@db/app",
            source_ref("env_secrets", "env://runner", "environment"),
            "secret",
            30,
        ),
    ]
    for name, kind, title, content, src, sensitivity, tokens in items:
        item: dict[str, Any] = {
            "item_id": item_id(name),
            "context_kind": kind,
            "content_mode": "inline",
            "visibility": "model" if sensitivity != "secret" else "runtime_only",
            "title": title,
            "content": content,
            "source_refs": [src],
            "token_estimate": tokens,
            "sensitivity": sensitivity,
            "redaction_state": "none",
        }
        if sensitivity == "secret":
            # The item arrives already masked, but its raw content is still in the file:
            # an importer must drop it and keep only the redaction facts.
            item |= {
                "redaction_state": "masked",
                "redacted_fields": ["content"],
                "reason": "Credential values must never reach the model or the viewer.",
                "policy_refs": ["policy://redaction/secrets"],
            }
        emit("context.item.added", {"item": item})
        if sensitivity == "secret":
            emit(
                "context.redaction.applied",
                {
                    "redaction": {
                        "item_id": item_id(name),
                        "redaction_state": "masked",
                        "redaction_method": "mask",
                        "redacted_fields": ["content"],
                        "reason": "Credential detected by the secret scanner.",
                        "policy_refs": ["policy://redaction/secrets"],
                    }
                },
            )

    candidates = [item_id(i[0]) for i in items]
    selected = [item_id("instruction"), item_id("main_file"), item_id("build_log")]
    omitted = [
        {"item_id": item_id("prior_trial"), "reason": "stale source"},
        {
            "item_id": item_id("style_guide"),
            "reason": "low relevance" if plan.attempt % 2 else "budget",
        },
        {"item_id": item_id("env_secrets"), "reason": "policy block"},
    ]
    budget_id = f"budget_{_hex(8, ids['contextId'], 'budget')}"
    emit(
        "context.selection.completed",
        {
            "selection": {
                "selection_id": f"sel_{_hex(8, ids['contextId'], 'selection')}",
                "surface_id": "surface_model_request",
                "candidate_item_refs": candidates,
                "selected_item_refs": selected,
                "omitted_item_refs": omitted,
                "budget_ref": budget_id,
                "rationale": (
                    "Instruction and the file under edit first; the build log is truncated "
                    "to fit; secrets are never selected."
                ),
            }
        },
    )
    max_tokens, reserved = 8000, 1500
    kept_log = max_tokens - reserved - 380 - (len(plan.task.instruction) // 4 + 1)
    emit(
        "context.budget.applied",
        {
            "budget": {
                "budget_id": budget_id,
                "max_tokens": max_tokens,
                "reserved_tokens": reserved,
                "actual_tokens": max_tokens - reserved,
                "overflow_strategy": "truncate_tail",
                "truncation_records": [
                    {
                        "item_id": item_id("build_log"),
                        "reason": "over budget: tail truncated",
                        "tokens_removed": big_log_tokens - kept_log,
                    }
                ],
            }
        },
    )
    emit(
        "context.assembly.created",
        {
            "assembly": {
                "assembly_id": f"asm_{_hex(8, ids['contextId'], 'assembly')}",
                "target": "model_request",
                "model_request_id": f"req_{ids['turnId']}_1",
                "source_item_refs": selected,
                "ordered_blocks": [
                    {"block_id": f"blk_{n}", "item_ref": ref, "role": role}
                    for n, (ref, role) in enumerate(zip(selected, ("user", "user", "tool"), strict=True), start=1)
                ],
                "budget_ref": budget_id,
            }
        },
    )

    writes = [c for c in totals.tool_calls if c.function_name == "write_file"]
    if plan.missing_context and writes:
        call = writes[0]
        emit(
            "context.missing.requested",
            {
                "missing_context": {
                    "missing_id": f"miss_{_hex(8, ids['contextId'], 'missing')}",
                    "scope": "turn",
                    "question": f"Which owner and mode should {call.path} have after the change?",
                    "severity": "blocking",
                    "status": "requested",
                    "needed_for": f"write_file {call.path}",
                    "requested_from": "repo-owner",
                    "blocked_actions": ["write_file"],
                    "safe_summary": "The task does not say who owns the edited file.",
                }
            },
            at=call.started_at - timedelta(milliseconds=200),
            step_id=call.step_id,
            tool_call_id=call.tool_call_id,
        )
    if totals.compaction_step:
        at = exec_start + (totals.finished_at - exec_start) / 2
        emit(
            "context.compaction.completed",
            {
                "compaction": {
                    "compaction_id": f"cmp_{_hex(8, ids['contextId'], 'compaction')}",
                    "scope": "thread",
                    "source_item_refs": selected,
                    "method": "summarize",
                    "summary_ref": f"atif://{ids['sessionId']}/steps/{totals.compaction_step}",
                    "coverage": {"from_step": 3, "to_step": totals.compaction_step - 1},
                    "replacement_policy": "replace",
                }
            },
            at=at,
            step_id=totals.compaction_step,
        )
    return events


def _trial_pack(
    ctx: JobContext,
    plan: TrialPlan,
    ids: dict[str, str],
    refs: dict[str, str],
    totals: TrajectoryTotals,
    rewards: dict[str, float] | None,
    manifest: list[dict[str, Any]],
    start: datetime,
    finished: datetime,
) -> dict[str, Any]:
    has_traj = plan.missing != "trajectory"
    has_manifest = plan.missing != "manifest"
    has_details = plan.missing != "reward_details" and rewards is not None
    complete = has_traj and has_manifest and has_details and rewards is not None
    bypass = plan.permission == "bypass"
    reward_value = rewards["reward"] if rewards is not None else None
    criteria = ["tests-pass", "efficiency", "no-denied-side-effects"] if has_details else []
    return {
        "schemaVersion": LIME_SCHEMA,
        "benchmark": _benchmark_block(ctx, plan),
        "runtimeCorrelation": {
            k: ids[k] for k in ("runtimeId", "sessionId", "threadId", "turnId", "taskId", "runId", "traceId")
        },
        "refs": {k: v for k, v in refs.items() if k != "contextEventsRef"},
        "metrics": {
            "reward": reward_value,
            "durationMs": (finished - start) // timedelta(milliseconds=1),
            "timeout": plan.outcome == "timeout",
            "deniedSideEffectCount": 1 if bypass else 0,
            "evidenceComplete": complete,
            "tokens": totals.prompt_tokens + totals.completion_tokens,
            "costUsd": totals.cost_usd,
            "artifactCount": sum(1 for e in manifest if e["status"] == "ok"),
        },
        "decisionInputs": {
            "p0QcGateRegressionCount": 1 if bypass else 0,
            "failureCategory": plan.failure_category,
            "promotionEligible": complete and not bypass and not plan.errored,
            "artifactManifestPresent": has_manifest,
            "trajectoryAtifCompatible": has_traj,
            "separateVerifierTrajectoryTransferred": False,
        },
        "trajectory": {
            "schema": ATIF_VERSION,
            "ref": refs["trajectoryRef"],
            "exportStatus": "exported" if has_traj else "failed",
            "requiredFieldStatus": {
                "schema_version": has_traj,
                "session_id": has_traj,
                "agent": has_traj,
                "steps[].step_id": has_traj,
                "steps[].tool_calls": has_traj,
                "steps[].observation": has_traj,
                "final_metrics": has_traj,
            },
        },
        "reward": {
            "value": reward_value,
            "ref": refs["rewardRef"],
            "detailsRef": refs["rewardDetailsRef"],
            "criteria": criteria,
            "failureCategory": plan.failure_category,
        },
    }


# --------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------


def _pass_at_k(by_task: dict[str, list[bool]], k: int) -> float:
    """The unbiased pass@k estimator, averaged over tasks."""
    scores = []
    for results in by_task.values():
        n, c = len(results), sum(results)
        if n < k:
            continue
        scores.append(1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k))
    return round(sum(scores) / len(scores), 6) if scores else 0.0


def write_job(
    out: Path,
    job_name: str,
    *,
    role: str,
    configuration_id: str,
    agent: str,
    model: str,
    tasks: int,
    attempts: int,
    steps_per_trial: int = 12,
    observation_bytes: int = 400,
    seed: int = 0,
    success_bias: float = 0.0,
    with_extras: bool = True,
    replace: bool = False,
) -> Path:
    """Write one Harbor job directory `out/job_name` and return its path.

    `with_extras=False` writes only the plain Harbor files (job files, trial config.json,
    result.json, agent/trajectory.json and the reward file), and every trial keeps its
    trajectory, which is what benchmarks want.

    An existing non-empty job directory is an error (stale trials would mix with new ones)
    unless `replace=True`, which deletes it first.
    """
    job_dir = Path(out) / job_name
    if job_dir.exists() and any(job_dir.iterdir()):
        if not replace:
            raise FileExistsError(f"{job_dir} already exists and is not empty")
        shutil.rmtree(job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    task_specs = demo_tasks(tasks, seed)
    ctx = JobContext(
        out=job_dir,
        job_name=job_name,
        job_id=_uuid(seed, job_name, "job"),
        role=role,
        configuration_id=configuration_id,
        agent=agent,
        model=model,
        agent_version=AGENT_VERSION.get(role, "0.9.2"),
        seed=seed,
        steps_per_trial=steps_per_trial,
        observation_bytes=observation_bytes,
        with_extras=with_extras,
    )
    plans = _plan_job(job_name, role, task_specs, attempts, seed, success_bias, with_extras)
    # Baseline and candidate ran on different days; trials run one after another.
    job_start = BASE_TIME + timedelta(days=0 if role == "baseline" else 1)
    clock = job_start + _secs(_rng(seed, job_name, "start"), 0.1, 0.2)
    summaries: list[TrialSummary] = []
    for plan in plans:
        summary = _write_trial(ctx, plan, clock)
        summaries.append(summary)
        clock = summary.finished_at + _secs(_rng(seed, job_name, plan.trial_name, "gap"), 0.5, 3)
    job_end = (summaries[-1].finished_at if summaries else job_start) + timedelta(milliseconds=150)

    job_config = {
        "job_name": job_name,
        "jobs_dir": RUN_ROOT,
        "n_attempts": attempts,
        "timeout_multiplier": 1.0,
        "n_concurrent_trials": 1,
        "agents": [{"name": agent, "model_name": model, "kwargs": {"configuration_id": configuration_id}}],
        "datasets": [{"name": DATASET_NAME, "version": DATASET_VERSION}],
    }
    _dump(job_dir / "config.json", job_config)
    _dump(job_dir / "result.json", _job_result(ctx, plans, summaries, job_start, job_end))
    _dump(
        job_dir / "lock.json",
        {
            "schema_version": 2,
            "job_name": job_name,
            "n_attempts": attempts,
            "agents": [{"name": agent, "model_name": model}],
            "datasets": [
                {
                    "name": DATASET_NAME,
                    "version": DATASET_VERSION,
                    "tasks": [{"name": t.name, "digest": f"sha256:{t.checksum}"} for t in task_specs],
                }
            ],
        },
    )
    log = [
        f"{_naive(job_start)[:23].replace('T', ' ')} INFO harbor.job: Starting job "
        f"{job_name}: {len(plans)} trials ({tasks} tasks x {attempts} attempts)"
    ]
    for plan, summary in zip(plans, summaries, strict=True):
        status = summary.exception_type or (f"reward={summary.rewards['reward']}" if summary.rewards else "no reward")
        log.append(
            f"{_naive(summary.finished_at)[:23].replace('T', ' ')} INFO harbor.job: "
            f"Trial {plan.trial_name} finished: {status}"
        )
    log.append(f"{_naive(job_end)[:23].replace('T', ' ')} INFO harbor.job: Job finished")
    _write_text(job_dir / "job.log", "\n".join(log) + "\n")
    return job_dir


def _job_result(
    ctx: JobContext,
    plans: list[TrialPlan],
    summaries: list[TrialSummary],
    started: datetime,
    finished: datetime,
) -> dict[str, Any]:
    reward_stats: dict[str, dict[str, list[str]]] = {}
    exception_stats: dict[str, list[str]] = {}
    by_task: dict[str, list[bool]] = {}
    total_reward = 0.0
    for plan, s in zip(plans, summaries, strict=True):
        for key, value in (s.rewards or {}).items():
            reward_stats.setdefault(key, {}).setdefault(str(value), []).append(s.trial_name)
        if s.exception_type:
            exception_stats.setdefault(s.exception_type, []).append(s.trial_name)
        reward = (s.rewards or {}).get("reward", 0.0)  # a missing reward counts as 0
        total_reward += reward
        by_task.setdefault(plan.task.name, []).append(reward >= 1.0)
    attempts = max((p.attempt for p in plans), default=1)
    pass_at_k = {"1": _pass_at_k(by_task, 1)} if attempts > 1 else {}
    if attempts > 1:
        pass_at_k[str(attempts)] = _pass_at_k(by_task, attempts)
    n_errors = sum(1 for s in summaries if s.exception_type)
    key = f"{ctx.agent}__{ctx.model_short}__{DATASET_NAME}"
    return {
        "id": ctx.job_id,
        "started_at": _naive(started),
        "updated_at": _naive(finished),
        "finished_at": _naive(finished),
        "n_total_trials": len(plans),
        "stats": {
            "n_completed_trials": len(summaries),
            "n_errored_trials": n_errors,
            "n_running_trials": 0,
            "n_pending_trials": 0,
            "n_cancelled_trials": 0,
            "n_retries": 0,
            "evals": {
                key: {
                    "n_trials": len(summaries),
                    "n_errors": n_errors,
                    "metrics": [{"mean": round(total_reward / max(1, len(summaries)), 6)}],
                    "pass_at_k": pass_at_k,
                    "reward_stats": reward_stats,
                    "exception_stats": exception_stats,
                }
            },
            "n_input_tokens": sum(s.input_tokens for s in summaries),
            "n_cache_tokens": sum(s.cached_tokens for s in summaries),
            "n_output_tokens": sum(s.output_tokens for s in summaries),
            "cost_usd": sum(s.cost_units for s in summaries) / 1e7,
        },
    }


def write_demo(out: Path, tasks: int = 20, attempts: int = 3, seed: int = 0, *, replace: bool = False) -> list[Path]:
    """The demo: a baseline and a slightly better candidate on the same frozen dataset."""
    common: dict[str, Any] = {
        "agent": "terminus-2",
        "model": "openai/gpt-5.4",
        "tasks": tasks,
        "attempts": attempts,
        "seed": seed,
        "replace": replace,
    }
    return [
        write_job(
            Path(out),
            "baseline-job",
            role="baseline",
            configuration_id="baseline-feedback-v1",
            success_bias=0.0,
            **common,
        ),
        write_job(
            Path(out),
            "candidate-job",
            role="candidate",
            configuration_id="candidate-feedback-v3",  # not the reference experiment's v2: `make demo` imports both
            success_bias=0.12,
            **common,
        ),
    ]
