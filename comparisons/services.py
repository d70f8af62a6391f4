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
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import numpy as np
import orjson
from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.urls import reverse

from benchviewer.ids import parse_pk
from comparisons import stats
from comparisons.models import Comparison, SavedComparison, SideKind
from trials.models import Configuration, Job, PermissionDecision, Trial
from trials.triage.queries import p0_qc_items_for_trials, qc_fingerprint_for_trials
from trials.viewer.text import isolated

# Bump when the computation changes, so every cached comparison is computed again.
COMPUTE_VERSION = 3  # bump when the result's shape changes: cached results of another version are recomputed
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
AGENTV_THRESHOLD = 0.1
AGGREGATE_MIN_SAMPLES = 10
PER_TASK_MIN_SAMPLES = 20
HEADLINE_MODES = ("live", "live-llm", "recorded-real")
SIGNIFICANCE = 0.05
DELTA_EPSILON = 1e-9
DECIDED_STATUSES = ("passed", "failed", "timeout")
PASS_AT_K = (1, 3, 5, 10)

TRIAL_FIELDS = (
    "id",
    "task__name",
    "task__checksum",
    "dataset__name",
    "dataset__version",
    "status",
    "reward",
    "rewards",
    "duration_sec",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "is_complete",
    "source_format",
    "provenance",
    "configuration_id",
    "job_id",
)


# --------------------------------------------------------------------------------------
# Sides
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One side of a comparison: every trial of a configuration, or of a job."""

    kind: str
    id: int

    def trials(self) -> QuerySet[Trial]:
        if self.kind == SideKind.JOB:
            return Trial.objects.filter(job_id=self.id)
        return Trial.objects.filter(configuration_id=self.id)

    def query(self, role: str) -> dict[str, int]:
        """The API/page parameters that select this side (`baseline=3` or `baseline_job=3`)."""
        return {role if self.kind == SideKind.CONFIGURATION else f"{role}_job": self.id}

    def trials_url(self, **filters: Any) -> str:
        params = {self.kind: self.id, **{k: v for k, v in filters.items() if v not in (None, "")}}
        return f"{reverse('trial-list')}?{urlencode(params, doseq=True)}"

    def label(self) -> str:
        if self.kind == SideKind.JOB:
            job = Job.objects.filter(pk=self.id).values_list("name", flat=True).first()
            return f"job {isolated(job)} #{self.id}" if job else f"job #{self.id}"  # job names repeat; ids do not
        key = Configuration.objects.filter(pk=self.id).values_list("key", flat=True).first()
        return isolated(key) if key else f"configuration #{self.id}"


class SideError(ValueError):
    """The request does not name a baseline and a candidate that exist."""


def parse_sides(params: Any) -> tuple[Side, Side]:
    """Read `baseline` / `candidate` (configuration ids) or `baseline_job` / `candidate_job`.

    `params`: query parameters, a form, or a JSON body (where ids may be numbers).
    """
    if not hasattr(params, "get"):
        raise SideError("send the sides as query parameters or a JSON object, not " + type(params).__name__)
    sides = []
    for role in ("baseline", "candidate"):
        side = _parse_side(params, role)
        if side is None:
            raise SideError(f"choose a {role}: ?{role}=<configuration id> or ?{role}_job=<job id>")
        sides.append(side)
    return sides[0], sides[1]


def _parse_side(params: Any, role: str) -> Side | None:
    for kind, name, model in ((SideKind.CONFIGURATION, role, Configuration), (SideKind.JOB, f"{role}_job", Job)):
        value = params.get(name)
        value = str(value).strip() if value is not None and not isinstance(value, (bool, list, dict)) else ""
        if not value:
            continue
        pk = parse_pk(value)
        if pk is None or not model.objects.filter(pk=pk).exists():
            raise SideError(f"{name}={value!r} is not a known {kind} id")
        return Side(kind, pk)
    return None


# --------------------------------------------------------------------------------------
# Loading and summarising one side
# --------------------------------------------------------------------------------------


@dataclass
class TaskCell:
    """One task on one side: its attempts, reduced to what the comparison needs."""

    name: str
    checksums: set[str] = field(default_factory=set)
    trial_ids: list[int] = field(default_factory=list)
    scored: list[float] = field(default_factory=list)
    by_key: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    passes: int = 0
    decided: int = 0
    errored: int = 0
    missing: int = 0
    timeouts: int = 0
    not_headline_modes: set[str] = field(default_factory=set)
    postcondition_missing: int = 0

    @property
    def mean(self) -> float | None:
        return stats.mean_or_none(self.scored)

    @property
    def passed(self) -> bool | None:
        """A task counts as passed when at least half of its decided attempts passed."""
        return None if not self.decided else self.passes * 2 >= self.decided

    def summary(self) -> dict[str, Any]:
        return {
            "n": len(self.trial_ids),
            "scored": len(self.scored),
            "mean": self.mean,
            "passes": self.passes,
            "decided": self.decided,
            "passRate": self.passes / self.decided if self.decided else None,
            "errored": self.errored,
            "missing": self.missing,
            "timeouts": self.timeouts,
            "passed": self.passed,
        }


@dataclass
class SideData:
    side: Side
    label: str
    rows: list[dict[str, Any]]
    tasks: dict[str, TaskCell]
    datasets: set[tuple[str, str]]
    configuration_ids: set[int]
    job_ids: set[int]
    source_formats: set[str]
    modes: dict[str, int]


def measurement_mode(provenance: dict[str, Any] | None) -> str | None:
    """How the trial was measured. OpenChrome rows carry it; Harbor trials do not (None)."""
    provenance = provenance or {}
    for key in ("measurementMode", "measurement_mode", "mode", "evidence_tier"):
        value = provenance.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def postcondition_evaluated(row: dict[str, Any]) -> bool:
    """OpenChrome rows say so explicitly; elsewhere the verifier's reward is the final check."""
    provenance = row["provenance"] or {}
    if "finalPostconditionEvaluated" in provenance:
        return provenance["finalPostconditionEvaluated"] is True
    return row["reward"] is not None


