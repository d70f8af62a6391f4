"""An ATIF trajectory made from a trial's runtime events, for a trial whose agent wrote none (seed 000).

Pure: event dicts in, an ATIF dict out. User input becomes user steps, model output agent
steps, tool starts their tool calls and tool results the observations of the step that
called them. The trajectory says it was derived (`extra.derived_from`), and Benchviewer
labels it so on the page and in the API. `unplaced` says which events it cannot place, and
why, so the runner hears of it (docs/reporting-from-a-runner.md has the table of types and
fields: keep the two in step, tests/live/test_runner_doc.py checks its examples).
"""

from __future__ import annotations

import json
from typing import Any

from trials.ingest.context_kinds import CONTEXT_EVENT_TYPES
from trials.ingest.values import as_dict

SCHEMA_VERSION = "ATIF-v1.6"

USER_INPUT = frozenset({"turn.submitted", "subagent.input", "channel.message", "process.input"})
MODEL_OUTPUT = frozenset({"model.completed", "model.failed"})
TOOL_START = frozenset({"tool.started", "tool.args"})
TOOL_END = frozenset({"tool.result", "tool.completed", "tool.failed"})
REASONING = frozenset({"reasoning.summary", "reasoning.delta"})
STEP_EVENTS = USER_INPUT | MODEL_OUTPUT | TOOL_START | TOOL_END | REASONING
# Where the text of each kind is read from: the first of these payload keys that has a value.
USER_TEXT = ("text", "input", "message", "content", "inputRef")
MODEL_TEXT = ("text", "output", "message", "content", "error")
REASONING_TEXT = ("text", "summary", "delta", "content")
TOOL_RESULT = ("result", "output", "content", "error", "message")
# Every event type of the Lime runtime profile (agentruntime-lime-profile-event.schema.json's `type`
# enum): those that make no step are kept for what they say (a permission, a reward, the transcript).
PROFILE_TYPES = frozenset(
    "session.created session.updated thread.started thread.updated turn.submitted turn.started "
    "turn.completed turn.failed task.created task.accepted task.queued task.started task.updated "
    "task.progress task.waiting task.blocked task.paused task.resumed task.retrying task.cancel_requested "
    "task.cancelled task.timed_out task.failed task.lost task.completed task.archived run.status "
    "model.requested model.delta model.completed model.failed reasoning.delta reasoning.summary "
    "tool.catalog.resolved tool.started tool.args tool.progress tool.result tool.failed action.required "
    "action.resolved queue.changed context.resolved context.compaction.started "
    "context.compaction.completed context.compaction.failed artifact.changed evidence.changed "
    "subagent.spawned subagent.status subagent.input subagent.completed subagent.failed subagent.closed "
    "limit.changed snapshot.updated runtime.warning runtime.error permission.evaluated "
    "permission.requested permission.resolved sandbox.applied sandbox.violation hook.started "
    "hook.completed hook.failed policy.changed process.started process.output process.input "
    "process.completed process.failed process.terminated task.profile.resolved "
    "routing.candidates.resolved routing.decided routing.fallback.applied routing.not_possible "
    "routing.single_candidate task.delegated task.dependency.updated task.attempt.started "
    "task.attempt.completed task.attempt.failed cost.estimated cost.recorded rate_limit.hit quota.low "
    "quota.blocked channel.connected channel.disconnected channel.resumed channel.message "
    "channel.permission_forwarded channel.permission_returned job.created job.started job.progress "
    "job.item.started job.item.completed job.item.failed job.completed job.failed job.cancelled "
    "output.spilled output.truncated output.redacted output.expired history.window.loaded "
    "history.reconstructed history.rollback.started history.rollback.completed snapshot.repaired "
    "benchmark.dataset.resolved benchmark.configuration.resolved benchmark.trial.started "
    "benchmark.trial.completed benchmark.trial.failed benchmark.reward.recorded "
    "benchmark.comparison.completed".split()
)


