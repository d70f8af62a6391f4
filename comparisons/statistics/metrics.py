"""The figures of a comparison: each side's metrics, and the two sides paired task by task.

Means of rewards are over tasks (attempts averaged first); missing and errored rewards
are counted, never averaged in as zero (see side_data).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from django.db.models.fields.json import KT
from django.urls import reverse

from comparisons.models import SideKind
from comparisons.statistics import stats
from comparisons.statistics.side_data import SideData, TaskCell, leaderboard_score
from comparisons.statistics.sides import Side
from trials.models import PermissionDecision, Trial
from trials.triage.queries import p0_qc_items_for_trials

DELTA_EPSILON = 1e-9
PASS_AT_K = (1, 3, 5, 10)


# --------------------------------------------------------------------------------------
# One side
# --------------------------------------------------------------------------------------


def side_metrics(data: SideData) -> dict[str, Any]:
    """The figures of one side. Means of rewards are over tasks (attempts averaged first)."""
    rows = data.rows
    n = len(rows)
    task_means = [m for m in (c.mean for c in data.tasks.values()) if m is not None]
    passes = sum(c.passes for c in data.tasks.values())
    decided = sum(c.decided for c in data.tasks.values())
    tokens = [(r["input_tokens"] or 0) + (r["output_tokens"] or 0) for r in rows if _has_tokens(r)]
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    durations = [r["duration_sec"] for r in rows if r["duration_sec"] is not None]
    complete = sum(1 for r in rows if r["is_complete"])
    cells = data.tasks.values()
    without_infra = [m for m in (c.mean_without_infra for c in cells) if m is not None]
    leaderboard, rule = leaderboard_score(data)
    return {
        "trials": n,
        "tasks": len(data.tasks),
        "attemptsPerTask": float(np.median([c.attempts for c in cells])) if cells else None,
        "meanReward": stats.mean_or_none(task_means),
        "meanRewardScored": stats.mean_or_none(task_means),
        "meanRewardExcludingInfra": stats.mean_or_none(without_infra),
        "unscoredTrials": sum(c.unscored for c in cells),
        "infraFailures": sum(c.infra for c in cells),
        "endedWithReward": sum(c.ended_with_reward for c in cells),
        "leaderboardScore": leaderboard,
        "leaderboardRule": rule,
        "scoredTrials": sum(len(c.scored) for c in data.tasks.values()),
        "erroredTrials": sum(c.errored for c in data.tasks.values()),
        "missingRewardTrials": sum(c.missing for c in data.tasks.values()),
        "passes": passes,
        "decided": decided,
        "passRate": passes / decided if decided else None,
        "passRateCi95": stats.proportion_ci(passes, decided),
        "timedOutTrials": sum(c.timeouts for c in data.tasks.values()),
        "timeoutRate": sum(c.timeouts for c in data.tasks.values()) / n if n else None,
        "meanDurationSec": stats.mean_or_none(durations),
        "tokensPerTrial": sum(tokens) / len(tokens) if tokens else None,
        "tokensPerSuccess": sum(tokens) / passes if tokens and passes else None,
        "costPerTrial": sum(costs) / len(costs) if costs else None,
        "costPerSuccess": sum(costs) / passes if costs and passes else None,
        "evidenceCompletenessRate": complete / n if n else None,
        "deniedSideEffects": denied_side_effects(data.side),
        "passAtK": _pass_at_k(data.tasks.values()),
        "rewardKeys": _reward_key_means(data.tasks.values()),
    }


def score_intervals(data: SideData, *, resamples: int, seed: int) -> dict[str, list[float] | None]:
    """CI95 (bootstrap over tasks) of the side's scored mean, with and without infrastructure failures."""
    # (by task name, as the grid orders them: the same draws give the grid's interval for the same side)
    cells = [data.tasks[name] for name in sorted(data.tasks)]
    columns = [
        np.array([np.nan if c.mean is None else c.mean for c in cells], dtype=float),
        np.array([np.nan if c.mean_without_infra is None else c.mean_without_infra for c in cells], dtype=float),
    ]
    scored, without = stats.mean_intervals(columns, resamples=resamples, seed=seed) if cells else (None, None)
    return {
        "meanRewardScoredCi95": list(scored) if scored else None,
        "meanRewardExcludingInfraCi95": list(without) if without else None,
    }


def _has_tokens(row: dict[str, Any]) -> bool:
    return row["input_tokens"] is not None or row["output_tokens"] is not None


