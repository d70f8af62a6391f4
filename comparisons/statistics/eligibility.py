"""Headline eligibility: whether a comparison may be claimed as a headline result.

Seed 003 / OpenChrome claim-eligibility, for the aggregate claim and for each task:
measurement mode, final postcondition, same task contracts, pinned versions,
environment and LLM settings, and enough samples. `HEADLINE_RULES` says what each reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models.fields.json import KT

from comparisons.statistics.side_data import HEADLINE_MODES, SideData
from trials.models import Configuration, Job, Trial

AGGREGATE_MIN_SAMPLES = 10
PER_TASK_MIN_SAMPLES = 20

# What each headline rule reads from our data (shown on the page under "Headline eligibility").
HEADLINE_RULES = (
    ("measurement mode", "trial.provenance measurementMode / mode (OpenChrome); Harbor trials carry none: unknown"),
    ("final postcondition", "OpenChrome provenance.finalPostconditionEvaluated; otherwise a verifier reward exists"),
    ("same task definitions", "task names and task checksums on both sides"),
    ("versions pinned", "configuration.agent_version of every configuration on both sides"),
    ("environment pinned", "job config / extra `environment`, or the Harbor trial config's environment"),
    (
        "sample count",
        f"scored trials: at least {AGGREGATE_MIN_SAMPLES} a side, and at least {PER_TASK_MIN_SAMPLES} of a task a side",
    ),
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
        aggregate.append(f"at least {AGGREGATE_MIN_SAMPLES} scored trials on each side (has {samples})")
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
    return [mode_reason(m) for m in sorted({m for d in sides for m in d.modes if m not in HEADLINE_MODES})]


def mode_reason(mode: str) -> str:
    """Why a measurement mode makes no headline claim, in words (seed 003's template)."""
    if mode == "unknown":
        return "measurement mode unknown"
    if mode == "mock":
        # (OpenChrome's `live: false` reads as mode mock: trials.ingest.formats.openchrome.is_mock)
        return (
            "measurement mode mock is not headline-eligible: a mock run (live: false) checks the harness, "
            "not the libraries; use live or recorded-real"
        )
    return f"measurement mode {mode} is not headline-eligible; use live or recorded-real"


def _task_reasons(name: str, base: SideData, cand: SideData, pins: list[str]) -> list[str]:
    cells = [d.tasks.get(name) for d in (base, cand)]
    reasons = []
    present = [c for c in cells if c is not None]
    reasons += [mode_reason(m) for m in sorted({m for c in present for m in c.not_headline_modes})]
    samples = min(len(c.scored) if c else 0 for c in cells)
    if samples < PER_TASK_MIN_SAMPLES:
        reasons.append(f"at least {PER_TASK_MIN_SAMPLES} scored trials of this task on each side (has {samples})")
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
