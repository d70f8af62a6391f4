"""An Inspect sample's `events` as steps, lanes, permission decisions and runtime events. Pure: no Django.

Events are walked in order with a stack of spans (`span_begin` / `span_end`, or the older
`step` begin / end events): the first agent span is the main lane; an agent, handoff or
subtask span inside it is a subagent lane of its own, and model calls made while scoring
go to a `scoring` lane, so a grader's calls are not read as the agent's. Older logs nest a
subtask's or an agent tool's events inside it: they are walked as a span of their own.

A model event is an agent step (its output message, tool calls and token usage); the tool
events that answer its calls are that step's observation. Each step is written as an ATIF
step (the stored log keeps Inspect's own JSON), so the trial page, search, alignment and the
ATIF export read it as they read any other step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trials.ingest.atif_steps import parse_step
from trials.ingest.context_kinds import collect_redactions, has_redaction_marks
from trials.ingest.jsonio import dumps_text
from trials.ingest.records import ParsedEvent, ParsedPermission, ParsedStep, Problem
from trials.ingest.values import as_dict, as_list, parse_iso, to_str

MAIN = "main"
SCORING = "scoring"

_AGENT_SPANS = ("agent", "subtask")  # (a handoff span holds the tool call and then the agent's own span)
_SCORING_SPANS = ("scorers", "scorer")
ATTACHMENT = "attachment://"

# Inspect's approval decisions, as a permission decision.
_DECISIONS = {"approve": "approve", "modify": "edit", "reject": "deny", "terminate": "deny", "escalate": "pending"}


@dataclass
class Lane:
    """A sub-transcript: the main agent, a subagent, or the scorers' model calls."""

    lane_id: str
    name: str
    parent: str = ""
    span_type: str = ""
    call_id: str = ""  # the parent's tool call it answers (a handoff, an agent as a tool)
    steps: int = 0


@dataclass
class Survey:
    """What one pass over a sample's events finds besides its steps."""

    lanes: dict[str, Lane] = field(default_factory=lambda: {MAIN: Lane(MAIN, "main")})
    redactions: dict[str, dict[str, Any]] = field(default_factory=dict)  # named in its sandbox calls, approvals
    problems: list[Problem] = field(default_factory=list)
    count: int = 0
    first: str = ""  # the first and last event timestamps, as written
    last: str = ""


def flattened(events: Iterable[Any]) -> Iterator[Any]:
    """Events in order, a nested subtask's or agent tool's events (older logs) framed as a span of their own."""
    for index, event in enumerate(events):
        nested = as_list(event.get("events")) if isinstance(event, dict) else []
        if not nested:
            yield event
            continue
        span_id = f"{event.get('event')}-{event.get('uuid') or event.get('id') or index}"
        name = to_str(event.get("agent") or event.get("name") or event.get("function"))
        yield {
            "event": "span_begin",
            "id": span_id,
            "type": "subtask",
            "name": name,
            "timestamp": event.get("timestamp"),
        }
        yield from flattened(nested)
        yield {"event": "span_end", "id": span_id}
        yield {k: v for k, v in event.items() if k != "events"}


def with_lanes(events: Iterable[Any], lanes: dict[str, Lane] | None = None) -> Iterator[tuple[str, Any]]:
    """(lane id, event) for each event that is not a span marker; `lanes` gains each lane opened.

    An event's lane is its `span_id`'s when it names one (a tool event belongs to the agent
    that called it, not to the tool's span), else the innermost open span's.
    """
    stack: list[_Span] = []
    lane_of: dict[str, str] = {}
    for event in flattened(events):
        if not isinstance(event, dict):
            yield (stack[-1].lane if stack else MAIN), event
            continue
        kind = event.get("event")
        if kind == "step" and event.get("action") in ("begin", "end"):  # inspect_ai before spans
            kind = "span_begin" if event["action"] == "begin" else "span_end"
            event = {**event, "id": f"step:{event.get('type')}:{event.get('name')}"}
        if kind == "span_begin":
            span = _opened(event, stack, lanes)
            lane_of[span.span_id] = span.lane
            stack.append(span)
            continue
        if kind == "span_end":
            ended = to_str(event.get("id"))
            while stack and stack.pop().span_id != ended:
                pass  # (a span left open ends with its parent)
            continue
        if kind == "tool" and stack and stack[-1].span_type == "tool":
            stack[-1].call_id = to_str(event.get("id"))  # (an agent opened inside this span answers this call)
        yield lane_of.get(to_str(event.get("span_id")), stack[-1].lane if stack else MAIN), event


