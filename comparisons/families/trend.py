"""A configuration family over time: one point per run (job) of each configuration on one dataset.

The family is every configuration with trials on the dataset, or the ones named by hand;
either way ordered by their first trial, and each configuration's runs by theirs (a TB1
submission's five runs are five points of one line, never one line across configurations).
Each point: the task-averaged mean reward with a bootstrap CI95 over tasks, the pass rate
with its Wilson interval, and the link to its trials. Read with one query for the trials
and one for the first-trial times.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from django.db.models import Min
from django.db.models.functions import Coalesce

from comparisons.computing.computation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from comparisons.families.grid import stored_result, trials_fingerprint
from comparisons.models import SideKind
from comparisons.statistics import stats
from comparisons.statistics.side_data import TaskCell, task_cells, trial_rows
from comparisons.statistics.sides import Side, SideError
from core.ids import parse_pk
from trials.models import Configuration, Dataset, Job, Trial
from trials.reading.text import isolated

MAX_POINTS = 50


def parse_trend(params: Any) -> tuple[Dataset, list[int] | None]:
    """`dataset=<id or name@version>` and, optionally, `configurations=<id>,<id>,…`."""
    value = str(params.get("dataset") or "").strip()
    if not value:
        raise SideError("choose a dataset: ?dataset=<id or name@version>")
    if (pk := parse_pk(value)) is not None:
        dataset = Dataset.objects.filter(pk=pk).first()
    else:
        name, _, version = value.partition("@")
        dataset = Dataset.objects.filter(name=name, version=version).first()
    if dataset is None:
        raise SideError(f"dataset={value!r} is not a known dataset (an id, or name@version)")
    raw = [v.strip() for v in str(params.get("configurations") or "").split(",") if v.strip()]
    if not raw:
        return dataset, None
    ids = [parse_pk(v) for v in raw]
    if None in ids:
        raise SideError(f"configurations={params.get('configurations')!r}: give configuration ids, comma-separated")
    known = set(Configuration.objects.filter(pk__in=ids).values_list("pk", flat=True))
    unknown = [str(i) for i in ids if i not in known]
    if unknown:
        raise SideError(f"configurations: {', '.join(unknown)} not a known configuration id")
    return dataset, list(dict.fromkeys(i for i in ids if i is not None))


Run = tuple[int, int | None]  # (configuration id, job id): one point


def first_trials(dataset: Dataset, configuration_ids: list[int] | None) -> list[tuple[Run, Any]]:
    """((configuration id, job id), first trial time) of each run of the family on this dataset: the
    configurations by their first trial, each one's runs oldest first.

    A trial's start when it has one, else when it was imported."""
    trials = Trial.objects.filter(dataset=dataset, configuration__isnull=False)
    if configuration_ids is not None:
        trials = trials.filter(configuration_id__in=configuration_ids)
    firsts = (
        trials.order_by()
        .values("configuration_id", "job_id")
        .annotate(first=Min(Coalesce("started_at", "created_at")))
        .values_list("configuration_id", "job_id", "first")
    )
    configuration_first: dict[int, Any] = {}
    for conf, _, first in firsts:
        configuration_first[conf] = min(first, configuration_first.get(conf, first))
    runs = sorted(firsts, key=lambda r: (configuration_first[r[0]], r[0], r[2], r[1] or 0))
    return [((conf, job), first) for conf, job, first in runs][:MAX_POINTS]


def get_or_compute_trend(dataset: Dataset, configuration_ids: list[int] | None = None) -> dict[str, Any]:
    """The trend, stored (as a grid is) until a trial of its family on the dataset changes."""
    family = first_trials(dataset, configuration_ids)
    trials = Trial.objects.filter(dataset=dataset, configuration_id__in={conf for (conf, _), _ in family})
    key_parts = ["trend", dataset.pk, configuration_ids]
    fingerprint = trials_fingerprint(trials, "configuration_id")
    return stored_result(key_parts, fingerprint, lambda: compute_trend(dataset, configuration_ids)).result


def compute_trend(
    dataset: Dataset,
    configuration_ids: list[int] | None = None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    family = first_trials(dataset, configuration_ids)
    runs = [run for run, _ in family]
    ids = sorted({conf for conf, _ in runs})
    rows_by_run: dict[Run, list[dict[str, Any]]] = defaultdict(list)
    trials = Trial.objects.filter(dataset=dataset, configuration_id__in=ids)
    for row in trial_rows(trials, documents=False):
        rows_by_run[(row["configuration_id"], row["job_id"])].append(row)
    cells = {run: task_cells(rows_by_run[run]) for run in runs}
    names = sorted(set().union(*cells.values()))
    columns = [np.array([_mean(cells[run].get(t)) for t in names], dtype=float) for run in runs]
    intervals = stats.mean_intervals(columns, resamples=resamples, seed=seed)
    keys = dict(Configuration.objects.filter(pk__in=ids).values_list("pk", "key"))
    jobs = dict(Job.objects.filter(pk__in={job for _, job in runs if job}).values_list("pk", "name"))
    points = [
        _point(run, keys[run[0]], jobs.get(run[1] or 0, ""), first, cells[run], len(rows_by_run[run]), intervals[i])
        | {"trials_url": _trials_url(run, dataset)}
        for i, (run, first) in enumerate(family)
    ]
    return {
        "dataset": {"id": dataset.pk, "name": dataset.name, "version": dataset.version},
        "chosen_by_hand": configuration_ids is not None,
        "points": points,
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "task"},
    }


def _mean(cell: TaskCell | None) -> float:
    mean = cell.mean if cell else None
    return np.nan if mean is None else mean


def _trials_url(run: Run, dataset: Dataset) -> str:
    url = Side(SideKind.CONFIGURATION, run[0]).trials_url(dataset=dataset.pk)
    return f"{url}&job={run[1]}" if run[1] else url


def _point(
    run: Run,
    key: str,
    job_name: str,
    first: Any,
    cells: dict[str, TaskCell],
    n_trials: int,
    ci: tuple[float, float] | None,
) -> dict[str, Any]:
    means = [c.mean for c in cells.values() if c.mean is not None]
    passes = sum(c.passes for c in cells.values())
    decided = sum(c.decided for c in cells.values())
    return {
        "configuration": run[0],
        "label": isolated(key),
        "job": run[1],
        "run": isolated(job_name) if run[1] else "no job",
        "first_trial_at": first.isoformat() if first else None,
        "mean_reward": sum(means) / len(means) if means else None,
        "mean_reward_ci95": list(ci) if ci else None,
        "n_tasks": len(means),
        "n_trials": n_trials,
        "passes": passes,
        "decided": decided,
        "pass_rate": passes / decided if decided else None,
        "pass_rate_ci95": stats.proportion_ci(passes, decided),
    }
