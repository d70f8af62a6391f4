"""Baseline / candidate comparisons: load both sides, compute, judge, cache.

The flow: `parse_sides` reads the request, `get_or_compute` returns the cached
Comparison row when its fingerprint still matches both sides' data, and otherwise runs
the Celery task, which calls `run_comparison` -> `compute`. Trial rows are read with
`.values()` (never whole model objects: a side can hold thousands of trials).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson
from django.conf import settings
from django.db.models import Count, Max, Q, Sum
from django.urls import reverse

from comparisons.computation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, COMPUTE_VERSION, compute
from comparisons.metrics import denied_side_effects
from comparisons.models import Comparison, SavedComparison
from comparisons.sides import Side
from trials.triage.services import qc_fingerprint_for_trials


def qc_fingerprint(side: Side) -> list[Any]:
    """The QC-item part of the cache fingerprint: changes when a QC item is filed, edited or a waiver lapses."""
    return qc_fingerprint_for_trials(side.trials().values("pk"))


# --------------------------------------------------------------------------------------
# Cache and Celery
# --------------------------------------------------------------------------------------


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


def _row(baseline: Side, candidate: Side) -> Comparison:
    comparison, _ = Comparison.objects.defer("points").get_or_create(
        baseline_kind=baseline.kind, baseline_id=baseline.id, candidate_kind=candidate.kind, candidate_id=candidate.id
    )
    return comparison


def get_or_compute(baseline: Side, candidate: Side) -> Comparison:
    """The cached comparison when still fresh; otherwise queue the Celery task.

    Without a broker (no REDIS_URL) the task runs in-process, so the row returned is done.
    With a broker the row comes back queued: callers answer 202 and poll its status.
    """
    from comparisons.tasks import compute_comparison_task  # tasks imports this module

    current = fingerprint(baseline, candidate)
    comparison = _row(baseline, candidate)
    if comparison.fingerprint == current and comparison.status == Comparison.Status.DONE:
        return comparison
    pending = (Comparison.Status.QUEUED, Comparison.Status.RUNNING)
    if comparison.fingerprint == current and comparison.status in pending and not settings.CELERY_TASK_ALWAYS_EAGER:
        return comparison  # already on its way
    Comparison.objects.filter(pk=comparison.pk).update(status=Comparison.Status.QUEUED, fingerprint=current)
    compute_comparison_task.delay(comparison.pk)
    return Comparison.objects.defer("points").get(pk=comparison.pk)


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


# --------------------------------------------------------------------------------------
# The benchmark.comparison.completed event
# --------------------------------------------------------------------------------------

EVENT_FIELDS = (
    "meanRewardDelta",
    "meanRewardDeltaCi95",
    "passRateDelta",
    "timeoutRateDelta",
    "p0QcGateRegressionCount",
    "evidenceCompletenessRate",
    "baselineEvidenceCompletenessRate",
    "valid",
    "invalidReasons",
    "headlineEligible",
    "headlineReasons",
    "decision",
    "remainingRisk",
    "mcnemarP",
    "pairedTasks",
)


def comparison_event(comparison: Comparison, *, sequence: int = 0, now: datetime | None = None) -> dict[str, Any]:
    """The Lime profile envelope for a finished comparison (agentruntime lime-profile-0.4.0)."""
    result = comparison.result or {}
    c = result.get("comparison", {})
    base, cand = result.get("baseline", {}), result.get("candidate", {})
    datasets = cand.get("datasets") or base.get("datasets") or [{}]
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    query = urlencode(
        {
            **Side(comparison.baseline_kind, comparison.baseline_id).query("baseline"),
            **Side(comparison.candidate_kind, comparison.candidate_id).query("candidate"),
        }
    )
    benchmark = {
        "datasetId": datasets[0].get("name") or "",
        "datasetVersion": datasets[0].get("version") or "",
        "configurationId": cand.get("configurationKey") or cand.get("label", ""),
        "role": "candidate",
        "baselineConfigurationId": base.get("configurationKey") or base.get("label", ""),
        "candidateConfigurationId": cand.get("configurationKey") or cand.get("label", ""),
    }
    return {
        "type": "benchmark.comparison.completed",
        "eventId": f"evt_comparison_{uuid.uuid4().hex}",
        "timestamp": stamp,
        "schemaVersion": "lime-profile-0.4.0",
        "runtimeId": "benchviewer",
        "sessionId": f"benchviewer-comparison-{comparison.pk}",
        "sequence": sequence,
        "benchmark": {k: v for k, v in benchmark.items() if v},
        # The schema types these fields as numbers: an unknown value is left out, not null.
        "comparison": {k: c[k] for k in EVENT_FIELDS if c.get(k) is not None},
        "refs": {
            "comparisonRef": f"{reverse('api-comparison')}?{query}",
            "baselineTrialsRef": base.get("trialsUrl", ""),
            "candidateTrialsRef": cand.get("trialsUrl", ""),
        },
        "payload": {
            "baseline": {"label": base.get("label"), "kind": base.get("kind"), "metrics": base.get("metrics")},
            "candidate": {"label": cand.get("label"), "kind": cand.get("kind"), "metrics": cand.get("metrics")},
            "guard": c.get("guard"),
            "flips": c.get("flips"),
            "bootstrap": c.get("bootstrap"),
            "fingerprint": comparison.fingerprint,
        },
    }


def save_comparison(comparison: Comparison, user: Any = None) -> SavedComparison:
    sequence = SavedComparison.objects.filter(comparison=comparison).count()
    event = comparison_event(comparison, sequence=sequence)
    result = comparison.result or {}
    title = f"{result.get('baseline', {}).get('label')} → {result.get('candidate', {}).get('label')}"
    return SavedComparison.objects.create(
        comparison=comparison,
        event_id=event["eventId"],
        title=title[:300],
        decision=event["comparison"].get("decision", ""),
        event=event,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
