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

from comparisons.eligibility import headline_eligibility
from comparisons.format_reports import agentv_compare, openchrome_completion
from comparisons.metrics import (
    delta_or_none,
    denied_side_effects,
    metric_deltas,
    outcome_counts,
    p0_qc_gate_regressions,
    paired_statistics,
    side_metrics,
    task_matrix,
)
from comparisons.models import Comparison, SavedComparison
from comparisons.side_data import SideData, load_side
from comparisons.sides import Side
from comparisons.verdict import promotion, remaining_risk, validity_reasons
from trials.models import Configuration
from trials.triage.services import qc_fingerprint_for_trials

# Bump when the computation changes, so every cached comparison is computed again.
COMPUTE_VERSION = 3  # bump when the result's shape changes: cached results of another version are recomputed
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def qc_fingerprint(side: Side) -> list[Any]:
    """The QC-item part of the cache fingerprint: changes when a QC item is filed, edited or a waiver lapses."""
    return qc_fingerprint_for_trials(side.trials().values("pk"))


# --------------------------------------------------------------------------------------
# The whole comparison
# --------------------------------------------------------------------------------------


def compute(
    baseline: Side, candidate: Side, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The comparison result (for the page and API) and the per-trial points (for the charts)."""
    base, cand = load_side(baseline), load_side(candidate)
    base_metrics, cand_metrics = side_metrics(base), side_metrics(cand)
    invalid, one_side = validity_reasons(base, cand)
    paired = paired_statistics(base, cand, resamples=resamples, seed=seed)
    checksum_differs = any(r.startswith("verifier differs") for r in invalid)
    headline = headline_eligibility(base, cand, one_side, checksum_differs)
    comparison: dict[str, Any] = {
        "meanRewardDelta": paired["meanRewardDelta"],
        "meanRewardDeltaCi95": paired["meanRewardDeltaCi95"],
        "passRateDelta": delta_or_none(base_metrics["passRate"], cand_metrics["passRate"]),
        "timeoutRateDelta": delta_or_none(base_metrics["timeoutRate"], cand_metrics["timeoutRate"]),
        "p0QcGateRegressionCount": p0_qc_gate_regressions(candidate.trials().values("pk")),
        "evidenceCompletenessRate": cand_metrics["evidenceCompletenessRate"],
        "baselineEvidenceCompletenessRate": base_metrics["evidenceCompletenessRate"],
        "valid": not invalid,
        "invalidReasons": invalid,
        "headlineEligible": headline["eligible"],
        "headlineReasons": headline["reasons"],
        "pairedTasks": paired["pairedTasks"],
        "flips": paired["flips"],
        "mcnemarP": paired["mcnemarP"],
        "bootstrap": paired["bootstrap"],
    }
    comparison.update(promotion(comparison))
    comparison["remainingRisk"] = remaining_risk(
        comparison, base_metrics, cand_metrics, len(one_side["baseline"]) + len(one_side["candidate"])
    )
    matrix = task_matrix(base, cand)
    for row in matrix:
        row["headlineReasons"] = headline["perTask"][row["task"]]
    shared = set(base.tasks) & set(cand.tasks)
    result = {
        "computeVersion": COMPUTE_VERSION,
        # Whether "same verifier" was checked at all: packs without task checksums cannot tell.
        "verifierChecked": any((base.tasks[t].checksums | cand.tasks[t].checksums) - {""} for t in shared),
        "baseline": _side_info(base, "baseline", base_metrics),
        "candidate": _side_info(cand, "candidate", cand_metrics),
        "comparison": comparison,
        "deltas": metric_deltas(base_metrics, cand_metrics, paired["rewardKeyDeltas"]),
        "headline": {k: v for k, v in headline.items() if k != "perTask"},
        "tasksOnOneSide": one_side,
        "tasks": matrix,
        "outcomeCounts": outcome_counts(matrix),
    }
    formats = base.source_formats | cand.source_formats
    if "agentv" in formats:
        result["agentv"] = agentv_compare(base, cand)
    if "openchrome" in formats:
        result["openchrome"] = openchrome_completion(base, cand)
    return result, {"baseline": _points(base), "candidate": _points(cand)}


def _side_info(data: SideData, role: str, metrics: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": role,
        "kind": data.side.kind,
        "id": data.side.id,
        "label": data.label,
        "configurationKey": _configuration_key(data),
        "datasets": [{"name": n, "version": v} for n, v in sorted(data.datasets)],
        "sourceFormats": sorted(data.source_formats),
        "measurementModes": data.modes,
        "trialsUrl": data.side.trials_url(),
        "metrics": metrics,
    }


def _configuration_key(data: SideData) -> str:
    """The configuration id the side ran: a job's too, when all its trials ran one ("" when several)."""
    if len(data.configuration_ids) != 1:
        return ""
    [config_id] = data.configuration_ids
    return Configuration.objects.filter(pk=config_id).values_list("key", flat=True).first() or ""


def _points(data: SideData) -> dict[str, list[Any]]:
    """Per-trial columns for the distribution and cost/reward charts."""
    rows = data.rows
    return {
        "id": [r["id"] for r in rows],
        "task": [r["task__name"] or "" for r in rows],
        "reward": [r["reward"] for r in rows],
        "cost": [r["cost_usd"] for r in rows],
        "status": [r["status"] for r in rows],
    }


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
