"""The whole comparison: every part computed from both sides, assembled into one result.

`compute` loads both sides once, runs the metrics, validity, headline eligibility and
verdict over them, and returns the result the page and API show and the per-trial
points the charts draw. It stores nothing: `run_comparison` does.
"""

from __future__ import annotations

from typing import Any

from comparisons.statistics.eligibility import headline_eligibility
from comparisons.statistics.format_reports import REPORTS
from comparisons.statistics.metrics import (
    delta_or_none,
    leaderboard_delta,
    metric_deltas,
    outcome_counts,
    p0_qc_gate_regressions,
    paired_statistics,
    score_intervals,
    side_metrics,
    task_matrix,
)
from comparisons.statistics.side_data import SideData, load_sides, unpaired_by_dataset
from comparisons.statistics.sides import Side
from comparisons.statistics.verdict import promotion, remaining_risk, validity_reasons
from trials.ingest.formats.detect import traits_of
from trials.models import Configuration

# Bump when the computation changes, so every cached comparison is computed again.
COMPUTE_VERSION = 11  # bump when the result's shape changes: cached results of another version are recomputed
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
# Which score the decision reads (the page and API say it beside the decision).
DECISION_BASIS = "scored trials, infrastructure failures included; attempts averaged within each task"


def compute(
    baseline: Side, candidate: Side, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The comparison result (for the page and API) and the per-trial points (for the charts)."""
    base, cand = load_sides([baseline, candidate])
    base_metrics, cand_metrics = side_metrics(base), side_metrics(cand)
    base_metrics |= score_intervals(base, resamples=resamples, seed=seed)
    cand_metrics |= score_intervals(cand, resamples=resamples, seed=seed)
    invalid, one_side = validity_reasons(base, cand)
    paired = paired_statistics(base, cand, resamples=resamples, seed=seed)
    checksum_differs = any(r.startswith("verifier differs") for r in invalid)
    headline = headline_eligibility(base, cand, one_side, checksum_differs)
    comparison: dict[str, Any] = {
        "meanRewardDelta": paired["meanRewardDelta"],
        "meanRewardDeltaCi95": paired["meanRewardDeltaCi95"],
        "meanRewardDeltaSe": paired["meanRewardDeltaSe"],
        # the same delta by the source's rule (an unscored trial counts as 0), over the tasks both sides ran
        "leaderboardDelta": leaderboard_delta(base, cand),
        "passRateDelta": delta_or_none(base_metrics["passRate"], cand_metrics["passRate"]),
        "timeoutRateDelta": delta_or_none(base_metrics["timeoutRate"], cand_metrics["timeoutRate"]),
        "p0QcGateRegressionCount": p0_qc_gate_regressions(candidate.trials().values("pk")),
        "evidenceCompletenessRate": cand_metrics["evidenceCompletenessRate"],
        "baselineEvidenceCompletenessRate": base_metrics["evidenceCompletenessRate"],
        # (the seed's evidence gate is for sources that carry Lime evidence: trials.ingest.completeness.applies)
        "evidenceApplies": base.lime_evidence or cand.lime_evidence,
        "sourceFormats": sorted(base.source_formats | cand.source_formats),
        "valid": not invalid,
        "invalidReasons": invalid,
        "headlineEligible": headline["eligible"],
        "headlineReasons": headline["reasons"],
        "pairedTasks": paired["pairedTasks"],
        # the tasks each side's own mean is taken over (the Figures table's mean reward, not paired)
        "scoredTasks": {"baseline": _scored_tasks(base), "candidate": _scored_tasks(cand)},
        # tasks of the same name in another dataset on the other side: never one task, so not paired
        "unpairedAcrossDatasets": unpaired_by_dataset(base, cand),
        "flips": paired["flips"],
        "mcnemarP": paired["mcnemarP"],
        "bootstrap": paired["bootstrap"],
        "mde": paired["mde"],
        "moreAttemptsPerTask": paired["moreAttemptsPerTask"],
        "moreTasks": paired["moreTasks"],
        "decisionBasis": DECISION_BASIS,
    }
    comparison.update(promotion(comparison))
    risks = remaining_risk(
        comparison, base_metrics, cand_metrics, len(one_side["baseline"]) + len(one_side["candidate"])
    )
    comparison["remainingRisk"] = [text for text, _ in risks]
    # each risk's counts and what they count, for the page's links (comparisons.pair.figures.linked)
    comparison["remainingRiskCounts"] = [counts for _, counts in risks]
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
    reports = {traits_of(fmt).comparison_report for fmt in base.source_formats | cand.source_formats} - {""}
    for report in sorted(reports):
        result[report] = REPORTS[report](base, cand)
    return result, {"baseline": _points(base), "candidate": _points(cand)}


def _scored_tasks(data: SideData) -> int:
    return sum(1 for cell in data.tasks.values() if cell.scored)


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
