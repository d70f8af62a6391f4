"""The stored-comparison cache: one Comparison row per pair of sides, and when it is stale.

`fingerprint` hashes cheap aggregates of both sides' data (trials, QC items, permission
denials) with the compute version and bootstrap settings; a row whose fingerprint still
matches is fresh. `run_comparison` (what the Celery task runs) computes a row and stores
it; services.get_or_compute decides when to queue it.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson
from django.db.models import Count, Max, Q, Sum

from comparisons.computing.computation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, COMPUTE_VERSION, compute
from comparisons.models import Comparison
from comparisons.statistics.metrics import denied_side_effects
from comparisons.statistics.sides import Side
from trials.triage.queries import qc_fingerprint_for_trials


def qc_fingerprint(side: Side) -> list[Any]:
    """The QC-item part of the cache fingerprint: changes when a QC item is filed, edited or a waiver lapses."""
    return qc_fingerprint_for_trials(side.trials().values("pk"))


def side_fingerprint(side: Side) -> list[Any]:
    """Cheap DB aggregates that change whenever a trial is added, removed, re-scored or joined."""
    agg = (
        side.trials()
        .order_by()
        .aggregate(
            n=Count("pk"),
            max_pk=Max("pk"),
            last=Max("updated_at"),
            complete=Count("pk", filter=Q(is_complete=True)),
            reward_sum=Sum("reward"),
        )
    )
    last = agg["last"].isoformat() if agg["last"] else None
    return [side.kind, side.id, agg["n"], agg["max_pk"], last, agg["complete"], agg["reward_sum"], qc_fingerprint(side)]


def fingerprint(baseline: Side, candidate: Side) -> str:
    parts = [
        COMPUTE_VERSION,
        BOOTSTRAP_RESAMPLES,
        BOOTSTRAP_SEED,
        side_fingerprint(baseline),
        side_fingerprint(candidate),
    ]
    permissions = [denied_side_effects(baseline), denied_side_effects(candidate)]
    return hashlib.sha256(orjson.dumps(parts + permissions)).hexdigest()


def comparison_row(baseline: Side, candidate: Side) -> Comparison:
    """The stored row of this pair of sides (created when new), without its points."""
    comparison, _ = Comparison.objects.defer("points").get_or_create(
        baseline_kind=baseline.kind, baseline_id=baseline.id, candidate_kind=candidate.kind, candidate_id=candidate.id
    )
    return comparison


def run_comparison(comparison_id: int) -> Comparison:
    """Compute one comparison and store it (what the Celery task runs)."""
    comparison = Comparison.objects.get(pk=comparison_id)
    baseline = Side(comparison.baseline_kind, comparison.baseline_id)
    candidate = Side(comparison.candidate_kind, comparison.candidate_id)
    Comparison.objects.filter(pk=comparison_id).update(status=Comparison.Status.RUNNING)
    started = time.perf_counter()
    try:
        current = fingerprint(baseline, candidate)  # the data about to be read
        result, points = compute(baseline, candidate)
    except Exception as exc:
        Comparison.objects.filter(pk=comparison_id).update(status=Comparison.Status.FAILED, error=repr(exc))
        raise
    comparison.result, comparison.points, comparison.fingerprint = result, points, current
    comparison.status, comparison.error = Comparison.Status.DONE, ""
    comparison.compute_ms = (time.perf_counter() - started) * 1000
    comparison.save()
    return comparison


def points_for(comparison: Comparison) -> dict[str, Any]:
    return Comparison.objects.filter(pk=comparison.pk).values_list("points", flat=True).first() or {}
