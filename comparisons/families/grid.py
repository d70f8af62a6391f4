"""N sides of one dataset: a task x side grid, each side against a reference side.

`parse_grid` reads 2 to 12 sides (configurations, or jobs) and the reference from a
request; `compute_grid` loads every side once (side_data), and gives per side the
task-averaged mean reward with a bootstrap CI95 over tasks and, against the reference,
the paired reward delta with its CI95, McNemar's p and Holm's correction across the sides,
validity by the pair rules of verdict.py; per task, one cell per side. `get_or_compute_grid`
keeps the result in a GridResult row until a side's trials change.

The grid and the trend reuse the pair's rules (side_data.load_side, verdict.validity_reasons,
metrics.paired_statistics and side_metrics); their intervals come from stats.mean_intervals,
every column missing the same tasks sharing one bootstrap pass, so a grid's delta interval
equals the pair page's. The grid is computed in the request (bench/compare_bench.py).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import numpy as np
import orjson
from django.db.models import Count, Max, Q, QuerySet, Sum

from comparisons.computing.computation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from comparisons.models import GridResult, SideKind
from comparisons.statistics import stats
from comparisons.statistics.metrics import PASS_AT_K, paired_statistics, side_metrics
from comparisons.statistics.side_data import SideData, load_sides
from comparisons.statistics.sides import Side, SideError
from comparisons.statistics.verdict import validity_reasons
from core.ids import parse_pk
from trials.models import Configuration, Job, Trial
from trials.models.taxonomy import WITH_REWARD_FLAG

MIN_SIDES, MAX_SIDES = 2, 12
GRID_VERSION = 5  # bump when the result's shape changes: stored grids are computed again


def parse_grid(params: Any) -> tuple[list[Side], Side | None]:
    """`sides=<configuration id>,…` or `side_jobs=<job id>,…`, and `reference=<id>` (default: the side
    with the most paired tasks, `default_reference`)."""
    jobs = not params.get("sides") and bool(params.get("side_jobs"))
    kind, name = (SideKind.JOB, "side_jobs") if jobs else (SideKind.CONFIGURATION, "sides")
    model: type[Configuration] | type[Job] = Job if jobs else Configuration
    raw = [v.strip() for v in str(params.get(name) or "").split(",") if v.strip()]
    if not MIN_SIDES <= len(raw) <= MAX_SIDES:
        raise SideError(
            f"choose {MIN_SIDES} to {MAX_SIDES} sides: ?sides=<configuration id>,… or ?side_jobs=<job id>,…"
        )
    ids = []
    for value in raw:
        pk = parse_pk(value)
        if pk is None:
            raise SideError(f"{name}: {value!r} is not an id")
        if pk in ids:
            raise SideError(f"{name}: {pk} is named twice")
        ids.append(pk)
    unknown = set(ids) - set(model.objects.filter(pk__in=ids).values_list("pk", flat=True))
    if unknown:
        raise SideError(f"{name}: {', '.join(map(str, sorted(unknown)))} not a known {kind} id")
    if not params.get("reference"):
        # None: get_or_compute_grid chooses (default_reference) and stores the grid under "default"
        return [Side(kind, pk) for pk in ids], None
    reference = parse_pk(str(params["reference"]))
    if reference not in ids:
        raise SideError(f"reference={params.get('reference')!r} is not one of the sides")
    return [Side(kind, pk) for pk in ids], Side(kind, reference)


def default_reference(kind: str, ids: list[int]) -> int:
    """The side that pairs the most scored tasks with the others (the first of a tie): a side with
    one task makes every other side "not comparable", so it is never the default by being ticked first."""
    column = "configuration_id" if kind == SideKind.CONFIGURATION else "job_id"
    # a task is its dataset and its name; a dataset's versions pair on the name (`pair_tasks`)
    tasks: dict[int, set[tuple[str | None, str]]] = defaultdict(set)
    scored = Trial.objects.filter(**{f"{column}__in": ids}, reward__isnull=False).order_by()
    for side, dataset, task in scored.values_list(column, "task__dataset__name", "task__name").distinct():
        tasks[side].add((dataset, task or "(no task)"))
    paired = {pk: sum(len(tasks[pk] & tasks[other]) for other in ids if other != pk) for pk in ids}
    return max(ids, key=lambda pk: (paired[pk], -ids.index(pk)))


def grid_query(sides: list[Side], reference: Side) -> dict[str, str]:
    """The query parameters that select these sides (pages and the API read the same)."""
    name = "sides" if reference.kind == SideKind.CONFIGURATION else "side_jobs"
    return {name: ",".join(str(s.id) for s in sides), "reference": str(reference.id)}


# --------------------------------------------------------------------------------------
# Computing the grid
# --------------------------------------------------------------------------------------


def compute_grid(
    sides: list[Side], reference: Side, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    data = load_sides(sides, documents=False)
    at = sides.index(reference)
    names = sorted(set().union(*(d.tasks for d in data)))
    means = [np.array([_mean(d, t) for t in names], dtype=float) for d in data]
    without = [np.array([_mean(d, t, infra=False) for t in names], dtype=float) for d in data]
    # NaN marks a task a side lacks (or has no reward for); a delta is NaN unless both have it.
    # One bootstrap pass for every column (side means, their means without infrastructure, deltas).
    intervals = _intervals(means + without + [m - means[at] for m in means], resamples, seed)
    k = len(data)
    rows = [
        _side_row(d, data[at], means[i], (intervals[i], intervals[k + i], intervals[2 * k + i]), seed)
        for i, d in enumerate(data)
    ]
    _holm_across(rows)
    costs = [_costs_by_task(d) for d in data]
    tasks = [_task_row(data, name, costs) for name in names]
    return {
        "kind": reference.kind,
        "reference": reference.id,
        "sides": rows,
        "tasks": tasks,
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "task"},
    }


def _mean(data: SideData, task: str, *, infra: bool = True) -> float:
    cell = data.tasks.get(task)
    mean = (cell.mean if infra else cell.mean_without_infra) if cell else None
    return np.nan if mean is None else mean


def _intervals(columns: list[np.ndarray], resamples: int, seed: int) -> list[list[float] | None]:
    return [list(ci) if ci else None for ci in stats.mean_intervals(columns, resamples=resamples, seed=seed)]


def _side_row(
    data: SideData,
    ref: SideData,
    column: np.ndarray,
    cis: tuple[list[float] | None, list[float] | None, list[float] | None],
    seed: int,
) -> dict[str, Any]:
    mean_ci, without_infra_ci, delta_ci = cis
    scored = column[~np.isnan(column)]
    metrics = side_metrics(data)
    side = data.side
    row: dict[str, Any] = {
        "id": side.id,
        "kind": side.kind,
        "label": data.label,
        "is_reference": data is ref,
        "mean_reward": float(scored.mean()) if scored.size else None,
        "mean_reward_ci95": mean_ci,
        "mean_reward_scored": float(scored.mean()) if scored.size else None,
        "mean_reward_excluding_infra": metrics["meanRewardExcludingInfra"],
        "mean_reward_excluding_infra_ci95": without_infra_ci,
        "leaderboard_score": metrics["leaderboardScore"],
        "leaderboard_rule": metrics["leaderboardRule"],
        "attempts_per_task": metrics["attemptsPerTask"],
        "unscored": metrics["unscoredTrials"],
        "infra_failures": metrics["infraFailures"],
        "ended_with_reward": metrics["endedWithReward"],
        "unscored_url": side.trials_url(unscored="true"),
        "infra_url": side.trials_url(failure_class="infrastructure"),
        "ended_with_reward_url": side.trials_url(flag=WITH_REWARD_FLAG),
        "n_tasks": int(scored.size),
        "n_trials": metrics["trials"],
        "pass_rate": metrics["passRate"],
        "pass_at_k": metrics["passAtK"],
        "cost_per_trial": metrics["costPerTrial"],
        "errored_trials": metrics["erroredTrials"],
        "missing_reward_trials": metrics["missingRewardTrials"],
        "trials_url": data.side.trials_url(),
        "valid": True,
        "invalid_reasons": [],
        "paired_tasks": None,
        "delta_vs_reference": None,
        "delta_ci95": None,
        "flips": None,
        "mcnemar_p": None,
        "mcnemar_p_holm": None,
        "mde": None,
        "more_attempts_per_task": None,
        "more_tasks": None,
        "not_comparable": "",
    }
    if data is ref:
        return row
    reasons, _ = validity_reasons(ref, data)
    # resamples=0: the delta, flips and McNemar exactly as the pair page computes them;
    # the interval comes from the shared bootstrap (the same draws, so the same numbers).
    paired = paired_statistics(ref, data, resamples=0, seed=seed)
    row.update(
        {
            "valid": not reasons,
            "invalid_reasons": reasons,
            "paired_tasks": paired["pairedTasks"],
            "delta_vs_reference": paired["meanRewardDelta"],
            "delta_ci95": delta_ci,
            "flips": paired["flips"],
            "mcnemar_p": paired["mcnemarP"] if paired["flips"]["pairedTasks"] else None,
            "mde": paired["mde"],
            "more_attempts_per_task": paired["moreAttemptsPerTask"],
            "more_tasks": paired["moreTasks"],
            "not_comparable": not_comparable_line(reasons),
        }
    )
    return row


_ROLES = {"baseline": "the reference", "candidate": "this side"}
_ROLE_WORDS = re.compile(r"\b(baseline|candidate)\b")


def not_comparable_line(reasons: list[str]) -> str:
    """Why a side is not comparable with the reference, in one line (empty when it is)."""
    if not reasons:
        return ""
    # validity_reasons speaks of a pair: here the baseline is the reference and the candidate this side
    reasons = [_ROLE_WORDS.sub(lambda m: _ROLES[m.group(0)], r) for r in reasons]
    return reasons[0] + (
        f" (and {len(reasons) - 1} more reason{'s' if len(reasons) > 2 else ''})" if len(reasons) > 1 else ""
    )


def _holm_across(rows: list[dict[str, Any]]) -> None:
    """Holm over every side that has a McNemar p against the reference (valid or not: the
    family is what was tested, so leaving a side out would under-correct). With one p there is
    no family: no Holm."""
    tested = [r for r in rows if r["mcnemar_p"] is not None]
    if len(tested) < 2:
        return
    for row, adjusted in zip(tested, stats.holm([r["mcnemar_p"] for r in tested]), strict=True):
        row["mcnemar_p_holm"] = adjusted


def _task_row(data: list[SideData], name: str, costs: list[dict[str, float]]) -> dict[str, Any]:
    """One task's row: its cells, and (where the sides hold several datasets, so `name` names its dataset
    too) its name and dataset for the cells' trial-list links."""
    row: dict[str, Any] = {"task": name, "cells": [_cell(d, name, costs[i]) for i, d in enumerate(data)]}
    cell = next(d.tasks[name] for d in data if name in d.tasks)
    if cell.qualified:
        row["filters"] = cell.list_filters()
        # one dataset at two versions pairs on the name (`pair_tasks`): each cell links its own version's trials
        for shown, side in zip(row["cells"], data, strict=True):
            if name in side.tasks and side.tasks[name].dataset_id != cell.dataset_id:
                shown["dataset"] = side.tasks[name].dataset_id
    return row