def load_side(side: Side) -> SideData:
    rows = list(side.trials().order_by().values(*TRIAL_FIELDS))
    tasks: dict[str, TaskCell] = {}
    modes: dict[str, int] = defaultdict(int)
    for row in rows:
        name = row["task__name"] or "(no task)"
        cell = tasks.get(name) or tasks.setdefault(name, TaskCell(name))
        _add_row(cell, row)
        modes[measurement_mode(row["provenance"]) or "unknown"] += 1
    return SideData(
        side=side,
        label=side.label(),
        rows=rows,
        tasks=tasks,
        datasets={(r["dataset__name"] or "", r["dataset__version"] or "") for r in rows},
        configuration_ids={r["configuration_id"] for r in rows if r["configuration_id"]},
        job_ids={r["job_id"] for r in rows if r["job_id"]},
        source_formats={r["source_format"] for r in rows},
        modes=dict(modes),
    )


def _add_row(cell: TaskCell, row: dict[str, Any]) -> None:
    cell.trial_ids.append(row["id"])
    cell.checksums.add(row["task__checksum"] or "")
    status = row["status"]
    # Missing and errored rewards are counted, never averaged in as zero.
    if status == Trial.Status.ERRORED:
        cell.errored += 1
    elif row["reward"] is None:
        cell.missing += 1
    else:
        cell.scored.append(row["reward"])
        for key, value in (row["rewards"] or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                cell.by_key[key].append(float(value))
    if status in DECIDED_STATUSES:
        cell.decided += 1
        cell.passes += status == Trial.Status.PASSED
    cell.timeouts += status == Trial.Status.TIMEOUT
    mode = measurement_mode(row["provenance"])
    if mode not in HEADLINE_MODES:
        cell.not_headline_modes.add(mode or "unknown")
    if not postcondition_evaluated(row):
        cell.postcondition_missing += 1


def side_metrics(data: SideData) -> dict[str, Any]:
    """The figures of one side. Means of rewards are over tasks (attempts averaged first)."""
    rows = data.rows
    n = len(rows)
    task_means = [m for m in (c.mean for c in data.tasks.values()) if m is not None]
    passes = sum(c.passes for c in data.tasks.values())
    decided = sum(c.decided for c in data.tasks.values())
    tokens = [(r["input_tokens"] or 0) + (r["output_tokens"] or 0) for r in rows if _has_tokens(r)]
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    durations = [r["duration_sec"] for r in rows if r["duration_sec"] is not None]
    complete = sum(1 for r in rows if r["is_complete"])
    return {
        "trials": n,
        "tasks": len(data.tasks),
        "meanReward": stats.mean_or_none(task_means),
        "scoredTrials": sum(len(c.scored) for c in data.tasks.values()),
        "erroredTrials": sum(c.errored for c in data.tasks.values()),
        "missingRewardTrials": sum(c.missing for c in data.tasks.values()),
        "passes": passes,
        "decided": decided,
        "passRate": passes / decided if decided else None,
        "passRateCi95": stats.proportion_ci(passes, decided),
        "timeoutRate": sum(c.timeouts for c in data.tasks.values()) / n if n else None,
        "meanDurationSec": stats.mean_or_none(durations),
        "tokensPerTrial": sum(tokens) / len(tokens) if tokens else None,
        "tokensPerSuccess": sum(tokens) / passes if tokens and passes else None,
        "costPerTrial": sum(costs) / len(costs) if costs else None,
        "costPerSuccess": sum(costs) / passes if costs and passes else None,
        "evidenceCompletenessRate": complete / n if n else None,
        "deniedSideEffects": denied_side_effects(data.side),
        "passAtK": _pass_at_k(data.tasks.values()),
        "rewardKeys": _reward_key_means(data.tasks.values()),
    }


def _has_tokens(row: dict[str, Any]) -> bool:
    return row["input_tokens"] is not None or row["output_tokens"] is not None


def _pass_at_k(cells: Any) -> dict[str, float]:
    """Mean over tasks of the unbiased pass@k, for each k every task has enough attempts for."""
    cells = [c for c in cells if c.decided]
    if not cells:
        return {}
    fewest = min(c.decided for c in cells)
    result = {}
    for k in PASS_AT_K:
        if k <= fewest:
            result[str(k)] = float(np.mean([stats.pass_at_k(c.decided, c.passes, k) for c in cells]))
    return result


def _reward_key_means(cells: Any) -> dict[str, float]:
    per_key: dict[str, list[float]] = defaultdict(list)
    for cell in cells:
        for key, values in cell.by_key.items():
            per_key[key].append(float(np.mean(values)))
    return {key: float(np.mean(means)) for key, means in sorted(per_key.items())}


def denied_side_effects(side: Side) -> int:
    """Permission denials after which the side effect happened anyway."""
    filters = {"trial__job_id" if side.kind == SideKind.JOB else "trial__configuration_id": side.id}
    return PermissionDecision.objects.filter(
        decision=PermissionDecision.Decision.DENY, side_effect_after_denial=True, **filters
    ).count()


def p0_qc_gate_regressions(candidate_trial_ids: Any) -> int:
    """How many P0 QC gates the candidate regressed.

    The sum of what each candidate trial's Lime evidence pack reports
    (`decisionInputs.p0QcGateRegressionCount`, positive values) and the open P0 QC items
    triagers filed against these trials that no unexpired waiver covers
    (trials.triage.services.p0_qc_items_for_trials). It is the only place that knows
    where the number comes from.
    """
    values = (
        Trial.objects.filter(pk__in=candidate_trial_ids)
        .annotate(p0=KT("documents__evidence_pack__decisionInputs__p0QcGateRegressionCount"))
        .exclude(p0=None)
        .values_list("p0", flat=True)
    )
    total = 0
    for value in values:
        try:
            total += max(int(float(value)), 0)
        except (TypeError, ValueError):
            continue
    return total + p0_qc_items_for_trials(candidate_trial_ids)


def qc_fingerprint(side: Side) -> list[Any]:
    """The QC-item part of the cache fingerprint: changes when a QC item is filed, edited or a waiver lapses."""
    return qc_fingerprint_for_trials(side.trials().values("pk"))


# --------------------------------------------------------------------------------------
# Validity, pairing, eligibility, guard
# --------------------------------------------------------------------------------------


def validity_reasons(base: SideData, cand: SideData) -> tuple[list[str], dict[str, list[str]]]:
    """Why the two sides are not comparable (empty when they are), and the unpaired tasks."""
    reasons: list[str] = []
    if base.side == cand.side:
        reasons.append("baseline and candidate are the same trials")
    for data, role in ((base, "baseline"), (cand, "candidate")):
        if not data.rows:
            reasons.append(f"{role} has no trials")
    reasons += _dataset_reasons(base.datasets, cand.datasets)
    shared = sorted(set(base.tasks) & set(cand.tasks))
    changed = [t for t in shared if base.tasks[t].checksums != cand.tasks[t].checksums]
    if changed:
        listed = ", ".join(changed[:5]) + (", …" if len(changed) > 5 else "")
        reasons.append(f"verifier differs (task checksum) on {len(changed)} task(s): {listed}")
    one_side = {
        "baseline": sorted(set(base.tasks) - set(cand.tasks)),
        "candidate": sorted(set(cand.tasks) - set(base.tasks)),
    }
    if one_side["baseline"] or one_side["candidate"]:
        reasons.append(
            f"task sets differ: {len(one_side['baseline'])} task(s) only in baseline, "
            f"{len(one_side['candidate'])} only in candidate"
        )
    return reasons, one_side


def _dataset_reasons(base: set[tuple[str, str]], cand: set[tuple[str, str]]) -> list[str]:
    if not base or not cand or base == cand:
        return []

    def show(datasets: set[tuple[str, str]]) -> str:
        return ", ".join(f"{n}@{v}" if v else n for n, v in sorted(datasets)) or "none"

    if {n for n, _ in base} == {n for n, _ in cand}:
        return [f"dataset version differs: baseline {show(base)}, candidate {show(cand)}"]
    return [f"dataset differs: baseline {show(base)}, candidate {show(cand)}"]


def _outcome(base: TaskCell | None, cand: TaskCell | None) -> str:
    if base is None:
        return "candidate only"
    if cand is None:
        return "baseline only"
    if base.mean is None or cand.mean is None:
        return "no reward"
    if base.passed is not None and cand.passed is not None and base.passed != cand.passed:
        return "flipped"
    delta = cand.mean - base.mean
    if delta > DELTA_EPSILON:
        return "improved"
    if delta < -DELTA_EPSILON:
        return "regressed"
    return "unchanged"


def task_matrix(base: SideData, cand: SideData) -> list[dict[str, Any]]:
    rows = []
    for name in sorted(set(base.tasks) | set(cand.tasks)):
        b, c = base.tasks.get(name), cand.tasks.get(name)
        delta = c.mean - b.mean if b and c and b.mean is not None and c.mean is not None else None
        flip = None
        if c is not None and _outcome(b, c) == "flipped":  # (flipped: both sides have the task)
            flip = "fail → pass" if c.passed else "pass → fail"
        rows.append(
            {
                "task": name,
                "baseline": b.summary() if b else None,
                "candidate": c.summary() if c else None,
                "delta": delta,
                "outcome": _outcome(b, c),
                "flip": flip,
                "baselineUrl": base.side.trials_url(task=name),
                "candidateUrl": cand.side.trials_url(task=name),
                "checksumsDiffer": bool(b and c and b.checksums != c.checksums),
            }
        )
    return rows


def paired_statistics(base: SideData, cand: SideData, *, resamples: int, seed: int) -> dict[str, Any]:
    """Reward delta with its bootstrap CI95 over paired tasks, and McNemar on pass/fail flips."""
    paired = [
        t
        for t in sorted(set(base.tasks) & set(cand.tasks))
        if base.tasks[t].mean is not None and cand.tasks[t].mean is not None
    ]
    b = np.array([base.tasks[t].mean for t in paired], dtype=float)
    c = np.array([cand.tasks[t].mean for t in paired], dtype=float)
    decided = [t for t in paired if base.tasks[t].passed is not None and cand.tasks[t].passed is not None]
    to_fail = sum(1 for t in decided if base.tasks[t].passed and not cand.tasks[t].passed)
    to_pass = sum(1 for t in decided if not base.tasks[t].passed and cand.tasks[t].passed)
    ci = stats.paired_bootstrap_ci(b, c, resamples=resamples, seed=seed)
    return {
        "pairedTasks": len(paired),
        "meanRewardDelta": float(np.mean(c - b)) if paired else None,
        "meanRewardDeltaCi95": list(ci) if ci else None,
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "task"},
        "flips": {"passToFail": to_fail, "failToPass": to_pass, "pairedTasks": len(decided)},
        "mcnemarP": stats.mcnemar_exact(to_fail, to_pass),
        "rewardKeyDeltas": _reward_key_deltas(base, cand, paired),
    }


