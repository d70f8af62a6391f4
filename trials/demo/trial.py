"""One Harbor trial directory: config.json, result.json, the trajectory and the reward file,
and with extras the lock, log, exception, verifier report, artifacts and the Lime and Agent
Context evidence. The plan says what happened; this module writes it down."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from trials.demo.agentcontext import context_events
from trials.demo.atif import NullSink, TrajectorySpec, TrajectoryTotals, stream_trajectory, write_trajectory_file
from trials.demo.common import (
    AGENT_TIMEOUT_SEC,
    DATASET_NAME,
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
from trials.demo.plans import JobContext, TrialPlan
from trials.demo.verifier import ctrf_report, pytest_stdout, reward_details, verifier_rewards


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
        # The pack names only files the trial has (a missing part shows as a missing ref, not a dangling one)
        held = {k: v for k, v in refs.items() if _in_trial(tdir, ctx.job_name, plan.trial_name, v)}
        pack = trial_pack(ctx, plan, ids, held, totals, rewards, manifest, start, finished)
        write_json(tdir / "benchmark-trial-pack.json", pack)
    return summary


def _in_trial(tdir: Path, job_name: str, trial_name: str, ref: str) -> bool:
    """Whether a ref names a file this trial folder holds: /logs/<path> in the sandbox, or the job's path."""
    inside = ref.removeprefix("/logs/").removeprefix(f"jobs/{job_name}/{trial_name}/")
    return (tdir / inside).is_file()


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
