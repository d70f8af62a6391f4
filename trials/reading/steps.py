"""A window of a trajectory's steps, one step in full, and search within a trial."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import Prefetch, Q, QuerySet
from django.db.models.functions import Length, Substr
from django.http import Http404

from core.ids import parse_pk
from trials import search
from trials.ingest.atif_steps import names_trajectory
from trials.models import (
    ContextRecord,
    ObservationResult,
    PermissionDecision,
    Step,
    ToolCall,
    Trajectory,
    Trial,
    step_url,
)
from trials.reading.text import ARGUMENTS_PREVIEW, TEXT_PREVIEW, argument_blocks, pretty_json, scrub, scrub_json

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

STEP_WINDOW = 50


SEARCH_PAGE = 50


def main_trajectory(trial: Trial, trajectories: list[Trajectory]) -> Trajectory | None:
    for t in trajectories:
        if t.role in ("main", "step"):
            return t
    return trajectories[0] if trajectories else None


MAX_PAGE = 10**6  # (a page past every trajectory's end is empty; the offset stays within what SQL takes)


def requested_page(value: str | None) -> int:
    """`?page=` as a number from 1; anything else is page 1."""
    return min(max(1, parse_pk(value) or 1), MAX_PAGE)


def requested_offset(value: str | None) -> int:
    """`?offset=` (search results) as a number from 0; anything else is 0."""
    return min(parse_pk(value) or 0, MAX_PAGE * SEARCH_PAGE)


def pick_trajectory(trial: Trial, trajectories: list[Trajectory], wanted: str | None) -> Trajectory | None:
    if (pk := parse_pk(wanted)) is not None:
        for t in trajectories:
            if t.pk == pk:
                return t
    return main_trajectory(trial, trajectories)


def named_trajectory(trial: Trial, wanted: str | None) -> tuple[Trajectory, list[Trajectory]]:
    """The trajectory `?t=` names (the main one without it), and all of the trial's; Http404 if none."""
    trajectories = list(trial.trajectories.order_by("position", "pk"))
    if wanted and not any(str(t.pk) == wanted for t in trajectories):
        raise Http404(f"trial {trial.pk} has no trajectory {wanted!r}")
    trajectory = pick_trajectory(trial, trajectories, wanted)
    if trajectory is None:
        raise Http404("this trial has no trajectory")
    return trajectory, trajectories