def _reward_key_deltas(base: SideData, cand: SideData, paired: list[str]) -> dict[str, float]:
    deltas: dict[str, list[float]] = defaultdict(list)
    for task in paired:
        b, c = base.tasks[task].by_key, cand.tasks[task].by_key
        for key in set(b) & set(c):
            deltas[key].append(float(np.mean(c[key]) - np.mean(b[key])))
    return {key: float(np.mean(values)) for key, values in sorted(deltas.items())}


# What each headline rule reads from our data (shown on the page under "Headline eligibility").
HEADLINE_RULES = (
    ("measurement mode", "trial.provenance measurementMode / mode (OpenChrome); Harbor trials carry none: unknown"),
    ("final postcondition", "OpenChrome provenance.finalPostconditionEvaluated; otherwise a verifier reward exists"),
    ("same task definitions", "task names and task checksums on both sides"),
    ("versions pinned", "configuration.agent_version of every configuration on both sides"),
    ("environment pinned", "job config / extra `environment`, or the Harbor trial config's environment"),
    ("sample count", f"scored trials per side (>= {AGGREGATE_MIN_SAMPLES}) and per task (>= {PER_TASK_MIN_SAMPLES})"),
    ("LLM settings pinned", "model id, temperature, max steps, token and cost budgets in profiles or job config"),
)
_LLM_PINS = {
    "temperature": ("temperature",),
    "max-step budget": ("max_steps", "maxSteps", "max_turns", "maxTurns", "max_episodes"),
    "token budget": ("max_tokens", "maxTokens", "token_budget", "tokenBudget", "max_total_tokens"),
    "max-cost budget": ("max_cost", "maxCost", "max_cost_usd", "maxCostUsd", "cost_budget", "costBudgetUsd"),
}


