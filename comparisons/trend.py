"""A configuration family over time: one point per configuration on one dataset.

The family is every configuration with trials on the dataset, or the ones named by hand;
either way ordered by their first trial. Each point: the task-averaged mean reward with a
bootstrap CI95 over tasks, the pass rate with its Wilson interval, and the link to its
trials. Read with one query for the trials and one for the first-trial times.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from django.db.models import Min
from django.db.models.functions import Coalesce

from comparisons import stats
from comparisons.computation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from comparisons.grid import stored_result, trials_fingerprint
from comparisons.models import SideKind
from comparisons.side_data import TaskCell, task_cells, trial_rows
from comparisons.sides import Side, SideError
from core.ids import parse_pk
from trials.models import Configuration, Dataset, Trial
from trials.viewer.text import isolated

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


def first_trials(dataset: Dataset, configuration_ids: list[int] | None) -> list[tuple[int, Any]]:
    """(configuration id, first trial time) of the family on this dataset, oldest first.

    A trial's start when it has one, else when it was imported."""
    trials = Trial.objects.filter(dataset=dataset, configuration__isnull=False)
    if configuration_ids is not None:
        trials = trials.filter(configuration_id__in=configuration_ids)
    firsts = (
        trials.order_by()
        .values("configuration_id")
        .annotate(first=Min(Coalesce("started_at", "created_at")))
        .values_list("configuration_id", "first")
    )
    return sorted(firsts, key=lambda row: (row[1], row[0]))[:MAX_POINTS]


def get_or_compute_trend(dataset: Dataset, configuration_ids: list[int] | None = None) -> dict[str, Any]:
    """The trend, stored (as a grid is) until a trial of its family on the dataset changes."""
    family = first_trials(dataset, configuration_ids)
    trials = Trial.objects.filter(dataset=dataset, configuration_id__in=[pk for pk, _ in family])
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
    ids = [pk for pk, _ in family]
    rows_by_side: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in trial_rows(Trial.objects.filter(dataset=dataset, configuration_id__in=ids), documents=False):
        rows_by_side[row["configuration_id"]].append(row)
    cells = {pk: task_cells(rows_by_side[pk]) for pk in ids}
    names = sorted(set().union(*cells.values()))
    columns = [np.array([_mean(cells[pk].get(t)) for t in names], dtype=float) for pk in ids]
    intervals = stats.mean_intervals(columns, resamples=resamples, seed=seed)
    keys = dict(Configuration.objects.filter(pk__in=ids).values_list("pk", "key"))
    points = [
        _point(pk, keys[pk], first, cells[pk], len(rows_by_side[pk]), intervals[i], dataset)
        for i, (pk, first) in enumerate(family)
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


def _point(
    pk: int,
    key: str,
    first: Any,
    cells: dict[str, TaskCell],
    n_trials: int,
    ci: tuple[float, float] | None,
    dataset: Dataset,
) -> dict[str, Any]:
    means = [c.mean for c in cells.values() if c.mean is not None]
    passes = sum(c.passes for c in cells.values())
    decided = sum(c.decided for c in cells.values())
    return {
        "configuration": pk,
        "label": isolated(key),
        "first_trial_at": first.isoformat() if first else None,
        "mean_reward": sum(means) / len(means) if means else None,
        "mean_reward_ci95": list(ci) if ci else None,
        "n_tasks": len(means),
        "n_trials": n_trials,
        "passes": passes,
        "decided": decided,
        "pass_rate": passes / decided if decided else None,
        "pass_rate_ci95": stats.proportion_ci(passes, decided),
        "trials_url": Side(SideKind.CONFIGURATION, pk).trials_url(dataset=dataset.pk),
    }
