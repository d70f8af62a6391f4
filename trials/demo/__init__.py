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

import math
import random
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from trials.demo.agentcontext import SECRET, context_events
from trials.demo.atif import (
    NullSink,
    TrajectorySpec,
    TrajectoryTotals,
    stream_trajectory,
    write_trajectory,
    write_trajectory_file,
)
from trials.demo.common import (
    AGENT_TIMEOUT_SEC,
    BASE_TIME,
    DATASET_NAME,
    DATASET_VERSION,
    RUN_ROOT,
    iso,
    random_secs,
    seeded_rng,
    seeded_uuid,
    write_json,
    write_jsonl,
    write_text,
)
from trials.demo.lime import evidence_refs, runtime_events, runtime_ids, trial_pack
from trials.demo.plans import JobContext, TrialPlan, plan_job
from trials.demo.tasks import demo_tasks
from trials.demo.verifier import ctrf_report, pytest_stdout, reward_details, verifier_rewards

__all__ = ["SECRET", "write_demo", "write_job", "write_trajectory"]

AGENT_VERSION = {"baseline": "0.9.2", "candidate": "0.9.3+feedback-v3"}


def _naive(dt: datetime) -> str:
    # Job result.json times are naive in real Harbor output (local time of the runner);
    # our pretend runner is on UTC.
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


# --------------------------------------------------------------------------------------
# Writing one trial
# --------------------------------------------------------------------------------------


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


def write_trial(ctx: JobContext, plan: TrialPlan, start: datetime) -> TrialSummary:
    tdir = ctx.out / plan.trial_name
    rng = seeded_rng(ctx.seed, ctx.job_name, plan.trial_name, "write")
    extras = ctx.with_extras
    missing = plan.missing if extras else None
    session_id = seeded_uuid(ctx.seed, ctx.job_name, plan.trial_name, "session")

    # --- timeline of the four phases ---
    env_start = start + random_secs(rng, 0.05, 0.2)
    env_end = env_start + random_secs(rng, 4, 35)
    setup_end = env_end + random_secs(rng, 8, 60)
    exec_start = setup_end + random_secs(rng, 0.0001, 0.001)
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
        totals = stream_trajectory(NullSink(), spec)
    else:
        totals = write_trajectory_file(traj_path, spec)

    if plan.outcome == "timeout":
        exec_end = exec_start + timedelta(seconds=AGENT_TIMEOUT_SEC)
    else:
        exec_end = totals.finished_at + random_secs(rng, 0.5, 3)
    rewards = verifier_rewards(plan)
    verifier_timing = None
    if rewards is not None:
        ver_start = exec_end + random_secs(rng, 0.3, 1.5)
        ver_end = ver_start + random_secs(rng, 4, 30)
        verifier_timing = {"started_at": iso(ver_start), "finished_at": iso(ver_end)}
        finished = ver_end + random_secs(rng, 0.1, 0.5)
    else:
        ver_start = ver_end = exec_end
        finished = exec_end + random_secs(rng, 0.3, 1.5)

    exception = None
    if plan.errored:
        etype, emsg, etb = _traceback(plan, ctx)
        exception = {
            "exception_type": etype,
            "exception_message": emsg,
            "exception_traceback": etb,
            "occurred_at": iso(exec_end),
        }

    # reward.txt holds only the headline number; Harbor turns it into {"reward": x}.
    recorded = rewards
    if rewards is not None and plan.reward_txt:
        recorded = {"reward": rewards["reward"]}
    config = _trial_config(plan, ctx)
    result = {
        "id": seeded_uuid(ctx.seed, ctx.job_name, plan.trial_name, "id"),
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
        "started_at": iso(start),
        "finished_at": iso(finished),
        "environment_setup": {"started_at": iso(env_start), "finished_at": iso(env_end)},
        "agent_setup": {"started_at": iso(env_end), "finished_at": iso(setup_end)},
        "agent_execution": {"started_at": iso(exec_start), "finished_at": iso(exec_end)},
        "verifier": verifier_timing,
        "step_results": None,
    }
    write_json(tdir / "config.json", config)
    write_json(tdir / "result.json", result)

    # --- verifier output ---
    if rewards is not None:
        if plan.reward_txt:
            write_text(tdir / "verifier" / "reward.txt", f"{rewards['reward']}\n")
        else:
            write_json(tdir / "verifier" / "reward.json", rewards)

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
    write_json(tdir / "lock.json", _trial_lock(plan, ctx))
    write_text(tdir / "trial.log", _trial_log(plan, ctx, result, totals))
    if exception:
        write_text(tdir / "exception.txt", exception["exception_traceback"])
    if rewards is not None:
        ctrf = ctrf_report(plan, rng, ver_start + random_secs(rng, 0.5, 2))
        write_json(tdir / "verifier" / "ctrf.json", ctrf)
        write_text(tdir / "verifier" / "test-stdout.txt", pytest_stdout(ctrf))
        if missing != "reward_details":
            write_json(tdir / "verifier" / "reward-details.json", reward_details(plan, rewards, totals))
    manifest = _write_artifacts(tdir, plan, rng, totals, write_manifest=missing != "manifest")

    ids = runtime_ids(ctx, plan, session_id)
    refs = evidence_refs(ctx, plan)
    write_jsonl(
        tdir / "agent" / "runtime-events.jsonl",
        runtime_events(ctx, plan, ids, refs, totals, rewards, exec_start, finished),
    )
    write_jsonl(
        tdir / "agent" / "context-events.jsonl",
        context_events(ctx, plan, ids, totals, exec_start),
    )
    if missing != "trial_pack":
        pack = trial_pack(ctx, plan, ids, refs, totals, rewards, manifest, start, finished)
        write_json(tdir / "benchmark-trial-pack.json", pack)
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
    write_text(
        adir / "app/output/summary.md",
        (
            f"# {plan.task.name}\n\nAttempt {plan.attempt}: {plan.outcome}.\n"
            f"Tests passed: {plan.passed_tests}/{len(plan.task.tests)}.\n"
            f"Steps: {totals.steps}, tool calls: {len(totals.tool_calls)}.\n"
        ),
    )
    write_text(
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
        write_text(adir / "app/coverage.xml", "")
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
        write_json(adir / "manifest.json", entries)
    return entries if write_manifest else []


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
        job_id=seeded_uuid(seed, job_name, "job"),
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
    plans = plan_job(job_name, role, task_specs, attempts, seed, success_bias, with_extras)
    # Baseline and candidate ran on different days; trials run one after another.
    job_start = BASE_TIME + timedelta(days=0 if role == "baseline" else 1)
    clock = job_start + random_secs(seeded_rng(seed, job_name, "start"), 0.1, 0.2)
    summaries: list[TrialSummary] = []
    for plan in plans:
        summary = write_trial(ctx, plan, clock)
        summaries.append(summary)
        clock = summary.finished_at + random_secs(seeded_rng(seed, job_name, plan.trial_name, "gap"), 0.5, 3)
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
    write_json(job_dir / "config.json", job_config)
    write_json(job_dir / "result.json", _job_result(ctx, plans, summaries, job_start, job_end))
    write_json(
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
    write_text(job_dir / "job.log", "\n".join(log) + "\n")
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
