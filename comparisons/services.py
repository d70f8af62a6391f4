"""Baseline / candidate comparisons: what views, the API and scripts call.

The flow: `sides.parse_sides` reads the request, `get_or_compute` returns the cached
Comparison row when its fingerprint still matches both sides' data, and otherwise queues
the Celery task, which calls `cache.run_comparison` -> `computation.compute`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from comparisons.cache import comparison_row, fingerprint
from comparisons.models import Comparison, SavedComparison
from comparisons.sides import Side
from comparisons.tasks import compute_comparison_task


def get_or_compute(baseline: Side, candidate: Side) -> Comparison:
    """The cached comparison when still fresh; otherwise queue the Celery task.

    Without a broker (no REDIS_URL) the task runs in-process, so the row returned is done.
    With a broker the row comes back queued: callers answer 202 and poll its status.
    """
    current = fingerprint(baseline, candidate)
    comparison = comparison_row(baseline, candidate)
    if comparison.fingerprint == current and comparison.status == Comparison.Status.DONE:
        return comparison
    pending = (Comparison.Status.QUEUED, Comparison.Status.RUNNING)
    if comparison.fingerprint == current and comparison.status in pending and not settings.CELERY_TASK_ALWAYS_EAGER:
        return comparison  # already on its way
    Comparison.objects.filter(pk=comparison.pk).update(status=Comparison.Status.QUEUED, fingerprint=current)
    compute_comparison_task.delay(comparison.pk)
    return Comparison.objects.defer("points").get(pk=comparison.pk)


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