@dataclass
class _Span:
    span_id: str
    span_type: str
    lane: str
    in_agent: bool
    call_id: str = ""


def _opened(event: dict[str, Any], stack: list[_Span], lanes: dict[str, Lane] | None) -> _Span:
    """The span `event` begins, in its parent's lane or in a lane of its own."""
    lane, in_agent = (stack[-1].lane, stack[-1].in_agent) if stack else (MAIN, False)
    span_type, span_id = to_str(event.get("type")), to_str(event.get("id")) or f"span{len(stack)}"
    if span_type in _SCORING_SPANS:
        lane = SCORING
        if lanes is not None and SCORING not in lanes:
            lanes[SCORING] = Lane(SCORING, "scoring", MAIN, span_type)
    elif span_type in _AGENT_SPANS and (in_agent or span_type == "subtask") and lane != SCORING:
        parent, lane = lane, span_id
        if lanes is not None and lane not in lanes:
            call_id = next((s.call_id for s in reversed(stack) if s.span_type == "tool"), "")
            lanes[lane] = Lane(lane, to_str(event.get("name")) or span_type, parent, span_type, call_id=call_id)
    return _Span(span_id, span_type, lane, in_agent or span_type in _AGENT_SPANS)


def survey(events: Iterable[Any], where: str) -> Survey:
    """Lanes, time span and redactions of the sample's events. Its approvals and sandbox calls are
    read again as they are written (`approvals`, `sandbox_calls`): a long sample has thousands."""
    found = Survey()
    for lane, event in with_lanes(events, found.lanes):
        index = found.count
        found.count += 1
        if not isinstance(event, dict):
            what = "an event that is not an object"
            kept = "in the stored log"
            found.problems.append(Problem(where, what, f"events[{index}]", severity="warning", kept=kept))
            continue
        stamp = to_str(event.get("timestamp"))
        found.first = found.first or stamp
        found.last = stamp or found.last
        kind = event.get("event")
        if kind in ("model", "tool"):
            found.lanes[lane].steps += 1
        # (found here: the approvals and sandbox calls are read once, lazily, so the stage cannot look first)
        if kind in ("sandbox", "approval") and has_redaction_marks(event):
            collect_redactions(event, found.redactions)
    return found


def approvals(events: Iterable[Any], resolve: Callable[[Any], Any]) -> Iterator[ParsedPermission]:
    """The sample's approval events, as permission decisions (the redactions `survey` found in them are
    withheld by the import's redaction stage)."""
    for index, (_, event) in enumerate(with_lanes(events)):
        if isinstance(event, dict) and event.get("event") == "approval":
            yield _permission(event, index, resolve)


def sandbox_calls(events: Iterable[Any], where: str) -> Iterator[ParsedEvent]:
    """The sample's sandbox events, as runtime events (withheld from as its approvals are)."""
    for index, (lane, event) in enumerate(with_lanes(events)):
        if isinstance(event, dict) and event.get("event") == "sandbox":
            yield _sandbox_event(event, index, lane, where)


def _permission(event: dict[str, Any], index: int, resolve: Callable[[Any], Any]) -> ParsedPermission:
    call = as_dict(event.get("call"))
    when = parse_iso(event.get("timestamp"))
    return ParsedPermission(
        action_id=to_str(event.get("uuid")) or f"approval-{index}",
        tool_call_id=to_str(call.get("id")),
        action_type="tool_call",
        tool_name=to_str(call.get("function")),
        scope={"arguments": resolve(call.get("arguments"))},
        prompt=to_str(resolve(event.get("message"))),
        decision=_DECISIONS.get(to_str(event.get("decision")), "pending"),
        decided_by=to_str(event.get("approver")),
        reason=to_str(resolve(event.get("explanation"))),
        requested_at=when,
        resolved_at=when,
        raw=event,
    )


