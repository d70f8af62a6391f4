"""One side's trials, loaded once and reduced to per-task cells.

Trial rows are read with `.values()` (never whole model objects: a side can hold
thousands of trials). Metrics, validity, eligibility and the format reports read `SideData`.

A side's trials of one task are its attempts (Harbor's attempts, Terminal-Bench runs of one
configuration, Inspect epochs). Every mean averages a task's scored attempts first, then the
tasks. A trial with no reward is unscored: counted per side and per task, left out of the mean
and the pass rate, never a failure; where a source's own leaderboard rule differs
(its format's `leaderboard_rule`) its score is shown beside ours. The score without infrastructure failures
leaves out the trials classed infrastructure (a triager's override first).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from comparisons.statistics.sides import Side
from trials.ingest.formats.detect import traits_of
from trials.ingest.records import PASS_REWARD
from trials.models import Trial
from trials.models.failure_classes import how_it_ended
from trials.models.taxonomy import WITH_REWARD

# Measurement modes a headline claim may rest on (comparisons.statistics.eligibility reads them too).
HEADLINE_MODES = ("live", "live-llm", "recorded-real")

TRIAL_FIELDS = (
    "id",
    "task__name",
    "task__checksum",
    "dataset_id",
    "dataset__name",
    "dataset__version",
    "dataset__pass_reward",  # (the reward its trials pass at, where not PASS_REWARD: trials/thresholds.py)
    "status",
    "exception_type",
    "failure_category",
    "reward",
    "rewards",
    "duration_sec",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "is_complete",
    "lime_evidence",
    "source_format",
    "provenance",
    "configuration_id",
    "job_id",
    "failure_class",
    "failure_class_override",
    "safety_flags",
)

# A run that did not finish normally yet has a reward: triage's flags (trials/triage/signatures.py,
# which reads how it ended from its exception and category too, an Inspect limit among them).
ENDED_WITH_REWARD = frozenset(WITH_REWARD.values())
INFRASTRUCTURE = "infrastructure"


@dataclass
class TaskCell:
    """One task on one side: its attempts, reduced to what the comparison needs."""

    name: str
    dataset: str = ""  # its dataset, name@version ("" without one): a task is its dataset and its name
    dataset_id: int | None = None
    dataset_version: str = ""
    qualified: bool = False  # keyed with its dataset: the sides compared hold more than one (`pair_tasks`)
    checksums: set[str] = field(default_factory=set)
    trial_ids: list[int] = field(default_factory=list)
    scored: list[float] = field(default_factory=list)
    # the scored attempts whose failure is not the infrastructure's (a triager's class wins)
    scored_without_infra: list[float] = field(default_factory=list)
    unscored: int = 0
    infra: int = 0
    ended_with_reward: int = 0  # did not end normally (errored, timed out, cancelled, a limit), still scored
    by_key: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    passes: int = 0
    decided: int = 0
    errored: int = 0
    missing: int = 0
    finished: int = 0  # trials not running: what a leaderboard's rule divides by
    finished_reward: float = 0.0  # their rewards, an unscored one as 0
    timeouts: int = 0
    not_headline_modes: set[str] = field(default_factory=set)
    postcondition_missing: int = 0

    @property
    def mean(self) -> float | None:
        # Plain Python: a handful of attempts, read for every task of every side (numpy's call costs more).
        return sum(self.scored) / len(self.scored) if self.scored else None

    @property
    def mean_without_infra(self) -> float | None:
        kept = self.scored_without_infra
        return sum(kept) / len(kept) if kept else None

    @property
    def leaderboard_mean(self) -> float:
        """The task's score by a leaderboard's rule: an unscored attempt counts as 0 (`leaderboard_score`)."""
        return self.finished_reward / self.finished if self.finished else 0.0

    @property
    def attempt_var(self) -> float:
        """The sample variance of one scored attempt (NaN with fewer than two)."""
        k = len(self.scored)
        if k < 2:
            return float("nan")
        mean = sum(self.scored) / k
        return sum((x - mean) ** 2 for x in self.scored) / (k - 1)

    @property
    def attempts(self) -> int:
        return len(self.trial_ids)

    @property
    def passed(self) -> bool | None:
        """A task counts as passed when at least half of its decided attempts passed."""
        return None if not self.decided else self.passes * 2 >= self.decided

    def list_filters(self) -> dict[str, Any]:
        """The trial list's filters for this task's trials (its dataset too where names alone are ambiguous)."""
        return {"task": self.name, "dataset": self.dataset_id if self.qualified else None}

    def summary(self) -> dict[str, Any]:
        return {
            "n": len(self.trial_ids),
            "attempts": len(self.trial_ids),
            "scored": len(self.scored),
            "unscored": self.unscored,
            "infra": self.infra,
            "endedWithReward": self.ended_with_reward,
            "mean": self.mean,
            "meanWithoutInfra": self.mean_without_infra,
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
    lime_evidence: bool = False  # a trial of it carries Lime evidence: the seed's evidence gate applies


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


# What a side's JSON documents add; the N-sides grid and trends read none of it.
DOCUMENT_FIELDS = ("rewards", "provenance")


def trial_rows(trials: QuerySet[Trial], *, documents: bool = True) -> list[dict[str, Any]]:
    """Trial rows with TRIAL_FIELDS; without `documents`, rewards and provenance are None
    (decoding their JSON is most of the cost of reading 50,000 trials)."""
    if documents:
        return list(trials.order_by().values(*TRIAL_FIELDS))
    rows = list(trials.order_by().values(*(f for f in TRIAL_FIELDS if f not in DOCUMENT_FIELDS)))
    for row in rows:
        row["rewards"] = row["provenance"] = None
    return rows


def load_side(side: Side, *, documents: bool = True) -> SideData:
    """One side's trials; `documents=False` leaves out per-key rewards and measurement modes."""
    rows = trial_rows(side.trials(), documents=documents)
    modes: dict[str, int] = defaultdict(int)
    for row in rows if documents else ():
        modes[measurement_mode(row["provenance"]) or "unknown"] += 1
    return SideData(
        side=side,
        label=side.label(),
        rows=rows,
        tasks=task_cells(rows),
        datasets={(r["dataset__name"] or "", r["dataset__version"] or "") for r in rows},
        configuration_ids={r["configuration_id"] for r in rows if r["configuration_id"]},
        job_ids={r["job_id"] for r in rows if r["job_id"]},
        source_formats={r["source_format"] for r in rows},
        modes=dict(modes),
        lime_evidence=any(r["lime_evidence"] for r in rows),
    )


