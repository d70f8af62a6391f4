"""What flags a failed or passing trial, and names its failing tool, read for many trials a query:
its permission denials, its runtime events and its stored category (`Evidence`); and the fields
and provenance facts `signatures` reads of each trial it signs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db.models import BooleanField, Case, ExpressionWrapper, OuterRef, Q, Subquery, TextField, Value, When
from django.db.models.fields.json import KT

from trials.models import PermissionDecision, RuntimeEvent, Step, ToolCall, taxonomy
from trials.models.failure_classes import how_it_ended
from trials.models.taxonomy import PERMISSION_BYPASS, SIDE_EFFECT_AFTER_DENIAL, STALE_SUCCESS, WITH_REWARD

# (thousands of trials share a handful of categories: each is read once)
code_of = lru_cache(maxsize=512)(taxonomy.normalise_code)

SIGNED_FIELDS = (
    "pk",
    "status",
    "reward",
    "failure_category",
    "exception_type",
    "exception_message",
    "ctrf_tests",
    "task__name",
    "dataset__name",
    "dataset__pass_reward",
    "step_count",
)
# What a parser keeps in a trial's provenance for the failure classes: Terminal-Bench 1's
# failure_mode, the kind of Inspect limit a sample hit, a `harbor check` finding on its task.
CLASS_FACTS = {
    "failure_mode": KT("provenance__failure_mode"),
    "limit": KT("provenance__limit"),
    "task_flagged": KT("provenance__task_flagged"),
    # The agent's last message, read only for a run that ended with an exception ("Not logged in").
    "last_message": Case(
        When(exception_type="", then=Value("")),
        default=Subquery(
            Step.objects.filter(trial=OuterRef("pk"), trajectory__role="main", source="agent")
            .exclude(message_text="")
            .order_by("-index")
            .values("message_text")[:1]
        ),
        output_field=TextField(),
    ),
}
# The last tool the agent called: what tells apart failures nothing else names (signatures.told_apart).
LAST_TOOL = {
    "last_tool": Subquery(
        ToolCall.objects.filter(trial=OuterRef("pk"), step__trajectory__role="main")
        .exclude(function_name="")
        .order_by("-step__index", "-pk")
        .values("function_name")[:1]
    ),
}
_BYPASS_CODES = ["permission-bypass", "permission_bypass"]
_STALE_CODES = ["stale-success", "stale_success"]


def denied_side_effects(trial_ids: Iterable[int]) -> dict[int, str]:
    """{trial pk: the tool} of trials with a permission denial after which the side effect happened anyway.

    The same fact the comparisons count (comparisons.statistics.metrics.denied_side_effects), per trial.
    """
    rows = (
        PermissionDecision.objects.side_effects_after_denial()
        .filter(trial_id__in=trial_ids)
        .order_by("-pk")  # the first denial's tool wins, written last
        .values_list("trial_id", "tool_name")
    )
    return dict(rows)


@dataclass
class Evidence:
    """What flags these trials and names their failing tool, read in two queries."""

    side_effects: dict[int, str]  # trial pk -> the tool that ran after its denial
    bypass: set[int]
    stale: set[int]
    failed_tools: dict[int, str]  # trial pk -> the first tool.failed event's tool

    @classmethod
    def of(cls, trial_ids: list[int]) -> Evidence:
        bypass_event = (
            Q(payload__failureCategory__in=_BYPASS_CODES)
            | Q(payload__decision="bypass")
            | Q(payload__mode="bypass")
            | Q(type__icontains="bypass")
        )
        stale_event = Q(payload__failureCategory__in=_STALE_CODES)
        events = (
            RuntimeEvent.objects.filter(Q(type="tool.failed") | bypass_event | stale_event, trial_id__in=trial_ids)
            .annotate(
                bypass=ExpressionWrapper(bypass_event, output_field=BooleanField()),
                stale=ExpressionWrapper(stale_event, output_field=BooleanField()),
            )
            .order_by("trial_id", "sequence", "timestamp", "pk")
            .values_list("trial_id", "type", KT("payload__toolName"), "bypass", "stale")
        )
        evidence = cls(denied_side_effects(trial_ids), set(), set(), {})
        for trial_id, etype, tool, bypass, stale in events:
            if bypass:
                evidence.bypass.add(trial_id)
            if stale:
                evidence.stale.add(trial_id)
            if etype == "tool.failed" and tool:
                evidence.failed_tools.setdefault(trial_id, str(tool)[:200])
        return evidence

    def flags(self, row: dict[str, Any]) -> list[str]:
        code = code_of(row["failure_category"])
        found = []
        if row["pk"] in self.side_effects:
            found.append(SIDE_EFFECT_AFTER_DENIAL)
        if row["pk"] in self.bypass or code == PERMISSION_BYPASS:
            found.append(PERMISSION_BYPASS)
        if row["pk"] in self.stale or code == STALE_SUCCESS:
            found.append(STALE_SUCCESS)
        # (a reward of 0 after a bad ending is the expected failure; a pass or partial credit may be stale)
        if (row["reward"] or 0) > 0 and (ended := how_it_ended(row)):
            found.append(WITH_REWARD[ended])
        return found

    def tool(self, pk: int) -> str:
        """The first tool that failed: a tool.failed event, else a denied call that ran anyway."""
        return self.failed_tools.get(pk) or self.side_effects.get(pk) or ""