def _cell(data: SideData, task: str, costs: dict[str, float]) -> dict[str, Any]:
    """What is stored of one cell; `present_tasks` adds its link and pass@k when it is shown."""
    cell = data.tasks.get(task)
    if cell is None:
        return {"side": data.side.id, "mean_reward": None, "n": 0, "trial_ids": []}
    return {
        "side": data.side.id,
        "mean_reward": cell.mean,
        "n": len(cell.trial_ids),
        "trial_ids": cell.trial_ids,
        "passes": cell.passes,
        "decided": cell.decided,
        "errored": cell.errored,
        "unscored": cell.unscored,
        "infra": cell.infra,
        "ended_with_reward": cell.ended_with_reward,
        "cost_usd": costs.get(task),
    }


def present_tasks(result: dict[str, Any], tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of task rows with each cell's trial-list link and pass@k (a stored grid keeps
    neither: 10 sides x 1,000 tasks of them would double what every page view decodes)."""
    # One reverse() per side, then string formatting.
    lists = {s["id"]: f"{s['trials_url']}&" for s in result["sides"]}
    shown = []
    for row in tasks:
        filters = row.get("filters", {"task": row["task"]})
        quoted = urlencode({k: v for k, v in filters.items() if v is not None})
        cells = []
        for cell in row["cells"]:
            own = {**filters, "dataset": cell["dataset"]} if "dataset" in cell else None
            query = urlencode({k: v for k, v in own.items() if v is not None}) if own else quoted
            extra: dict[str, Any] = {"url": lists[cell["side"]] + query if cell["n"] else None}
            if cell["n"]:
                decided, passes = cell["decided"], cell["passes"]
                extra["pass_at_k"] = {str(k): stats.pass_at_k(decided, passes, k) for k in PASS_AT_K if k <= decided}
            cells.append({**cell, **extra})
        shown.append({"task": row["task"], "cells": cells})
    return shown


def _costs_by_task(data: SideData) -> dict[str, float]:
    """Total cost of each task's trials on this side."""
    cost = {row["id"]: row["cost_usd"] for row in data.rows if row["cost_usd"] is not None}
    costs: dict[str, float] = {}
    for key, cell in data.tasks.items():
        if paid := [cost[pk] for pk in cell.trial_ids if pk in cost]:
            costs[key] = sum(paid)
    return costs