def _pass_at_k(cells: Any) -> dict[str, float]:
    """Mean over tasks of the unbiased pass@k, for each k every task has enough attempts for."""
    cells = [c for c in cells if c.decided]
    if not cells:
        return {}
    fewest = min(c.decided for c in cells)
    result = {}
    for k in PASS_AT_K:
        if k <= fewest:
            result[str(k)] = float(np.mean([stats.pass_at_k(c.decided, c.passes, k) for c in cells]))
    return result


def _reward_key_means(cells: Any) -> dict[str, float]:
    per_key: dict[str, list[float]] = defaultdict(list)
    for cell in cells:
        for key, values in cell.by_key.items():
            per_key[key].append(float(np.mean(values)))
    return {key: float(np.mean(means)) for key, means in sorted(per_key.items())}


def denied_side_effects(side: Side) -> int:
    """Permission denials after which the side effect happened anyway."""
    filters = {"trial__job_id" if side.kind == SideKind.JOB else "trial__configuration_id": side.id}
    return PermissionDecision.objects.side_effects_after_denial().filter(**filters).count()


def p0_qc_gate_regressions(candidate_trial_ids: Any) -> int:
    """How many P0 QC gates the candidate regressed.

    The sum of what each candidate trial's Lime evidence pack reports
    (`decisionInputs.p0QcGateRegressionCount`, positive values) and the open P0 QC items
    triagers filed against these trials that no unexpired waiver covers
    (trials.triage.services.p0_qc_items_for_trials). It is the only place that knows
    where the number comes from.
    """
    total = sum(count for _, count in p0_evidence_counts(candidate_trial_ids))
    return total + p0_qc_items_for_trials(candidate_trial_ids)


def p0_evidence_counts(trial_ids: Any) -> list[tuple[int, int]]:
    """(trial id, count) of each trial whose Lime evidence pack reports P0 QC gate regressions."""
    values = (
        Trial.objects.filter(pk__in=trial_ids)
        .annotate(p0=KT("documents__evidence_pack__decisionInputs__p0QcGateRegressionCount"))
        .exclude(p0=None)
        .order_by("pk")
        .values_list("pk", "p0")
    )
    counts = []
    for pk, value in values:
        try:
            count = int(float(value))
        except (TypeError, ValueError):
            continue
        if count > 0:
            counts.append((pk, count))
    return counts


# --------------------------------------------------------------------------------------
# The two sides paired, task by task
# --------------------------------------------------------------------------------------


def _outcome(base: TaskCell | None, cand: TaskCell | None) -> str:
    if base is None:
        return "candidate only"
    if cand is None:
        return "baseline only"
    if base.mean is None or cand.mean is None:
        return "no reward"
    if base.passed is not None and cand.passed is not None and base.passed != cand.passed:
        return "flipped"
    delta = cand.mean - base.mean
    if delta > DELTA_EPSILON:
        return "improved"
    if delta < -DELTA_EPSILON:
        return "regressed"
    return "unchanged"


def task_matrix(base: SideData, cand: SideData) -> list[dict[str, Any]]:
    rows = []
    for name in sorted(set(base.tasks) | set(cand.tasks)):
        b, c = base.tasks.get(name), cand.tasks.get(name)
        cell = b or c  # (a task is on one side at least)
        filters = cell.list_filters() if cell else {"task": name}
        delta = c.mean - b.mean if b and c and b.mean is not None and c.mean is not None else None
        flip = None
        if c is not None and _outcome(b, c) == "flipped":  # (flipped: both sides have the task)
            flip = "fail → pass" if c.passed else "pass → fail"
        rows.append(
            {
                "task": name,
                "dataset": cell.dataset if cell else "",
                "baseline": b.summary() if b else None,
                "candidate": c.summary() if c else None,
                "delta": delta,
                "outcome": _outcome(b, c),
                "flip": flip,
                "baselineUrl": base.side.trials_url(**filters),
                "candidateUrl": cand.side.trials_url(**filters),
                "checksumsDiffer": bool(b and c and b.checksums != c.checksums),
                # the first attempt of each side, their trajectories aligned (trials/reading/side_by_side.py)
                "sideBySideUrl": (
                    reverse("trial-side-by-side", args=[min(b.trial_ids), min(c.trial_ids)])
                    if b and c and b.trial_ids and c.trial_ids
                    else None
                ),
            }
        )
    return rows