def _sandbox_event(event: dict[str, Any], index: int, lane: str, where: str) -> ParsedEvent:
    payload = {k: v for k, v in event.items() if k not in ("event", "uuid", "timestamp")}
    return ParsedEvent(
        type=f"sandbox.{to_str(event.get('action')) or 'call'}",
        event_id=to_str(event.get("uuid")) or f"sandbox-{index}",
        timestamp=parse_iso(event.get("timestamp")),
        sequence=index,
        correlation={"spanId": to_str(event.get("span_id")), "lane": lane},
        payload=payload,
        refs={},
        raw=event,
        file=where,
    )


# ---------------------------------------------------------------- steps


def input_steps(sample_input: Any, resolve: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """The sample's input (a string, or chat messages) as the first steps of the main lane."""
    if isinstance(sample_input, str):
        return [{"source": "user", "message": resolve(sample_input)}]
    steps = []
    for message in as_list(sample_input):
        if isinstance(message, dict):
            role = to_str(message.get("role"))
            source = role if role in ("system", "user") else "agent"
            steps.append({"source": source, "message": message_text(message.get("content"), resolve)})
    return steps


def model_input(event: dict[str, Any], pool: list[Any]) -> list[Any]:
    """A `model` event's input messages: as written, or (log v3's de-duplication) the `input_refs`
    ranges `[start, end)` of the sample's message pool (`events_data.messages`)."""
    if event.get("input"):
        return as_list(event["input"])
    found: list[Any] = []
    for ref in as_list(event.get("input_refs")):
        if isinstance(ref, list) and len(ref) == 2 and all(isinstance(n, int) for n in ref):
            found.extend(pool[ref[0] : ref[1]])
    return found


def lane_steps(
    events: Iterable[Any],
    lane: str,
    first: list[dict[str, Any]],
    lanes: dict[str, Lane],
    resolve: Callable[[Any], Any],
    pool: list[Any] | None = None,
) -> Iterator[ParsedStep]:
    """The steps of one lane, in order: `first` (the input), then each model call with its tool results.
    With no `first` (a subagent's lane, a sample with no input), the prompt is the first model call's
    system and user messages (its `input`, or its `input_refs` into `pool`).

    A tool result a subagent lane answered refers to that lane, as ATIF's subagent_trajectory_ref.
    """
    children = {child.call_id: child.lane_id for child in lanes.values() if child.call_id and child.steps}
    number = 0
    pending: dict[str, Any] | None = None

    def emitted(step: dict[str, Any]) -> ParsedStep:
        nonlocal number
        number += 1
        step = {"step_id": number, **step}
        return parse_step(step, number - 1)

    for step in first:
        yield emitted(step)
    for event_lane, event in with_lanes(events):
        if event_lane != lane or not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "model":
            if pending is not None:
                yield emitted(pending)
            if number == 0:
                for step in input_steps(_prompt(model_input(event, pool or [])), resolve):
                    yield emitted(step)
            pending = _model_step(event, resolve)
        elif kind == "tool":
            result = _tool_result(event, resolve)
            if child := children.get(result["source_call_id"]):
                result["subagent_trajectory_ref"] = [{"trajectory_id": child}]
            calls = {c["tool_call_id"] for c in as_list(pending.get("tool_calls"))} if pending else set()
            if pending is not None and result["source_call_id"] in calls:
                pending.setdefault("observation", {"results": []})["results"].append(result)
                continue
            if pending is not None:
                yield emitted(pending)
                pending = None
            yield emitted(_tool_step(event, result, resolve))
    if pending is not None:
        yield emitted(pending)


def _prompt(messages: list[Any]) -> list[Any]:
    """The system and user messages before the first answer."""
    prompt = []
    for message in messages:
        if as_dict(message).get("role") not in ("system", "user"):
            break
        prompt.append(message)
    return prompt


def _model_step(event: dict[str, Any], resolve: Callable[[Any], Any]) -> dict[str, Any]:
    output = as_dict(event.get("output"))
    choices = as_list(output.get("choices"))
    message = as_dict(as_dict(choices[0]).get("message")) if choices else {}
    usage = as_dict(output.get("usage"))
    step: dict[str, Any] = {
        "source": "agent",
        "timestamp": event.get("timestamp"),
        "model_name": to_str(output.get("model") or event.get("model")),
        "message": message_text(message.get("content"), resolve),
    }
    if reasoning := reasoning_text(message.get("content"), resolve):
        step["reasoning_content"] = reasoning
    calls = [c for c in as_list(message.get("tool_calls")) if isinstance(c, dict)]
    if calls:
        step["tool_calls"] = [
            {
                "tool_call_id": to_str(c.get("id")),
                "function_name": to_str(c.get("function")),
                "arguments": resolve(c.get("arguments")),
            }
            for c in calls
        ]
    metrics = {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
        "cached_tokens": usage.get("input_tokens_cache_read"),
        "cost_usd": usage.get("total_cost"),
    }
    if metrics := {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}:
        step["metrics"] = metrics
    inspect = {"event": "model", "uuid": event.get("uuid"), "span_id": event.get("span_id")}
    inspect |= {"stop_reason": as_dict(choices[0]).get("stop_reason")} if choices else {}
    if event.get("error"):
        inspect["error"] = resolve(event["error"])
        step["message"] = step["message"] or f"(model error: {to_str(inspect['error'])})"
    step["extra"] = {"inspect": {k: v for k, v in inspect.items() if v is not None}}
    return step


def _tool_result(event: dict[str, Any], resolve: Callable[[Any], Any]) -> dict[str, Any]:
    error = as_dict(event.get("error"))
    content = message_text(resolve(event.get("result")), resolve)
    if error:
        content = f"{content}\n" if content else ""
        content += f"error ({to_str(error.get('type'))}): {to_str(resolve(error.get('message')))}"
    return {"source_call_id": to_str(event.get("id")), "content": content}


def _tool_step(event: dict[str, Any], result: dict[str, Any], resolve: Callable[[Any], Any]) -> dict[str, Any]:
    """A tool event no model call of its lane asked for (a solver called it): a step of its own."""
    call = {
        "tool_call_id": to_str(event.get("id")),
        "function_name": to_str(event.get("function")),
        "arguments": resolve(event.get("arguments")),
    }
    inspect = {"event": "tool", "uuid": event.get("uuid"), "span_id": event.get("span_id")}
    return {
        "source": "agent",
        "timestamp": event.get("timestamp"),
        "message": "",
        "tool_calls": [call],
        "observation": {"results": [result]},
        "extra": {"inspect": {k: v for k, v in inspect.items() if v is not None}},
    }


def message_text(content: Any, resolve: Callable[[Any], Any]) -> str:
    """The text of Inspect message content: a string, or its text parts (other parts named)."""
    content = resolve(content)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return dumps_text(content)
    parts = []
    for part in content:
        part_type = as_dict(part).get("type")
        if part_type == "text":
            parts.append(to_str(resolve(part.get("text"))))
        elif part_type != "reasoning" and part_type is not None:
            parts.append(f"[{part_type}]")
    return "\n".join(parts)


def reasoning_text(content: Any, resolve: Callable[[Any], Any]) -> str:
    parts = [as_dict(p) for p in as_list(resolve(content))]
    return "\n".join(to_str(resolve(p.get("reasoning"))) for p in parts if p.get("type") == "reasoning")


def resolver(attachments: dict[str, Any]) -> Callable[[Any], Any]:
    """Inspect moves long texts to the sample's `attachments`, writing `attachment://<hash>` in their place."""

    def resolve(value: Any) -> Any:
        if isinstance(value, str):
            if value.startswith(ATTACHMENT):
                found = attachments.get(value[len(ATTACHMENT) :])
                return found if isinstance(found, str) else value
            return value
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value

    return resolve