def window_start(step_number: int) -> int:
    """The 0-based index that starts the window holding 1-based step number n."""
    return max(0, (step_number - 1) // STEP_WINDOW * STEP_WINDOW)


@dataclass
class ArgumentBlock:
    """A multi-line string argument shown as text (its preview, and whether it was cut)."""

    name: str
    text: str
    truncated: bool


@dataclass
class ToolCallView:
    call: ToolCall
    arguments_text: str
    arguments_truncated: bool
    blocks: list[ArgumentBlock] = field(default_factory=list)
    observation: ObservationResult | None = None
    permissions: list[PermissionDecision] = field(default_factory=list)
    context: list[ContextRecord] = field(default_factory=list)
    subagents: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StepView:
    step: Step
    number: int  # 1-based position in its trajectory (the anchor / permalink number)
    seconds_since_previous: float | None
    message: str
    message_truncated: bool
    reasoning: str
    reasoning_truncated: bool
    images: list[str]
    calls: list[ToolCallView]
    other_observations: list[tuple[ObservationResult, list[dict[str, Any]]]]
    permissions: list[PermissionDecision]  # on the step but on none of its calls
    context: list[ContextRecord]
    is_compaction: bool
    token_pct: dict[str, float]
    tokens_label: str = ""
    permalink: str = ""
    records_before: list[Any] = field(default_factory=list)  # runtime events, permissions timed before it

    @property
    def flagged(self) -> bool:
        return any(p.side_effect_after_denial for p in self.all_permissions)

    @property
    def all_permissions(self) -> list[PermissionDecision]:
        return self.permissions + [p for c in self.calls for p in c.permissions]


@dataclass
class StepWindow:
    trajectory: Trajectory
    start: int  # 0-based index of the first step shown
    steps: list[StepView]
    total: int

    @property
    def end(self) -> int:
        return self.start + len(self.steps)

    @property
    def page(self) -> int:
        return self.start // STEP_WINDOW + 1

    @property
    def pages(self) -> int:
        return max(1, (self.total + STEP_WINDOW - 1) // STEP_WINDOW)

    @property
    def prev_page(self) -> int | None:
        return self.page - 1 if self.page > 1 else None

    @property
    def next_page(self) -> int | None:
        return self.page + 1 if self.page < self.pages else None

    @property
    def next_end(self) -> int:
        """The last step number of the next window (the pager's "steps 51–100 →")."""
        return min(self.start + 2 * STEP_WINDOW, self.total)


IMAGE_RE = re.compile(r"\[image: ([^\]\n]*)\]")


CONTEXT_INLINE_KINDS = ("item", "selection", "budget", "assembly", "injection", "compaction", "missing", "redaction")


def _subagent_links(refs: list[dict[str, Any]], trajectories: list[Trajectory]) -> list[dict[str, Any]]:
    """Subagent refs of an observation, each with the trajectory of this trial it names."""
    out = []
    for ref in refs:
        target = None
        path = str(ref.get("trajectory_path") or "")
        for t in trajectories:
            if names_trajectory(ref, t.path, t.trajectory_id, t.session_id, t.role):
                target = t
                break
        summary = (ref.get("extra") or {}).get("summary") if isinstance(ref.get("extra"), dict) else None
        out.append({"ref": ref, "label": summary or path or ref.get("session_id") or "subagent", "trajectory": target})
    return out


def step_window(trial: Trial, trajectory: Trajectory, start: int, trajectories: list[Trajectory]) -> StepWindow:
    """Steps [start, start + STEP_WINDOW) of one trajectory with everything shown inline.

    A fixed number of queries whatever the trajectory length: steps (one before the window
    for "time since previous"), tool calls, observations, permissions, context records.
    """
    start = max(0, start)
    rows = list(
        Step.objects.filter(trajectory=trajectory, index__gte=max(0, start - 1), index__lt=start + STEP_WINDOW)
        .defer("message_text", "reasoning")
        .annotate(
            message_head=Substr("message_text", 1, TEXT_PREVIEW),
            message_len=Length("message_text"),
            reasoning_head=Substr("reasoning", 1, TEXT_PREVIEW),
            reasoning_len=Length("reasoning"),
        )
        .prefetch_related(
            Prefetch("tool_calls", queryset=ToolCall.objects.order_by("pk")),
            Prefetch("observations", queryset=ObservationResult.objects.order_by("pk")),
        )
        .order_by("index")
    )
    previous = rows.pop(0) if rows and rows[0].index < start else None
    step_ids = {s.step_id for s in rows}
    call_ids = {c.tool_call_id for s in rows for c in s.tool_calls.all() if c.tool_call_id}
    permissions = list(
        PermissionDecision.objects.filter(trial=trial)
        .filter(Q(step_id__in=step_ids) | Q(tool_call_id__in=call_ids))
        .order_by("pk")
    )
    context = list(
        ContextRecord.objects.filter(trial=trial, kind__in=CONTEXT_INLINE_KINDS)
        .filter(Q(step_id__in=step_ids) | Q(tool_call_id__in=call_ids))
        .exclude(kind="selection", status="")  # the per-item rows say it all
        .order_by("pk")
    )
    # One scale for the whole file (set at import); trajectories imported before it: this window's.
    window_max = max((s.prompt_tokens or 0) + (s.completion_tokens or 0) for s in rows) if rows else 0
    max_tokens = max(trajectory.max_step_tokens or 0, window_max, 1)
    main = main_trajectory(trial, trajectories)
    off_main = None if trajectory == main else trajectory.pk
    views = []
    for step in rows:
        since = None
        if previous is not None and previous.timestamp and step.timestamp:
            since = (step.timestamp - previous.timestamp).total_seconds()
        view = _step_view(step, since, permissions, context, trajectories, max_tokens)
        view.permalink = step_url(trial.pk, view.number, off_main)
        views.append(view)
        previous = step
    return StepWindow(trajectory=trajectory, start=start, steps=views, total=trajectory.step_count)


class _StepHeads(TypedDict):
    """What `step_window` annotates its steps with, in place of their (deferred) texts."""

    message_head: str | None
    message_len: int | None
    reasoning_head: str | None
    reasoning_len: int | None


def _step_view(
    step: WithAnnotations[Step, _StepHeads],
    since: float | None,
    permissions: list[PermissionDecision],
    context: list[ContextRecord],
    trajectories: list[Trajectory],
    max_tokens: int,
) -> StepView:
    observations = list(step.observations.all())
    for i, observation in enumerate(observations):
        # its place in observation.results, for "show all" (an attribute for the template, not a field)
        observation.position = i  # type: ignore[attr-defined]
    by_call = {o.source_call_id: o for o in observations if o.source_call_id}
    calls = []
    claimed: set[int] = set()
    for call in step.tool_calls.all():
        rest, blocks = argument_blocks(call.arguments)
        args = pretty_json(rest) if rest is not None and (rest or not blocks) else ""
        obs = by_call.get(call.tool_call_id)
        if obs is not None:
            claimed.add(obs.pk)
        call_perms = [p for p in permissions if call.tool_call_id and p.tool_call_id == call.tool_call_id]
        call_ctx = [c for c in context if call.tool_call_id and c.tool_call_id == call.tool_call_id]
        calls.append(
            ToolCallView(
                call=call,
                arguments_text=args[:ARGUMENTS_PREVIEW],
                arguments_truncated=len(args) > ARGUMENTS_PREVIEW,
                blocks=[ArgumentBlock(n, t[:ARGUMENTS_PREVIEW], len(t) > ARGUMENTS_PREVIEW) for n, t in blocks],
                observation=obs,
                permissions=call_perms,
                context=call_ctx,
                subagents=_subagent_links(obs.subagent_refs, trajectories) if obs else [],
            )
        )
    call_ids = {c.call.tool_call_id for c in calls}
    step_perms = [
        p for p in permissions if p.step_id == step.step_id and not (p.tool_call_id and p.tool_call_id in call_ids)
    ]
    step_ctx = [c for c in context if c.step_id == step.step_id and c.tool_call_id not in call_ids]
    others = [(o, _subagent_links(o.subagent_refs, trajectories)) for o in observations if o.pk not in claimed]
    prompt, cached, completion = step.prompt_tokens or 0, step.cached_tokens or 0, step.completion_tokens or 0
    return StepView(
        step=step,
        number=step.index + 1,
        seconds_since_previous=since,
        message=scrub(step.message_head),
        message_truncated=(step.message_len or 0) > TEXT_PREVIEW,
        reasoning=scrub(step.reasoning_head),
        reasoning_truncated=(step.reasoning_len or 0) > TEXT_PREVIEW,
        images=IMAGE_RE.findall(step.message_head or ""),
        calls=calls,
        other_observations=others,
        permissions=step_perms,
        context=step_ctx,
        is_compaction=bool(step.context_management),
        token_pct={
            "cached": round(100 * min(cached, prompt) / max_tokens, 1),
            "prompt": round(100 * max(prompt - cached, 0) / max_tokens, 1),
            "completion": round(100 * completion / max_tokens, 1),
        },
        tokens_label=" · ".join(
            part
            for part in (
                f"{prompt:,} in",
                f"{cached:,} cached" if step.cached_tokens is not None else "",  # not "0" when the file says nothing
                f"{completion:,} out",
            )
            if part
        ),
    )


def referenced_from(trial: Trial, trajectory: Trajectory, trajectories: list[Trajectory]) -> list[dict[str, Any]]:
    """Steps of other trajectories whose observations point at this (subagent) trajectory."""
    if trajectory.role in ("main", "step"):
        return []
    out = []
    observations = (
        ObservationResult.objects.filter(step__trial=trial)
        .exclude(subagent_refs=[])
        .select_related("step")
        .only("subagent_refs", "step__index", "step__trajectory_id", "step__step_id")
    )
    for obs in observations:
        for link in _subagent_links(obs.subagent_refs, trajectories):
            if link["trajectory"] is not None and link["trajectory"].pk == trajectory.pk:
                out.append({"trajectory_id": obs.step.trajectory_id, "number": obs.step.index + 1})
    return out


def continuation_neighbours(trajectory: Trajectory, trajectories: list[Trajectory]) -> dict[str, Trajectory | None]:
    """The previous / next segment of a main trajectory split into .cont-N files."""
    chain = [t for t in trajectories if t.role in ("main", "continuation") and t.step_name == trajectory.step_name]
    if trajectory not in chain:
        return {"previous": None, "next": None}
    i = chain.index(trajectory)
    return {"previous": chain[i - 1] if i > 0 else None, "next": chain[i + 1] if i + 1 < len(chain) else None}


@dataclass
class SearchResult:
    matches: list[dict]
    more: bool
    word_starts_only: bool  # found through the word index: a match inside a word may be missing


def search_steps(
    trial: Trial, query: str, offset: int = 0, limit: int = SEARCH_PAGE, inside_words: bool = False
) -> SearchResult:
    """Matches of `query` in the trial's trajectories, found by the database.

    Up to `limit` matches in (trajectory, step) order from `offset`, and whether there are
    more; the page pages with `offset`, so a million matches cost one page. By default the
    word index answers, which finds the needle where a word starts ("error" in "error: x",
    not in "TypeError"); `inside_words` scans for it anywhere, as does a search the index
    finds nothing for.
    """
    needle = query.replace("\x00", "").strip().lower()  # (a NUL matched every step)
    if not needle:
        return SearchResult([], False, False)

    # (trial, trajectory, index) order is the Step index: the scan stops after a page of
    # matches. Trajectories are written in position order, so their ids follow it.
    def page(steps: QuerySet[Step]) -> list[Any]:
        return list(
            steps.order_by("trajectory_id", "index").values("trajectory_id", "index", "source", "step_id")[
                offset : offset + limit + 1
            ]
        )

    indexed = search.uses_index(trial, needle) and not inside_words
    rows = page(search.matching(trial, needle) if indexed else search.scan(trial, needle))
    if not rows and indexed:
        indexed, rows = False, page(search.scan(trial, needle))  # before saying "no match"
    matches = [
        {"trajectory": r["trajectory_id"], "number": r["index"] + 1, "step_id": r["step_id"], "source": r["source"]}
        for r in rows[:limit]
    ]
    return SearchResult(matches, len(rows) > limit, word_starts_only=indexed)


def step_detail(step: Step) -> dict[str, Any]:
    """Everything of one step, for "show all" on the page (loaded on demand)."""
    read = step.trajectory.read_step(step.raw, step.index)  # (AgentV: observations are its calls' outputs)
    raw = read.raw  # (a step that is not an object: what the importer put in its place)
    return {
        "number": step.index + 1,
        "step_id": step.step_id,
        "source": step.source,
        "timestamp": step.timestamp.isoformat() if step.timestamp else None,
        "model_name": step.model_name,
        "message": scrub(step.message_text),
        "reasoning": scrub(step.reasoning),
        "skill": step.skill,
        "tool_calls": [
            {
                "tool_call_id": c.tool_call_id,
                "function_name": c.function_name,
                "skill": scrub_json(c.skill) or None,
                "arguments": scrub_json(c.arguments),
                "arguments_text": pretty_json(c.arguments) if c.arguments is not None else "",
            }
            for c in step.tool_calls.order_by("pk")
        ],
        "observations": [
            {
                "source_call_id": o.source_call_id,
                "content": scrub(o.content_text),
                "subagent_trajectory_ref": scrub_json(o.subagent_refs) or None,
            }
            for o in read.observations
        ],
        "metrics": scrub_json(raw.get("metrics")),
        "is_copied_context": step.is_copied_context,
        "extra": scrub_json(raw.get("extra")),
    }