def headline_eligibility(
    base: SideData, cand: SideData, one_side: dict[str, list[str]], checksum_differs: bool
) -> dict[str, Any]:
    """Seed 003 / OpenChrome claim-eligibility, for the aggregate claim and for each task."""
    sides = (base, cand)
    mode_reasons = _mode_reasons(sides)
    shared = []
    if any(c.postcondition_missing for d in sides for c in d.tasks.values()):
        shared.append("final task postcondition was not evaluated")
    if checksum_differs or one_side["baseline"] or one_side["candidate"]:
        shared.append("same task contracts were not used for every compared library")
    pins = _pin_reasons(sides)
    samples = min(sum(len(c.scored) for c in d.tasks.values()) for d in sides)
    aggregate = list(mode_reasons)
    if samples < AGGREGATE_MIN_SAMPLES:
        aggregate.append(f"sample count {samples} is below aggregate threshold N >= {AGGREGATE_MIN_SAMPLES}")
    aggregate += shared + pins
    return {
        "eligible": not aggregate,
        "tier": "primary-realworld" if not aggregate else "diagnostic-only",
        "reasons": aggregate,
        "requiredSamples": AGGREGATE_MIN_SAMPLES,
        "sampleCount": samples,
        "rules": [{"rule": rule, "reads": reads} for rule, reads in HEADLINE_RULES],
        "perTask": {name: _task_reasons(name, base, cand, pins) for name in sorted(set(base.tasks) | set(cand.tasks))},
    }


