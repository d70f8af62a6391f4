"""Saved comparisons: each reopened as saved (its event) and as it stands now, with what changed.

A SavedComparison keeps the `benchmark.comparison.completed` event it recorded; the sides
come from its Comparison row. `changes` lists the figures whose value now differs.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.urls import reverse

from comparisons.models import SavedComparison
from comparisons.pair.formatting import formatted
from comparisons.statistics.sides import Side

# Figures compared when a saved comparison is reopened, with the label the page shows.
FIGURE_LABELS = {
    "decision": "Decision",
    "missingConditions": "Missing conditions",
    "meanRewardDelta": "Mean reward Δ",
    "meanRewardDeltaCi95": "Mean reward Δ CI95",
    "passRateDelta": "Pass rate Δ",
    "timeoutRateDelta": "Timeout rate Δ",
    "p0QcGateRegressionCount": "P0 QC gate regressions",
    "evidenceCompletenessRate": "Evidence completeness (candidate)",
    "baselineEvidenceCompletenessRate": "Evidence completeness (baseline)",
    "pairedTasks": "Paired tasks",
    "mcnemarP": "McNemar p",
    "valid": "Valid",
    "invalidReasons": "Invalid because",
    "headlineEligible": "Headline-eligible",
    "headlineReasons": "Headline reasons",
    "remainingRisk": "Remaining risk",
}


# How a figure reads (comparisons.pair.formatting kinds); the rest as `shown` says.
FIGURE_KINDS = {
    "meanRewardDelta": "delta",
    "meanRewardDeltaCi95": "delta",
    "passRateDelta": "dpct",
    "timeoutRateDelta": "dpct",
    "evidenceCompletenessRate": "pct",
    "baselineEvidenceCompletenessRate": "pct",
}


def saved_list() -> QuerySet[SavedComparison]:
    """Newest first, with who saved each and its sides (the event itself is not read)."""
    return (
        SavedComparison.objects.select_related("created_by", "comparison")
        .defer("event", "comparison__result", "comparison__points")
        .order_by("-created_at", "-pk")
    )


def sides_of(saved: SavedComparison) -> tuple[Side, Side] | None:
    """Its baseline and candidate; None when its comparison row is gone."""
    c = saved.comparison
    if c is None:
        return None
    return Side(c.baseline_kind, c.baseline_id), Side(c.candidate_kind, c.candidate_id)


def side_summary(saved: SavedComparison) -> dict[str, Any]:
    """Who saved it, when, the sides and the decision: a row of the list page and API."""
    sides = sides_of(saved)
    labels = saved.title.split(" → ", 1) + [""]
    roles = {}
    for i, role in enumerate(("baseline", "candidate")):
        side = sides[i] if sides else None
        roles[role] = {"kind": side.kind if side else None, "id": side.id if side else None, "label": labels[i]}
    query = urlencode({**sides[0].query("baseline"), **sides[1].query("candidate")}) if sides else ""
    return {
        "id": saved.pk,
        "eventId": saved.event_id,
        "savedBy": saved.created_by.get_username() if saved.created_by else None,
        "savedAt": saved.created_at,
        "decision": saved.decision,
        **roles,
        "pageUrl": reverse("comparison-saved-detail", args=[saved.pk]),
        "nowUrl": f"{reverse('comparison')}?{query}" if sides else None,
        "downloadUrl": reverse("api-comparison-event", args=[saved.pk]),
        "apiUrl": reverse("api-comparison-saved-detail", args=[saved.pk]),
    }


def figures(then: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure of a saved event, for the page."""
    return [{"figure": key, "label": label, "saved": shown(then.get(key), key)} for key, label in FIGURE_LABELS.items()]


def changes(then: dict[str, Any], now: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures whose value differs between the saved event and the comparison now."""
    return [
        {"figure": key, "label": label, "saved": then.get(key), "now": now.get(key)}
        for key, label in FIGURE_LABELS.items()
        if not _same(then.get(key), now.get(key))
    ]


def shown(value: Any, figure: str = "") -> list[str]:
    """A figure as lines of text: as the comparison page writes it (pp, %, signed), a list one item a
    line, other numbers to 4 significant digits, yes / no, unknown as —."""
    if value is None:
        return ["—"]
    if (kind := FIGURE_KINDS.get(figure)) and isinstance(value, int | float) and not isinstance(value, bool):
        return [formatted(value, kind)]
    if isinstance(value, bool):  # not Python's True / False on a page
        return ["yes" if value else "no"]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value or ["none"]
    if isinstance(value, list):
        return [", ".join(shown(v, figure)[0] for v in value)]
    if isinstance(value, float):
        return [f"{value:.4g}"]
    return [str(value)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
