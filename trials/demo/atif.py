"""ATIF trajectories, streamed step by step so a benchmark's 200 MB file never sits in memory.

`stream_trajectory` also returns the totals (tokens, cost, tool calls) the trial's other
files are written from.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from trials.demo.common import BASE_TIME, iso_ms, random_secs, seeded_rng
from trials.demo.texts import DIRS, SYSTEM_PROMPT, TOOL_DEFINITIONS, WORDS, XSS_SNIPPET, text_pool, tool_arguments

ATIF_VERSION = "ATIF-v1.7"
# Prices in units of 1e-7 USD per token (3 $/M input, 0.30 $/M cached, 15 $/M output).
# Integer units keep `cost_usd` sums exact: total = sum(step units) / 1e7.
PRICE_INPUT, PRICE_CACHED, PRICE_OUTPUT = 30, 3, 150
MAX_CONTEXT_TOKENS = 190_000


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


class NullSink:
    """Stands in for the file when a trial's trajectory is 'lost' but totals are needed."""

    def write(self, data: bytes) -> int:
        return len(data)


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


def stream_trajectory(out: BinaryIO | NullSink, spec: TrajectorySpec) -> TrajectoryTotals:
    """Write one ATIF trajectory step by step; never holds more than one step in memory."""
    rng = seeded_rng(spec.seed, spec.session_id, "trajectory")
    pool = text_pool(rng, max(64 * 1024, 2 * spec.observation_bytes))
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
        step: dict[str, Any] = {"step_id": step_id, "timestamp": iso_ms(now)}
        if kind == "system":
            step |= {"source": "system", "message": SYSTEM_PROMPT}
        elif kind == "user":
            step |= {"source": "user", "message": spec.instruction}
        elif kind == "compaction":
            now += random_secs(rng, 0.5, 2.0)
            step["timestamp"] = iso_ms(now)
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
            step["timestamp"] = iso_ms(now)
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
                        path = f"{rng.choice(DIRS)}/{rng.choice(WORDS)}.py"
                    call_id = f"call_{call_no}"
                    args = tool_arguments(fn, path, rng, spec.main_file)
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
                    started = cursor + random_secs(rng, 0.05, 0.3)
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
                        completed = started + random_secs(rng, 0.05, min(1.5, mean_dt * 0.3))
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
    write_trajectory_file(path, spec)


def write_trajectory_file(path: Path, spec: TrajectorySpec) -> TrajectoryTotals:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb", buffering=1 << 20) as fh:
        return stream_trajectory(fh, spec)