# --------------------------------------------------------------------------------------
# The stored grid
# --------------------------------------------------------------------------------------


def trials_fingerprint(trials: QuerySet[Trial], column: str) -> str:
    """One grouped query: per `column` value (a side), the trials' count, last id, last change,
    completeness and reward sum: what changes when a trial is added, removed, joined or re-scored."""
    aggregates = (
        trials.order_by()
        .values(column)
        .annotate(
            n=Count("pk"),
            max_pk=Max("pk"),
            last=Max("updated_at"),
            complete=Count("pk", filter=Q(is_complete=True)),
            reward_sum=Sum("reward"),
        )
        .values_list(column, "n", "max_pk", "last", "complete", "reward_sum")
    )
    parts = sorted((row[0], row[1], row[2], row[3].isoformat() if row[3] else None, *row[4:]) for row in aggregates)
    return hashlib.sha256(orjson.dumps([GRID_VERSION, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, parts])).hexdigest()


def stored_result(key_parts: list[Any], fingerprint: str, compute: Callable[[], dict[str, Any]]) -> GridResult:
    """The stored result of these key parts while its fingerprint holds; otherwise computed now and stored.

    Computed in the request: a grid of 10 sides x 1,000 tasks x 5 attempts takes 1.2 to
    2.4 s on 2 busy vCPU (bench/compare_bench.py), about what a pair comparison's Celery
    round trip costs a page.
    """
    key = hashlib.sha256(orjson.dumps(key_parts)).hexdigest()
    # task_lines is read when a page of tasks is shown (GridResult.task_rows), never whole
    stored = GridResult.objects.defer("task_lines").filter(key=key).first()
    if stored and stored.fingerprint == fingerprint:
        return stored
    started = time.perf_counter()
    result = compute()
    elapsed = (time.perf_counter() - started) * 1000
    tasks = result.pop("tasks", None)
    lines = ""
    if tasks is not None:
        result["task_count"] = len(tasks)
        # each task's mean per side: what sorting the task grid by a side reads
        result["task_means"] = [[cell["mean_reward"] for cell in row["cells"]] for row in tasks]
        lines = "\n".join(orjson.dumps(row).decode() for row in tasks)
    stored, _ = GridResult.objects.update_or_create(
        key=key, defaults={"fingerprint": fingerprint, "result": result, "compute_ms": elapsed, "task_lines": lines}
    )
    return stored


def get_or_compute_grid(sides: list[Side], reference: Side | None) -> GridResult:
    """The stored grid of these sides against `reference` (None: the default reference, chosen when
    computed; its id is the result's `reference`)."""
    kind = sides[0].kind
    column = "configuration_id" if kind == SideKind.CONFIGURATION else "job_id"
    ids = [s.id for s in sides]
    fingerprint = trials_fingerprint(Trial.objects.filter(**{f"{column}__in": ids}), column)
    key_parts = ["grid", kind, ids, reference.id if reference else "default"]

    def compute() -> dict[str, Any]:
        return compute_grid(sides, reference or Side(kind, default_reference(kind, ids)))

    return stored_result(key_parts, fingerprint, compute)