def _mode_reasons(sides: tuple[SideData, ...]) -> list[str]:
    reasons = []
    modes = sorted({m for d in sides for m in d.modes if m not in HEADLINE_MODES})
    for mode in modes:
        if mode == "unknown":
            reasons.append("measurement mode unknown")
        else:
            reasons.append(f"measurement mode {mode} is not headline-eligible; use live or recorded-real")
    return reasons


def _task_reasons(name: str, base: SideData, cand: SideData, pins: list[str]) -> list[str]:
    cells = [d.tasks.get(name) for d in (base, cand)]
    reasons = []
    present = [c for c in cells if c is not None]
    for mode in sorted({m for c in present for m in c.not_headline_modes}):
        reasons.append(
            "measurement mode unknown"
            if mode == "unknown"
            else f"measurement mode {mode} is not headline-eligible; use live or recorded-real"
        )
    samples = min(len(c.scored) if c else 0 for c in cells)
    if samples < PER_TASK_MIN_SAMPLES:
        reasons.append(f"sample count {samples} is below per-task threshold N >= {PER_TASK_MIN_SAMPLES}")
    if any(c.postcondition_missing for c in present):
        reasons.append("final task postcondition was not evaluated")
    if cells[0] is None or cells[1] is None or cells[0].checksums != cells[1].checksums:
        reasons.append("same task contracts were not used for every compared library")
    return reasons + pins