def _text(payload: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
        if value not in (None, "", [], {}):
            return json.dumps(value, default=str)
    return ""


def _order(event: dict[str, Any]) -> tuple[int, str]:
    sequence = event.get("sequence")
    return (
        sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else 2**62,
        str(event.get("timestamp") or ""),
    )


def _metrics(payload: dict[str, Any]) -> dict[str, Any] | None:
    usage = as_dict(payload.get("usage")) or payload
    names = {
        "prompt_tokens": ("inputTokens", "promptTokens", "prompt_tokens", "input_tokens"),
        "completion_tokens": ("outputTokens", "completionTokens", "completion_tokens", "output_tokens"),
        "cached_tokens": ("cachedTokens", "cached_tokens", "cacheReadTokens"),
        "cost_usd": ("costUsd", "cost_usd"),
    }
    metrics: dict[str, Any] = {}
    for target, keys in names.items():
        for key in keys:
            value = usage.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
                metrics[target] = value if target == "cost_usd" else int(value)
                break
    return metrics or None


def derive_trajectory(events: list[dict[str, Any]], *, session_id: str = "", agent_name: str = "") -> dict[str, Any]:
    """The ATIF trajectory of these runtime events (in any order: sorted by sequence, then time)."""
    steps: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}  # toolCallId -> the step that called it
    reasoning: list[str] = []
    model_name = ""
    used = 0
    for event in sorted(events, key=_order):
        kind = str(event.get("type") or "")
        payload = as_dict(event.get("payload"))
        stamp = event.get("timestamp") if isinstance(event.get("timestamp"), str) else None
        if kind in USER_INPUT:
            text = _text(payload, *USER_TEXT)
            steps.append({"source": "user", "message": text, "timestamp": stamp})
        elif kind in REASONING:
            reasoning.append(_text(payload, *REASONING_TEXT))  # (the next agent step's)
        elif kind in MODEL_OUTPUT:
            model_name = _text(payload, "modelName", "model", "model_name") or model_name
            step: dict[str, Any] = {
                "source": "agent",
                "message": _text(payload, *MODEL_TEXT),
            }
            if stamp:
                step["timestamp"] = stamp
            if model_name:
                step["model_name"] = model_name
            if reasoning:
                step["reasoning_content"] = "\n".join(r for r in reasoning if r)
                reasoning = []
            if (metrics := _metrics(payload)) is not None:
                step["metrics"] = metrics
            steps.append(step)
        elif kind in TOOL_START:
            call_id = str(event.get("toolCallId") or payload.get("toolCallId") or f"call-{len(calls) + 1}")
            owner = calls.get(call_id)
            if owner is None:  # the agent step it belongs to: the last one, unless its calls have answers
                last = steps[-1] if steps else None
                if last is None or last["source"] != "agent" or "observation" in last:
                    last = {"source": "agent", "message": "", "timestamp": stamp}
                    steps.append(last)
                owner = calls[call_id] = last
                owner.setdefault("tool_calls", []).append(
                    {
                        "tool_call_id": call_id,
                        "function_name": _text(payload, "toolName", "name", "tool") or "tool",
                        "arguments": {},
                    }
                )
            arguments = payload.get("args", payload.get("arguments", payload.get("input")))
            if arguments is not None:
                call = next(c for c in owner["tool_calls"] if c["tool_call_id"] == call_id)
                call["arguments"] = arguments if isinstance(arguments, dict) else {"value": arguments}
        elif kind in TOOL_END:
            call_id = str(event.get("toolCallId") or payload.get("toolCallId") or "")
            owner = calls.get(call_id)
            content = _text(payload, *TOOL_RESULT)
            if owner is None:  # a result whose start was never sent: a step of its own, so nothing is lost
                owner = {
                    "source": "agent",
                    "message": "",
                    "timestamp": stamp,
                    "tool_calls": [
                        {
                            "tool_call_id": call_id or f"call-{len(calls) + 1}",
                            "function_name": _text(payload, "toolName", "name") or "tool",
                            "arguments": {},
                        }
                    ],
                }
                call_id = owner["tool_calls"][0]["tool_call_id"]
                calls[call_id] = owner
                steps.append(owner)
            owner.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": call_id, "content": content}
            )
        else:
            continue
        used += 1
    if any(reasoning):  # reasoning no model output followed: a step of its own, so nothing is lost
        steps.append({"source": "agent", "message": "", "reasoning_content": "\n".join(r for r in reasoning if r)})
    for number, step in enumerate(steps, start=1):
        step["step_id"] = number
        if step.get("timestamp") is None:
            step.pop("timestamp", None)
    if not steps:  # ATIF needs one step: say that nothing in the events made one
        steps = [{"step_id": 1, "source": "system", "message": "(no user, model or tool events to derive steps from)"}]
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id or "derived",
        "agent": {
            "name": agent_name or "unknown",
            "version": "unknown",
            **({"model_name": model_name} if model_name else {}),
        },
        "steps": steps,
        "extra": {"derived_from": "runtime events", "events_used": used, "events_total": len(events)},
    }


def unplaced(event: Any) -> str:
    """Why the derivation cannot place this event in a step ("" when it can, or when the event is kept
    for something else: a reward, a permission decision…). A bad event (no type) is not judged here."""
    kind = event.get("type") if isinstance(event, dict) else None
    if not isinstance(kind, str) or not kind:
        return ""
    if kind in USER_INPUT and not _text(as_dict(event.get("payload")), *USER_TEXT):
        keys = ", ".join(f"payload.{key}" for key in USER_TEXT)
        return f"a user step with no message: its text is in none of {keys}"
    if kind in STEP_EVENTS or kind in PROFILE_TYPES or kind in CONTEXT_EVENT_TYPES:
        return ""
    return f"{kind!r} is not an event type of the Lime profile or Agent Context: it makes no step{_did_you_mean(kind)}"


def _did_you_mean(kind: str) -> str:
    """The type a runner most likely meant, from the words of the one it sent."""
    words = set(kind.lower().replace("_", ".").replace("-", ".").split("."))
    if words & {"tool", "function", "call"}:
        hint = "tool.started (a call) or tool.result (its result)"
    elif words & {"user", "human", "prompt", "input", "instruction"}:
        hint = "turn.submitted"
    elif words & {"model", "assistant", "llm", "completion", "response", "message"}:
        hint = "model.completed"
    elif words & {"thinking", "thought", "reasoning"}:
        hint = "reasoning.summary"
    else:
        return " (kept as a runtime event)"
    return f" (kept as a runtime event; for a step, send {hint})"
