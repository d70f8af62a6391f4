"""The benchmark.comparison.completed event: a finished comparison as a Lime profile envelope.

`comparison_event` builds it from the stored result (agentruntime lime-profile-0.4.0);
saving a comparison (services.save_comparison) records one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from comparisons.models import Comparison
from comparisons.statistics.sides import Side

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
    "missingConditions",
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