def _pin_reasons(sides: tuple[SideData, ...]) -> list[str]:
    configuration_ids = set().union(*(d.configuration_ids for d in sides))
    job_ids = set().union(*(d.job_ids for d in sides))
    configurations = list(
        Configuration.objects.filter(pk__in=configuration_ids).values("key", "agent_version", "model_name", "profiles")
    )
    jobs = list(Job.objects.filter(pk__in=job_ids).values("id", "config", "extra"))
    reasons = []
    if not configurations or any(not c["agent_version"] for c in configurations):
        reasons.append("competitor/library versions are not pinned")
    if not jobs or any(not _job_environment(j) for j in jobs):
        reasons.append("environment metadata is not pinned")
    if _llm_unpinned(configurations, jobs):
        reasons.append("LLM model/settings/budgets are not pinned")
    return reasons


def _job_environment(job: dict[str, Any]) -> bool:
    for source in (job["config"] or {}, job["extra"] or {}):
        if isinstance(source.get("environment"), dict) and source["environment"]:
            return True
    # Harbor writes the environment into each trial's config.json rather than the job's.
    return (
        Trial.objects.filter(job_id=job["id"])
        .annotate(env=KT("documents__config__environment__type"))
        .exclude(env=None)
        .exists()
    )


def _llm_unpinned(configurations: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]]) -> bool:
    """LLM-driven rows (a model name is set) must pin model id, temperature and budgets."""
    llm = [c for c in configurations if c["model_name"]]
    if not llm:
        return False
    found: set[str] = set()
    for source in [c["profiles"] for c in llm] + [j["config"] for j in jobs] + [j["extra"] for j in jobs]:
        found |= _keys_in(source)
    return any(not (set(names) & found) for names in _LLM_PINS.values())


def _keys_in(value: Any, depth: int = 0) -> set[str]:
    """Every dict key (with a non-null value) in a nested JSON value, to a small depth."""
    if depth > 5:
        return set()
    if isinstance(value, dict):
        keys = {k for k, v in value.items() if v is not None}
        for v in value.values():
            keys |= _keys_in(v, depth + 1)
        return keys
    if isinstance(value, list):
        return set().union(*(_keys_in(v, depth + 1) for v in value[:50])) if value else set()
    return set()