def dataset_label(name: str | None, version: str | None) -> str:
    return f"{name}@{version}" if name and version else name or ""


def task_key(dataset: str, name: str) -> str:
    """A task as a comparison pairs it: its dataset (name@version) and its name (Inspect numbers its
    samples, so sample 56 of two logs are two tasks). `pair_tasks` drops the dataset where one is compared."""
    return f"{dataset} / {name}" if dataset else name


def task_cells(rows: list[dict[str, Any]]) -> dict[str, TaskCell]:
    """Trial rows (TRIAL_FIELDS) reduced to one cell per task (`task_key`: its dataset and its name)."""
    tasks: dict[str, TaskCell] = {}
    for row in rows:
        name = row["task__name"] or "(no task)"
        dataset = dataset_label(row["dataset__name"], row["dataset__version"])
        key = task_key(dataset, name)
        cell = tasks.get(key) or tasks.setdefault(
            key, TaskCell(name, dataset, row["dataset_id"], row["dataset__version"] or "")
        )
        _add_row(cell, row)
    return tasks


def pair_tasks(sides: list[SideData]) -> None:
    """Key every side's tasks for pairing (issue 41's rule on issue 39's identity): by name where the sides
    hold one dataset; two dataset names never pair (keyed by dataset name and task name, the cell `qualified`);
    one dataset name at two versions pairs on the task name (`version_mismatch` says it is not like-for-like).
    A side holding two versions of one dataset keeps the versions in its keys: its two tasks are never one."""
    labels = {cell.dataset for data in sides for cell in data.tasks.values()}
    if len(labels) <= 1:
        for data in sides:
            data.tasks = {cell.name: cell for cell in data.tasks.values()}
        return
    names = {_dataset_name(cell) for data in sides for cell in data.tasks.values()}
    one_version = all(_one_version_per_name(data) for data in sides)
    for data in sides:
        if one_version and len(names) == 1:
            data.tasks = {cell.name: cell for cell in data.tasks.values()}
        elif one_version:
            data.tasks = {task_key(_dataset_name(cell), cell.name): cell for cell in data.tasks.values()}
        for cell in data.tasks.values():
            cell.qualified = len(names) > 1 or not one_version


def _dataset_name(cell: TaskCell) -> str:
    """Its dataset's name without the version (`dataset_label` wrote `name@version`)."""
    cut = len(cell.dataset_version) + 1
    return (
        cell.dataset[:-cut]
        if cell.dataset_version and cell.dataset.endswith("@" + cell.dataset_version)
        else cell.dataset
    )


