"""A trial's digest: its outcome, cause, configuration and figures, then the steps around its failure.

Built from what the trial page shows: the API's serializer for the facts (scrubbed like the API) and
`trials.reading.steps.step_window` for the steps (the page's window, its permalinks, its scrubbed
texts), so nothing a page withholds reaches a digest. Bounded: at most WINDOW steps, each text cut,
and the whole under MAX_CHARS (earlier steps of the window are left out first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trials.digests.markdown import fenced, inline, link, number
from trials.models import ObservationResult, Step, ToolCall, Trajectory, Trial
from trials.reading import steps
from trials.reading.text import pretty_json
from trials.viewer.serializers import TrialDetailSerializer

WINDOW = 20  # steps in a digest at most
BEFORE = 14  # of them before the failing step (the rest after it)
MESSAGE_CHARS = 1500  # a step's message
REASONING_CHARS = 800
ARGUMENT_CHARS = 800  # a tool call's arguments
RESULT_CHARS = 1200  # a tool call's result
CALLS_SHOWN = 5  # tool calls of one step
CAUSE_CHARS = 600  # the exception's message
MAX_CHARS = 40_000  # the whole digest

Absolute = Callable[[str], str]


def focus_index(trial: Trial, trajectory: Trajectory) -> tuple[int | None, str]:
    """The 0-based index of the failing step (the first call of its cluster's failing tool) and why,
    or (None, why) for the last steps: the same step the cluster page links."""
    tool = (trial.cluster.signature.get("tool") or "") if trial.cluster_id and trial.cluster else ""
    if tool:
        index = (
            ToolCall.objects.filter(step__trajectory=trajectory, function_name=tool)
            .order_by("step__index")
            .values_list("step__index", flat=True)
            .first()
        )
        if index is not None:
            return index, f"the first call of the failing tool {inline(tool, 80)}"
    return None, "the last steps"


def trial_digest(trial: Trial, absolute: Absolute, wanted_trajectory: str | None = None) -> str:
    data = TrialDetailSerializer(trial).data
    head = _facts(trial, data, absolute)
    trajectories = list(trial.trajectories.order_by("position", "pk"))
    trajectory = steps.pick_trajectory(trial, trajectories, wanted_trajectory)
    if trajectory is None or trajectory.step_count == 0:
        return head + "\n\n_This trial has no steps._\n"
    focus, why = focus_index(trial, trajectory)
    total = trajectory.step_count
    if focus is None:
        start = max(0, total - WINDOW)
    else:
        start = max(0, min(focus - BEFORE, total - WINDOW))
    window = steps.step_window(trial, trajectory, start, trajectories)
    views = window.steps[:WINDOW]
    blocks = [_step(view, absolute, view.step.index == focus) for view in views]
    budget = MAX_CHARS - len(head) - 400
    dropped = 0
    while len(blocks) > 1 and sum(len(b) + 2 for b in blocks) > budget:
        if focus is not None and views[dropped].step.index == focus:
            break  # (the failing step stays: the steps after it go instead)
        blocks.pop(0)
        dropped += 1
    while len(blocks) > 1 and sum(len(b) + 2 for b in blocks) > budget:
        blocks.pop()
    first, last = start + dropped + 1, start + dropped + len(blocks)
    title = f"## Steps {first}–{last} of {total:,} ({why})"
    notes = [f"_{dropped} earlier steps of the window left out to stay under {MAX_CHARS:,} characters._"] * bool(
        dropped
    )
    more = f"All steps: {link('the trial page', absolute(trial.get_absolute_url()))} (50 a page)."
    text = "\n\n".join([head, title, *notes, *blocks, more]) + "\n"
    return text[:MAX_CHARS]  # (cannot happen: each part is bounded; a last guard for the cap)


def _facts(trial: Trial, data: dict[str, Any], absolute: Absolute) -> str:
    task, dataset, job = data.get("task") or {}, data.get("dataset") or {}, data.get("job") or {}
    conf = data.get("configuration") or {}
    ds = f"{dataset.get('name')}@{dataset.get('version')}" if dataset.get("version") else dataset.get("name")
    failure_class = data.get("failure_class_override") or data.get("failure_class") or ""
    cause = " · ".join(
        part
        for part in (
            inline(data.get("failure_category") or "", 80),
            inline(data.get("exception_type") or "", 120),
            inline(data.get("exception_message") or "", CAUSE_CHARS),
        )
        if part
    )
    tokens = f"{number(data.get('input_tokens'))} in · {number(data.get('cached_tokens'))} cached · "
    tokens += f"{number(data.get('output_tokens'))} out"
    cost = f"${data['cost_usd']:.4f}" if data.get("cost_usd") is not None else "—"
    duration = f"{data['duration_sec']:.1f} s" if data.get("duration_sec") is not None else "—"
    lines = [
        f"# Trial {trial.pk}: {inline(data.get('name'), 200)}",
        "",
        f"- Outcome: **{inline(data.get('status'), 40)}** · reward {number(data.get('reward'))}",
        f"- Class: {inline(failure_class or 'none', 40)}"
        + (f" ({inline(data.get('failure_class_why'), 300)})" if data.get("failure_class_why") else ""),
        f"- Cause: {cause or 'none recorded'}",
        f"- Task: {inline(task.get('name') or '—', 200)} · dataset: {inline(ds or '—', 200)}",
        f"- Job: {inline(job.get('name') or job.get('key') or '—', 200)} · format: {inline(data.get('source_format'))}",
        f"- Configuration: {inline(conf.get('key') or '—', 200)} · agent: "
        f"{inline(' '.join(filter(None, (conf.get('agent_name'), conf.get('agent_version')))) or '—', 200)}"
        f" · model: {inline(conf.get('model_name') or '—', 200)}",
        f"- Tokens: {tokens} · cost: {cost} · duration: {duration}",
        f"- Steps: {number(data.get('step_count'))} · tool calls: {number(data.get('tool_call_count'))}"
        + (f" · flags: {inline(', '.join(data.get('safety_flags') or []))}" if data.get("safety_flags") else ""),
        f"- Page: {link(f'trial {trial.pk}', absolute(trial.get_absolute_url()))}",
    ]
    if trial.cluster_id and trial.cluster:
        lines.append(f"- Cluster: {link(trial.cluster.label, absolute(trial.cluster.get_absolute_url()))}")
    return "\n".join(lines)


def _step(view: steps.StepView, absolute: Absolute, failing: bool) -> str:
    step: Step = view.step
    mark = " · **the failing step**" if failing else ""
    parts = [
        f"### Step {view.number} · {inline(step.source, 20)}{mark} · {link('permalink', absolute(view.permalink))}"
    ]
    if view.message:
        parts.append(fenced(view.message, MESSAGE_CHARS, more=_beyond(view.message, step, "message")))
    if view.reasoning:
        parts.append(
            "Reasoning:\n" + fenced(view.reasoning, REASONING_CHARS, more=_beyond(view.reasoning, step, "reasoning"))
        )
    for call in view.calls[:CALLS_SHOWN]:
        arguments = view_arguments(call)
        parts.append(f"Call {inline(call.call.function_name, 80)}:\n" + fenced(arguments, ARGUMENT_CHARS, "json"))
        if call.observation is not None:
            parts.append("Result:\n" + _result(call.observation))
    if len(view.calls) > CALLS_SHOWN:
        parts.append(f"_{len(view.calls) - CALLS_SHOWN} more tool calls: see the permalink._")
    for observation, _refs in view.other_observations[:1]:
        parts.append("Observation:\n" + _result(observation))
    return "\n\n".join(parts)


def _result(observation: ObservationResult) -> str:
    """A tool's result from its stored preview (the page's), saying how much of the whole it leaves out."""
    left = max(0, observation.content_size - len(observation.preview.encode("utf-8", "surrogatepass")))
    return fenced(observation.preview, RESULT_CHARS, more=left if observation.is_cut else 0, unit="bytes")


def view_arguments(call: steps.ToolCallView) -> str:
    """The call's arguments as the page prints them (JSON, its multi-line strings as text blocks)."""
    text = call.arguments_text
    for block in call.blocks:
        text += f"\n{block.name}:\n{block.text}"
    return text if text else pretty_json(call.call.arguments)


def _beyond(shown: str, step: Any, name: str) -> int:
    """Characters of the step's text past the page's preview (the window loads a head of each text)."""
    full = getattr(step, f"{name}_len", None) or 0
    return max(0, full - steps.TEXT_PREVIEW) if full > steps.TEXT_PREVIEW else 0