def promotion(comparison: dict[str, Any]) -> dict[str, Any]:
    """The seed-000 guard, the decision and the risk that remains after it."""
    delta = comparison["meanRewardDelta"]
    ci = comparison["meanRewardDeltaCi95"]
    cand_rate = comparison["evidenceCompletenessRate"]
    base_rate = comparison["baselineEvidenceCompletenessRate"]
    guard = [
        {"check": "meanRewardDelta >= 0", "ok": delta is not None and delta >= 0, "value": delta},
        {
            "check": "p0QcGateRegressionCount == 0",
            "ok": comparison["p0QcGateRegressionCount"] == 0,
            "value": comparison["p0QcGateRegressionCount"],
        },
        {
            "check": "evidenceCompletenessRate >= baselineEvidenceCompletenessRate",
            "ok": cand_rate is not None and base_rate is not None and cand_rate >= base_rate,
            "value": [cand_rate, base_rate],
        },
    ]
    guard_passes = all(g["ok"] for g in guard)
    if guard_passes and comparison["valid"]:
        decision = "promote"
    elif delta is not None and delta < 0 and ci is not None and ci[1] < 0:
        decision = "revert"
    else:
        decision = "hold"
    return {"guard": guard, "guardPasses": guard_passes, "decision": decision}


def remaining_risk(c: dict[str, Any], base: dict[str, Any], cand: dict[str, Any], one_side: int) -> list[str]:
    """Plain sentences: what the numbers do not rule out."""
    risks = [f"comparison invalid: {reason}" for reason in c["invalidReasons"]]
    ci = c["meanRewardDeltaCi95"]
    if c["meanRewardDelta"] is None:
        risks.append("no task has a reward on both sides, so there is no reward delta")
    elif ci and ci[0] == ci[1] == 0:
        risks.append("no reward difference: the two sides score the same on every paired task")
    elif ci and ci[0] <= 0 <= ci[1]:
        risks.append(f"CI95 of the reward delta crosses 0 ({ci[0]:+.3f} to {ci[1]:+.3f})")
    if one_side:
        risks.append(f"{one_side} task(s) present on one side only")
    if c["p0QcGateRegressionCount"]:
        risks.append(f"{c['p0QcGateRegressionCount']} P0 QC gate regression(s) in candidate trials")
    cand_rate, base_rate = c["evidenceCompletenessRate"], c["baselineEvidenceCompletenessRate"]
    if cand_rate is not None and base_rate is not None and cand_rate < base_rate:
        risks.append(f"evidence completeness below baseline ({cand_rate:.0%} vs {base_rate:.0%})")
    flips = c["flips"]
    if flips["passToFail"] + flips["failToPass"] and c["mcnemarP"] >= SIGNIFICANCE:
        risks.append(
            f"pass/fail flips are not significant (McNemar p = {c['mcnemarP']:.3f}; "
            f"{flips['failToPass']} fail → pass, {flips['passToFail']} pass → fail)"
        )
    elif flips["passToFail"]:
        risks.append(f"{flips['passToFail']} task(s) flipped from pass to fail")
    for role, side in (("baseline", base), ("candidate", cand)):
        if side["erroredTrials"] or side["missingRewardTrials"]:
            risks.append(
                f"{role}: {side['erroredTrials']} errored and {side['missingRewardTrials']} unrewarded trial(s) "
                "are left out of the mean reward"
            )
    if cand["deniedSideEffects"]:
        risks.append(f"candidate has {cand['deniedSideEffects']} side effect(s) after a denied permission")
    risks += _operational_risk(base, cand)
    if not c["headlineEligible"]:
        risks.append(f"not headline-eligible ({len(c['headlineReasons'])} reason(s)): a diagnostic result only")
    return risks