def paired_statistics(base: SideData, cand: SideData, *, resamples: int, seed: int) -> dict[str, Any]:
    """Reward delta with its bootstrap CI95 over paired tasks, and McNemar on pass/fail flips."""
    paired = [
        t
        for t in sorted(set(base.tasks) & set(cand.tasks))
        if base.tasks[t].mean is not None and cand.tasks[t].mean is not None
    ]
    b = np.array([base.tasks[t].mean for t in paired], dtype=float)
    c = np.array([cand.tasks[t].mean for t in paired], dtype=float)
    decided = [t for t in paired if base.tasks[t].passed is not None and cand.tasks[t].passed is not None]
    to_fail = sum(1 for t in decided if base.tasks[t].passed and not cand.tasks[t].passed)
    to_pass = sum(1 for t in decided if not base.tasks[t].passed and cand.tasks[t].passed)
    ci = stats.paired_bootstrap_ci(b, c, resamples=resamples, seed=seed)
    delta = float(np.mean(c - b)) if paired else None
    attempt_var = np.array([base.tasks[t].attempt_var + cand.tasks[t].attempt_var for t in paired], dtype=float)
    attempts = [min(base.tasks[t].attempts, cand.tasks[t].attempts) for t in paired]
    plan = stats.sample_plan(c - b, attempt_var, float(np.median(attempts)) if attempts else 0.0, delta)
    return {
        "pairedTasks": len(paired),
        "meanRewardDelta": delta,
        "mde": plan["mde"],
        "moreAttemptsPerTask": plan["more_attempts_per_task"],
        "moreTasks": plan["more_tasks"],
        "meanRewardDeltaCi95": list(ci) if ci else None,
        "meanRewardDeltaSe": stats.standard_error(c - b),
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "task"},
        "flips": {"passToFail": to_fail, "failToPass": to_pass, "pairedTasks": len(decided)},
        "mcnemarP": stats.mcnemar_exact(to_fail, to_pass),
        "rewardKeyDeltas": _reward_key_deltas(base, cand, paired),
    }


def leaderboard_delta(base: SideData, cand: SideData) -> dict[str, Any] | None:
    """The paired delta by the sources' own rule (an unscored trial counts as 0), over the tasks both sides
    ran: each task's attempts averaged first, as ours. None unless both sides' formats declare that rule."""
    if not (leaderboard_score(base)[1] and leaderboard_score(cand)[1]):
        return None
    ran = [t for t in sorted(set(base.tasks) & set(cand.tasks)) if base.tasks[t].finished and cand.tasks[t].finished]
    diffs = np.array([cand.tasks[t].leaderboard_mean - base.tasks[t].leaderboard_mean for t in ran], dtype=float)
    return {"tasks": len(ran), "delta": stats.mean_or_none(diffs), "se": stats.standard_error(diffs)}


def _reward_key_deltas(base: SideData, cand: SideData, paired: list[str]) -> dict[str, float]:
    deltas: dict[str, list[float]] = defaultdict(list)
    for task in paired:
        b, c = base.tasks[task].by_key, cand.tasks[task].by_key
        for key in set(b) & set(c):
            deltas[key].append(float(np.mean(c[key]) - np.mean(b[key])))
    return {key: float(np.mean(values)) for key, values in sorted(deltas.items())}


def outcome_counts(matrix: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in matrix:
        counts[row["outcome"]] += 1
    return dict(counts)


# --------------------------------------------------------------------------------------
# How each side metric changed
# --------------------------------------------------------------------------------------


def delta_or_none(base: float | None, cand: float | None) -> float | None:
    return None if base is None or cand is None else cand - base


_DELTA_METRICS = (
    "meanReward",
    "passRate",
    "timeoutRate",
    "meanDurationSec",
    "tokensPerTrial",
    "tokensPerSuccess",
    "costPerTrial",
    "costPerSuccess",
    "evidenceCompletenessRate",
    "deniedSideEffects",
)


def metric_deltas(base: dict[str, Any], cand: dict[str, Any], reward_keys: dict[str, float]) -> dict[str, Any]:
    deltas: dict[str, Any] = {name: delta_or_none(base[name], cand[name]) for name in _DELTA_METRICS}
    deltas["passAtK"] = {k: cand["passAtK"][k] - base["passAtK"][k] for k in base["passAtK"] if k in cand["passAtK"]}
    deltas["rewardKeys"] = reward_keys
    return deltas
