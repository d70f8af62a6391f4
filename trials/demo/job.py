"""A Harbor job directory (config, result with pass@k, lock, log) around its trials, and the
demo's two jobs: a baseline and a slightly better candidate on the same tasks."""

from __future__ import annotations

import math
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from trials.demo.common import (
    BASE_TIME,
    DATASET_NAME,
    DATASET_VERSION,
    RUN_ROOT,
    random_secs,
    seeded_rng,
    seeded_uuid,
    write_json,
    write_text,
)
from trials.demo.plans import JobContext, TrialPlan, plan_job
from trials.demo.tasks import demo_tasks
from trials.demo.trial import TrialSummary, write_trial

AGENT_VERSION = {"baseline": "0.9.2", "candidate": "0.9.3+feedback-v3"}


def _naive(dt: datetime) -> str:
    # Real Harbor writes a job's times naive (the runner's local time), which an import warns about;
    # the demo's pretend runner says its zone, UTC, so `make demo` prints no warning of its own data.
    return dt.astimezone(UTC).isoformat(timespec="microseconds")


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