def _operational_risk(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    risks = []
    if (
        base["timeoutRate"] is not None
        and cand["timeoutRate"] is not None
        and cand["timeoutRate"] > base["timeoutRate"]
    ):
        risks.append(f"timeout rate rises from {base['timeoutRate']:.1%} to {cand['timeoutRate']:.1%}")
    if base["costPerTrial"] and cand["costPerTrial"] and cand["costPerTrial"] > base["costPerTrial"] * 1.1:
        risks.append(f"cost per trial rises by {cand['costPerTrial'] / base['costPerTrial'] - 1:.0%}")
    return risks


# --------------------------------------------------------------------------------------
# AgentV and OpenChrome views of the same pairing
# --------------------------------------------------------------------------------------


def agentv_compare(base: SideData, cand: SideData, threshold: float = AGENTV_THRESHOLD) -> dict[str, Any]:
    """`agentv compare`: rows matched by test_id (attempts averaged), delta, gain, win/loss/tie."""
    matched: list[dict[str, Any]] = []
    for test_id in sorted(set(base.tasks) & set(cand.tasks)):
        s1, s2 = base.tasks[test_id].mean, cand.tasks[test_id].mean
        if s1 is None or s2 is None:
            continue
        delta = s2 - s1
        matched.append(
            {
                "test_id": test_id,
                "score1": s1,
                "score2": s2,
                "delta": delta,
                "normalized_gain": stats.normalized_gain(s1, s2),
                "outcome": stats.win_loss_tie(delta, threshold),
            }
        )
    gains = [m["normalized_gain"] for m in matched if m["normalized_gain"] is not None]
    outcomes = [m["outcome"] for m in matched]
    return {
        "matched": matched,
        "unmatched": {
            "file1": sorted(set(base.tasks) - {m["test_id"] for m in matched}),
            "file2": sorted(set(cand.tasks) - {m["test_id"] for m in matched}),
        },
        "summary": {
            "total": len(set(base.tasks) | set(cand.tasks)),
            "matched": len(matched),
            "wins": outcomes.count("win"),
            "losses": outcomes.count("loss"),
            "ties": outcomes.count("tie"),
            "mean_delta": stats.mean_or_none([m["delta"] for m in matched]),
            "mean_normalized_gain": stats.mean_or_none(gains),
        },
        "threshold": threshold,
    }


def openchrome_completion(base: SideData, cand: SideData) -> list[dict[str, Any]]:
    """Per library (configuration) and task: runs, successes, success rate and its CI95."""
    names = dict(
        Configuration.objects.filter(pk__in=base.configuration_ids | cand.configuration_ids).values_list("id", "key")
    )
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for role, data in (("baseline", base), ("candidate", cand)):
        for row in data.rows:
            if row["source_format"] != "openchrome":
                continue
            key = (role, names.get(row["configuration_id"], "?"), row["task__name"] or "")
            counts[key][0] += 1
            counts[key][1] += row["reward"] == 1.0
    return [
        {
            "side": role,
            "library": library,
            "task": task,
            "runs": runs,
            "successes": ok,
            "successRate": ok / runs,
            "successRateCi95": stats.proportion_ci(ok, runs),
        }
        for (role, library, task), (runs, ok) in sorted(counts.items())
    ]


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
        "passRateDelta": _delta(base_metrics["passRate"], cand_metrics["passRate"]),
        "timeoutRateDelta": _delta(base_metrics["timeoutRate"], cand_metrics["timeoutRate"]),
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
        "deltas": _metric_deltas(base_metrics, cand_metrics, paired["rewardKeyDeltas"]),
        "headline": {k: v for k, v in headline.items() if k != "perTask"},
        "tasksOnOneSide": one_side,
        "tasks": matrix,
        "outcomeCounts": _outcome_counts(matrix),
    }
    formats = base.source_formats | cand.source_formats
    if "agentv" in formats:
        result["agentv"] = agentv_compare(base, cand)
    if "openchrome" in formats:
        result["openchrome"] = openchrome_completion(base, cand)
    return result, {"baseline": _points(base), "candidate": _points(cand)}


def _delta(base: float | None, cand: float | None) -> float | None:
    return None if base is None or cand is None else cand - base


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


_DELTA_METRICS = (
    "meanReward",
    "passRate",
    "timeoutRate",
    "meanDurationSec",
    "tokensPerTrial",
    "tokensPerSuccess",
    "costPerTrial",
    "costPerSuccess",
    "evidenceCompletenessRate",
    "deniedSideEffects",
)


def _metric_deltas(base: dict[str, Any], cand: dict[str, Any], reward_keys: dict[str, float]) -> dict[str, Any]:
    deltas: dict[str, Any] = {name: _delta(base[name], cand[name]) for name in _DELTA_METRICS}
    deltas["passAtK"] = {k: cand["passAtK"][k] - base["passAtK"][k] for k in base["passAtK"] if k in cand["passAtK"]}
    deltas["rewardKeys"] = reward_keys
    return deltas


def _outcome_counts(matrix: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in matrix:
        counts[row["outcome"]] += 1
    return dict(counts)


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