def _one_version_per_name(data: SideData) -> bool:
    seen: dict[str, str] = {}
    return all(seen.setdefault(_dataset_name(c), c.dataset) == c.dataset for c in data.tasks.values())


def version_mismatch(base: SideData, cand: SideData) -> list[tuple[str, str, str]]:
    """(dataset name, baseline versions, candidate versions) for each dataset name both sides hold at
    other versions: their tasks pair on the task name (`pair_tasks`), not like-for-like."""
    found = []
    for name in sorted({n for n, _ in base.datasets} & {n for n, _ in cand.datasets}):
        v1 = sorted(v for n, v in base.datasets if n == name)
        v2 = sorted(v for n, v in cand.datasets if n == name)
        if v1 != v2:
            found.append((name, _versions(v1), _versions(v2)))
    return found


def _versions(versions: list[str]) -> str:
    return ", ".join(v or "(no version)" for v in versions)


def load_sides(sides: list[Side], *, documents: bool = True) -> list[SideData]:
    """Several sides loaded (`load_side`) and their tasks keyed for pairing (`pair_tasks`)."""
    data = [load_side(side, documents=documents) for side in sides]
    pair_tasks(data)
    return data


def unpaired_by_dataset(base: SideData, cand: SideData) -> list[dict[str, Any]]:
    """Tasks on one side only whose name the other side has, in another dataset: not paired, said so."""
    only: list[dict[str, set[str]]] = [defaultdict(set), defaultdict(set)]
    for found, data, other in ((only[0], base, cand), (only[1], cand, base)):
        for key in data.tasks.keys() - other.tasks.keys():
            found[data.tasks[key].name].add(data.tasks[key].dataset)
    return [
        {"task": name, "baselineDatasets": sorted(only[0][name]), "candidateDatasets": sorted(only[1][name])}
        for name in sorted(only[0].keys() & only[1].keys())
    ]


def _add_row(cell: TaskCell, row: dict[str, Any]) -> None:
    # One trial, one outcome (as Trial.objects.passes counts): a passed or failed status says so; a run that
    # ended otherwise passes by its reward, at its dataset's threshold. Run for each of a 12-side grid's 60,000
    # trials: kept inline.
    cell.trial_ids.append(row["id"])
    cell.checksums.add(row["task__checksum"] or "")
    status, reward, provenance = row["status"], row["reward"], row["provenance"]
    if status != "running":
        cell.finished += 1
        cell.finished_reward += reward or 0.0
    infra = (row["failure_class_override"] or row["failure_class"]) == INFRASTRUCTURE
    cell.infra += infra
    cell.errored += status == "errored"
    # Unscored is not failed: a trial with no reward is counted, never averaged in as zero.
    if reward is None:
        if status != "running":
            cell.unscored += 1
            cell.missing += status != "errored"
        if status == "passed" or status == "failed":  # a pass / fail its source gave without a reward
            cell.decided += 1
            cell.passes += status == "passed"
    else:
        cell.scored.append(reward)
        if not infra:
            cell.scored_without_infra.append(reward)
        cell.ended_with_reward += not ENDED_WITH_REWARD.isdisjoint(row["safety_flags"] or ())
        for key, value in (row["rewards"] or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                cell.by_key[key].append(float(value))
        cell.decided += 1
        threshold = PASS_REWARD if row["dataset__pass_reward"] is None else row["dataset__pass_reward"]
        cell.passes += status == "passed" if status in ("passed", "failed") else reward >= threshold
    cell.timeouts += how_it_ended(row) == "timeout"  # (the triage flags' rule: a TB1 agent_timeout too)
    mode = measurement_mode(provenance) if provenance else None
    if mode not in HEADLINE_MODES:
        cell.not_headline_modes.add(mode or "unknown")
    if not (postcondition_evaluated(row) if provenance else reward is not None):
        cell.postcondition_missing += 1


def leaderboard_score(data: SideData) -> tuple[float | None, str]:
    """The side's score by its source's own rule, where every trial's format declares one that differs
    from ours (its traits' `leaderboard_rule`); (None, "") otherwise. Over trials, as the sources publish it."""
    rules = {traits_of(fmt).leaderboard_rule for fmt in data.source_formats}
    if len(rules) != 1 or "" in rules:
        return None, ""
    counted = [r["reward"] or 0.0 for r in data.rows if r["status"] != Trial.Status.RUNNING]
    return (sum(counted) / len(counted) if counted else None), rules.pop()
