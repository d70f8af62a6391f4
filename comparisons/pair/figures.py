"""What each headline figure counts, as links: a figure on the page opens exactly what it counts.

Trial figures open the trial list with the filters that select those trials; flips and
task outcomes open the per-task matrix filtered to them; P0 QC gate regressions open a
page listing their QC items and the trials whose evidence reports them (`p0_regressions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from comparisons.statistics.metrics import p0_evidence_counts
from comparisons.statistics.sides import Side
from trials.models import Trial
from trials.models.qc import QCItem
from trials.models.taxonomy import WITH_REWARD_FLAG
from trials.triage.queries import open_p0_items

# The matrix's `flip=` values and the flip each selects (metrics.task_matrix writes them).
FLIPS = {"fail-pass": "fail → pass", "pass-fail": "pass → fail"}
# The matrix's `tasks=` values: the tasks a figure is taken over, in words, and which matrix rows they are.
TASK_SETS: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {
    "paired": ("the tasks both sides scored", lambda r: r["delta"] is not None),
    "both": ("the tasks both sides ran", lambda r: bool(r["baseline"] and r["candidate"])),
    "decided": ("the tasks both sides decided", lambda r: _decided(r["baseline"]) and _decided(r["candidate"])),
    "one-side": ("the tasks one side only ran", lambda r: not (r["baseline"] and r["candidate"])),
    "baseline-scored": ("the tasks the baseline scored", lambda r: _scored(r["baseline"])),
    "candidate-scored": ("the tasks the candidate scored", lambda r: _scored(r["candidate"])),
}
AGENTV_OUTCOMES = ("win", "loss", "tie")


def _scored(cell: dict[str, Any] | None) -> bool:
    return cell is not None and cell["mean"] is not None


def _decided(cell: dict[str, Any] | None) -> bool:
    return cell is not None and cell["passed"] is not None


def side_of(result: dict[str, Any], role: str) -> Side:
    return Side(result[role]["kind"], result[role]["id"])


def figure_links(result: dict[str, Any], query: str) -> dict[str, Any]:
    """The URL each headline figure opens, for the page's links."""
    links: dict[str, Any] = {
        "p0": f"{reverse('comparison-p0')}?{query}",
        "failToPass": f"?{query}&outcome=flipped&flip=fail-pass#matrix",
        "passToFail": f"?{query}&outcome=flipped&flip=pass-fail#matrix",
        "outcomes": {
            name: f"?{query}&outcome={name}#matrix" for name in ("improved", "regressed", "unchanged", "flipped")
        },
        "tasks": {name: f"?{query}&tasks={name}#matrix" for name in TASK_SETS},
    }
    for role in ("baseline", "candidate"):
        side = side_of(result, role)
        links[role] = {
            "all": side.trials_url(),
            "scored": side.trials_url(unscored="false"),
            "passed": side.trials_url(passes="true"),
            "timedOut": side.trials_url(timed_out="true"),
            "errored": side.trials_url(status=Trial.Status.ERRORED),
            "unscored": side.trials_url(unscored="true"),
            "infra": side.trials_url(failure_class="infrastructure"),
            # a run that timed out, errored or was cancelled and still has a reward
            "endedWithReward": side.trials_url(flag=WITH_REWARD_FLAG),
            "deniedSideEffects": side.trials_url(denied_side_effect="true"),
        }
    return links


def resolve(counts: str, links: dict[str, Any]) -> str:
    """The URL of what a count counts: a `figure_links` key ("passToFail"), a dotted path into them
    ("candidate.unscored", "tasks.one-side"), or an anchor of the page ("#headline-eligibility")."""
    if counts.startswith("#"):
        return counts
    found: Any = links
    for key in counts.split("."):
        found = found.get(key) if isinstance(found, dict) else None
    return found if isinstance(found, str) else ""


def linked(text: str, counts: list[tuple[str, str]] | list[list[str]], links: dict[str, Any]) -> SafeString:
    """`text` with each count in it (in the order they come) a link to what it counts (`resolve`)."""
    pieces, rest = [], text
    for count, target in counts:
        at, url = rest.find(count), resolve(target, links)
        if at < 0 or not url:
            continue
        pieces += [escape(rest[:at]), format_html('<a href="{}">{}</a>', url, count)]
        rest = rest[at + len(count) :]
    return mark_safe("".join(map(str, [*pieces, escape(rest)])))  # noqa: S308 - every piece escaped above


def missing_linked(c: dict[str, Any], links: dict[str, Any]) -> list[SafeString]:
    """The conditions of promote not met, the paired tasks they count linked to those tasks."""
    paired = [(f"has {c['pairedTasks']}", "tasks.paired")]
    wanted = f"paired tasks ({paired[0][0]})"  # verdict.missing_conditions' words
    return [linked(m, paired if m.endswith(wanted) else [], links) for m in c["missingConditions"]]


def risks_linked(c: dict[str, Any], links: dict[str, Any]) -> list[SafeString]:
    """The remaining risks, each count in them linked to what it counts."""
    counts = c.get("remainingRiskCounts") or [[] for _ in c["remainingRisk"]]
    return [linked(text, found, links) for text, found in zip(c["remainingRisk"], counts, strict=True)]


def agentv_rows(result: dict[str, Any], outcome: str) -> list[dict[str, Any]]:
    """AgentV's matched rows (only `outcome`'s, when it is win, loss or tie), each with its trials' links."""
    base, cand = side_of(result, "baseline"), side_of(result, "candidate")
    return [
        {**m, "baselineUrl": base.trials_url(task=m["test_id"]), "candidateUrl": cand.trials_url(task=m["test_id"])}
        for m in result["agentv"]["matched"]
        if outcome not in AGENTV_OUTCOMES or m["outcome"] == outcome
    ]


def p0_regressions(candidate: Side) -> tuple[QuerySet[QCItem], list[tuple[Trial, int]]]:
    """What the candidate's P0 QC gate regression count adds up: the open P0 items no waiver
    covers, and each trial whose evidence pack reports some (with its count)."""
    trial_ids = candidate.trials().values("pk")
    items = open_p0_items(trial_ids).select_related("trial", "trial__task").order_by("pk")
    counts = p0_evidence_counts(trial_ids)
    trials = Trial.objects.select_related("task").in_bulk([pk for pk, _ in counts])
    return items, [(trials[pk], count) for pk, count in counts]
