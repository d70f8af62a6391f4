"""The ATIF steps of one agent's OTLP spans (trials/ingest/formats/otlp.py). No Django.

A model call is a step: a `chat` / `text_completion` / `generate_content` span, or a span with no
operation that holds `gen_ai.usage.*` (Google ADK's `call_llm`). Frameworks record one call on
nested spans (`call_llm` > `generate_content`, a framework span around an `openai.chat` span):
the innermost is the step, the spans around it lend what it lacks (messages, model, usage) and
their usage is not counted again; an outer span whose usage is not the sum of the calls within it
is a warning. Messages come from the span's attributes (`gen_ai.input.messages`, OpenInference's
`input.value`) or from its GenAI events (span events, or log records attached by span id:
`gen_ai.user.message`, `gen_ai.choice`, ...). A call under a `plan` span is marked as the
agent's planning (`extra.phase`); `gen_ai.evaluation.result` events are the trial's criteria.

An agent skill (semconv-genai's skill spans: an `execute_tool` span that loads a skill, reads one of its
resources or runs its script, named by `gen_ai.skill.*`; or a framework's own skill span carrying them) is
a tool call of the step that asked for it, its skill in the call's `extra.skill`; the model and tool calls
under it are steps of their own, each marked with the skill it ran in (`extra.skill`), and a tool call
under it joins the skill's step, never the step that asked for the skill. A skill span's own usage is
not counted: its calls' is.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from trials.ingest.records import ParsedCriterion
from trials.ingest.values import as_dict, as_list

if TYPE_CHECKING:
    from trials.ingest.formats.otlp import Span

LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
AGENT_OPERATIONS = ("invoke_agent", "create_agent", "invoke_workflow")
# semconv-genai's skill attributes (execute-tool.md, "Agent skills"), as the step's `extra.skill` names them
SKILL = (
    ("name", "gen_ai.skill.name"),
    ("resource", "gen_ai.skill.resource.name"),
    ("description", "gen_ai.skill.description"),
    ("source_uri", "gen_ai.skill.source.uri"),
)
USAGE = (
    ("prompt_tokens", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")),
    (
        "completion_tokens",
        ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
    ),
    ("cached_tokens", ("gen_ai.usage.cache_read.input_tokens", "llm.token_count.prompt_details.cache_read")),
    ("cost_usd", ("gen_ai.usage.cost", "llm.cost.total")),
)
EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
Warnings = list[tuple[str, str]]  # (JSON path, message)


def iso(nanos: int) -> str | None:
    """A span's time as ISO 8601; None when it has none or one no calendar holds (fuzzing found 10^30 ns)."""
    if not nanos:
        return None
    try:
        return datetime.fromtimestamp(nanos / 1e9, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (OverflowError, OSError, ValueError):
        return None


def json_text(value: Any) -> Any:
    """An attribute that holds JSON as text (messages, arguments), read; other text as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def text_of(content: Any) -> str:
    """The text of a message's content or parts (GenAI `parts`, OpenInference `content`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if "parts" in content:
            return text_of(content["parts"])
        return text_of(content.get("content") if "content" in content else content.get("text", ""))
    if isinstance(content, list):
        return "".join(text_of(p) for p in content if not (isinstance(p, dict) and p.get("type") == "tool_call"))
    return "" if content is None else str(content)


def is_llm(span: Span) -> bool:
    operation = span.operation
    return operation in LLM_OPERATIONS or (not operation and bool(usage(span)) and not skill_of(span))


def skill_of(span: Span) -> dict[str, str]:
    """The agent skill a span loads, reads or runs (its `gen_ai.skill.*`); {} when it is no skill span."""
    if span.operation in LLM_OPERATIONS or span.operation in AGENT_OPERATIONS:
        return {}
    found = {name: str(value) for name, key in SKILL if (value := span.attrs.get(key)) not in (None, "")}
    return found if "name" in found or "resource" in found else {}


def call_id_of(span: Span) -> str:
    return str(span.attrs.get("gen_ai.tool.call.id") or f"call_{span.span_id}")


def usage(span: Span) -> dict[str, Any]:
    attrs = span.attrs
    return {
        name: value
        for name, keys in USAGE
        if (value := next((attrs[k] for k in keys if _number(attrs.get(k))), None)) is not None
    }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _messages(chain: list[Span]) -> list[tuple[str, str]]:
    """The input messages of the call: of the first span of the chain that has any."""
    for span in chain:
        raw = json_text(span.attrs.get("gen_ai.input.messages") or span.attrs.get("input.value"))
        found = [(str(as_dict(m).get("role") or ""), text_of(m)) for m in as_list(raw) if isinstance(m, dict)]
        if not found:
            found = [(EVENT_ROLES[e["name"]], text_of(e["body"])) for e in span.events if e["name"] in EVENT_ROLES]
        if instructions := span.attrs.get("gen_ai.system_instructions"):
            found.insert(0, ("system", text_of(json_text(instructions))))
        if found:
            return found
    return []


def steps_of(spans: list[Span]) -> tuple[list[dict[str, Any]], Warnings]:
    """One agent's spans (in time order, agents left out) as ATIF steps, and the warnings on them."""
    by_id = {s.span_id: s for s in spans}
    wrappers = {a.span_id for s in spans if is_llm(s) for a in _llm_ancestors(s, by_id)}
    lane = LaneSteps(by_id, wrappers)
    steps = [step for span in spans for step in lane.feed(span)]
    return steps + lane.close(), lane.warnings()


class LaneSteps:
    """One agent's steps, fed its spans one at a time in time order (agents left out): a step is given
    out once no later span can add to it, so a big file's steps need not all be held
    (otlp_stream.py). `by_id`: the agent's spans, for the model calls around each one (`wrappers`)."""

    def __init__(self, by_id: Mapping[str, Span], wrappers: Collection[str], unique: bool = False) -> None:
        self.by_id, self.wrappers, self.unique = by_id, wrappers, unique  # unique: no span id is fed twice
        self.held: list[dict[str, Any]] = []  # steps not given out yet: the last agent step and those after it
        self.number = 0
        self.seen_inputs: dict[str, list[tuple[str, str]]] = {}  # per conversation: the input messages read so far
        self.last_agent: dict[str, dict[str, Any]] = {}  # per skill span ("": none) the last agent step within it
        self.claimed: dict[str, bool] = {}  # outer spans a step's usage covers: True where the step took theirs
        self.sums: dict[str, dict[str, float]] = {}  # per outer span: the usage of the calls within it
        self.counted: set[str] = set()  # the calls within outer spans whose usage is summed
        self.settled: dict[str, Warnings] = {}  # outer spans done with (`settle`) that have a warning

    def _add(self, step: dict[str, Any]) -> dict[str, Any]:
        self.number += 1
        self.held.append(step)
        return step

    def feed(self, span: Span) -> list[dict[str, Any]]:
        """The steps this span ends: those before the newest agent step of each skill open around it (a tool
        span may add to them)."""
        operation = span.operation
        skill = skill_of(span)
        if is_llm(span) and span.span_id not in self.wrappers:
            skills, scope, within = self._skills_around(span)
            chain = [span, *_llm_ancestors(span, self.by_id)]
            self._sum_within(span, chain[1:])
            for role, text in _new_inputs(chain, self.seen_inputs):
                self._add({"source": role, "message": text, **_when(span)} | ({"extra": {**within}} if within else {}))
            step = _agent_step(chain, self.claimed)
            if _planning(chain[-1], self.by_id):
                step["extra"]["phase"] = "plan"
            step["extra"] |= within
            # (it ends the last step of every skill it is not in: a later tool span is not theirs)
            self.last_agent = {k: v for k, v in self.last_agent.items() if k in {"", *(s.span_id for s in skills)}}
            self.last_agent[scope] = self._add(step)
            return self._release()
        if operation == "chain" and span.attrs.get("context_management.action"):
            action = str(span.attrs["context_management.action"])  # (the step's text is not in the span)
            self._add({"source": "system", "message": "", **_when(span), "extra": {"context_management": action}})
        elif operation == "execute_tool" or skill:
            _, scope, within = self._skills_around(span)
            if (asked := self.last_agent.get(scope)) is None:  # a tool run with no model call before it
                asked = {"source": "agent", "message": "", "llm_call_count": 0, **_when(span), "extra": dict(within)}
                self.last_agent[scope] = self._add(asked)
            _add_tool(asked, span, skill)
        return []

    def _skills_around(self, span: Span) -> tuple[list[Span], str, dict[str, Any]]:
        """The skill spans above this one (nearest first), the nearest one's id ("": none) and what a step
        within it names of it (`extra.skill`)."""
        found: list[Span] = []
        seen = {span.span_id}
        parent = self.by_id.get(span.parent_id)
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            if skill_of(parent):
                found.append(parent)
            parent = self.by_id.get(parent.parent_id)
        return found, found[0].span_id if found else "", {"skill": _skill_ref(found[0])} if found else {}

    def _release(self) -> list[dict[str, Any]]:
        """The held steps before the first one a later tool span may still add to, numbered and given out."""
        open_steps = [id(step) for step in self.last_agent.values()]
        keep = next((n for n, step in enumerate(self.held) if id(step) in open_steps), len(self.held))
        done, self.held = self.held[:keep], self.held[keep:]
        return self._numbered(done, keep=len(self.held))

    def _numbered(self, steps: list[dict[str, Any]], keep: int = 0) -> list[dict[str, Any]]:
        first = self.number - keep - len(steps) + 1
        for number, step in enumerate(steps, start=first):
            step["step_id"] = number
        return steps

    def close(self) -> list[dict[str, Any]]:
        """The steps still held, once the agent's last span is fed."""
        done, self.held = self.held, []
        return self._numbered(done)

    def _sum_within(self, call: Span, outer: list[Span]) -> None:
        if not outer or call.span_id in self.counted:
            return
        if not self.unique:
            self.counted.add(call.span_id)
        for wrapper in outer:
            sums = self.sums.setdefault(wrapper.span_id, {})
            for key, value in usage(call).items():
                sums[key] = sums.get(key, 0) + value

    def settle(self, span_id: str) -> None:
        """Every model call within this outer span has been fed: its warning is known, the span not needed."""
        if warning := self._warning(self.by_id[span_id]):
            self.settled[span_id] = warning
        self.sums.pop(span_id, None)  # (one settled with no warning has no sums left: none again)
        self.claimed.pop(span_id, None)

    def warnings(self) -> Warnings:
        """An outer span whose usage is not the sum of the model calls within it (each counted already)."""
        found: Warnings = []
        for w in sorted(self.wrappers):
            found += self.settled[w] if w in self.settled else self._warning(self.by_id[w])
        return found

    def _warning(self, wrapper: Span) -> Warnings:
        if self.claimed.get(wrapper.span_id):
            return []
        sums, own = self.sums.get(wrapper.span_id, {}), usage(wrapper)
        differs = {k: (v, sums.get(k)) for k, v in own.items() if k != "cost_usd" and sums and sums.get(k) != v}
        if not differs:
            return []
        said = ", ".join(f"{k} {v} (the calls within: {s})" for k, (v, s) in differs.items())
        return [
            (
                wrapper.place,
                f"{wrapper.named()} holds usage the model calls within it do not sum to: {said};"
                " the inner spans' counted once",
            )
        ]


def _planning(span: Span, by_id: Mapping[str, Span]) -> bool:
    """Whether a `plan` span is above this one (semconv-genai: the call that makes the plan is its child)."""
    seen = {span.span_id}
    parent = by_id.get(span.parent_id)
    while parent is not None and parent.span_id not in seen:
        if parent.operation == "plan":
            return True
        seen.add(parent.span_id)
        parent = by_id.get(parent.parent_id)
    return False


def evaluations(spans: list[Span]) -> list[ParsedCriterion]:
    """Each `gen_ai.evaluation.result` event (a span event, or a log record naming the span it evaluates)
    as a criterion: its name, numeric score, label and explanation."""
    found = []
    for span in spans:
        for event in span.events:
            if event["name"] != "gen_ai.evaluation.result":
                continue
            attrs = event["attrs"]
            value = attrs.get("gen_ai.evaluation.score.value")
            score = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            label = attrs.get("gen_ai.evaluation.score.label")
            raw = {"span_id": span.span_id, **({"label": str(label)} if label not in (None, "") else {})}
            if response := attrs.get("gen_ai.response.id"):
                raw["response_id"] = str(response)
            if error := attrs.get("error.type"):
                raw["error"] = str(error)
            name = str(attrs.get("gen_ai.evaluation.name") or "evaluation")
            explanation = str(attrs.get("gen_ai.evaluation.explanation") or "")
            found.append(ParsedCriterion(name, score, reasoning=explanation, raw=raw))
    return found


def _llm_ancestors(span: Span, by_id: Mapping[str, Span]) -> list[Span]:
    """The model-call spans around this one, nearest first."""
    found: list[Span] = []
    seen = {span.span_id}
    parent = by_id.get(span.parent_id)
    while parent is not None and parent.span_id not in seen:
        seen.add(parent.span_id)
        if is_llm(parent):
            found.append(parent)
        parent = by_id.get(parent.parent_id)
    return found


def _new_inputs(chain: list[Span], seen_inputs: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """Input messages not read before in the same conversation (the parent of the outermost span of
    the call): each call repeats the history."""
    messages = _messages(chain)
    conversation = chain[-1].parent_id
    seen = seen_inputs.get(conversation, [])
    seen_inputs[conversation] = messages
    if seen and messages[: len(seen)] == seen:
        fresh = messages[len(seen) :]
    else:  # (the first read, perhaps of a later batch: what follows the last answer is new)
        last = max((n for n, (role, _) in enumerate(messages) if role in ("assistant", "tool")), default=-1)
        fresh = messages[last + 1 :]
    wanted = {"user": "user", "system": "system", "developer": "system"}
    return [(wanted[role], text) for role, text in fresh if role in wanted]


def _when(span: Span) -> dict[str, Any]:
    return {"timestamp": stamp} if (stamp := iso(span.start)) else {}


def _first_attr(chain: list[Span], *keys: str) -> Any:
    return next((s.attrs[k] for s in chain for k in keys if s.attrs.get(k) not in (None, "")), None)


def _output(chain: list[Span]) -> tuple[str, str, list[dict[str, Any]]]:
    """The call's answer: its text, reasoning and tool calls (from `gen_ai.output.messages`, OpenInference's
    `output.value`, or a `gen_ai.choice` event)."""
    span = chain[0]
    if output := json_text(_first_attr(chain, "gen_ai.output.messages")):
        parts = [as_dict(p) for m in as_list(output) for p in as_list(as_dict(m).get("parts"))]
        calls = [
            {"id": p.get("id"), "name": p.get("name"), "arguments": p.get("arguments")}
            for p in parts
            if p.get("type") == "tool_call"
        ]
        text = text_of([p for p in parts if p.get("type") == "text"])
        return text, text_of([p for p in parts if p.get("type") == "reasoning"]), calls
    choices = [as_dict(e["body"]) for s in chain for e in s.events if e["name"] == "gen_ai.choice"][:1]
    if choices:
        message = as_dict(choices[0].get("message")) or choices[0]
        calls = [
            {
                "id": c.get("id"),
                "name": as_dict(c.get("function")).get("name") or c.get("name"),
                "arguments": as_dict(c.get("function")).get("arguments") or c.get("arguments"),
            }
            for c in (as_dict(c) for c in as_list(message.get("tool_calls")))
        ]
        return text_of(message.get("content")), "", calls
    return text_of(span.attrs.get("output.value")), "", []


def _agent_step(chain: list[Span], claimed: dict[str, bool]) -> dict[str, Any]:
    span = chain[0]
    message, reasoning, raw_calls = _output(chain)
    reasoning = reasoning or _first_attr(chain, "metadata.reasoning_content") or ""
    step: dict[str, Any] = {"source": "agent", **_when(span), "message": message}
    if model := _first_attr(chain, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name"):
        step["model_name"] = str(model)
    if reasoning:
        step["reasoning_content"] = str(reasoning)
    calls = [
        {
            "tool_call_id": str(c.get("id") or f"call_{span.span_id}_{n}"),
            "function_name": str(c.get("name") or ""),
            "arguments": as_dict(json_text(c.get("arguments"))),
        }
        for n, c in enumerate(raw_calls)
    ]
    if calls:
        step["tool_calls"] = calls
    metrics = usage(span)
    if not metrics:  # (the innermost span that has them: an outer one, taken once)
        lender = next((s for s in chain[1:] if usage(s) and s.span_id not in claimed), None)
        if lender is not None:
            claimed[lender.span_id] = True
            metrics = usage(lender)
    for outer in chain[1:] if metrics else []:
        claimed.setdefault(outer.span_id, False)
    if metrics:
        step["metrics"] = metrics
    if isinstance(count := span.attrs.get("metadata.aggregated_llm_calls"), int):
        step["llm_call_count"] = count
    step["extra"] = {"otel": {"trace_id": span.trace_id, "span_id": span.span_id, "name": span.name}}
    if span.failed:
        step["extra"]["otel"]["error"] = str(span.status.get("message") or span.attrs.get("error.type") or "error")
    return step


def _add_tool(step: dict[str, Any], span: Span, skill: dict[str, str]) -> None:
    """The tool span's call and result on the step that asked for it (a call it did not list is added);
    the skill it loads, reads or runs in the call's `extra.skill`."""
    attrs = span.attrs
    call_id = call_id_of(span)
    name = str(attrs.get("gen_ai.tool.name") or attrs.get("tool.name") or span.name)
    arguments = json_text(attrs.get("gen_ai.tool.call.arguments", attrs.get("input.value")))
    result = attrs.get("gen_ai.tool.call.result", attrs.get("output.value"))
    if span.failed and not result:
        result = f"error: {span.status.get('message') or attrs.get('error.type') or 'the tool failed'}"
    calls = step.setdefault("tool_calls", [])
    call = next((c for c in calls if c["tool_call_id"] == call_id), None)
    if call is None:
        # (arguments a producer cut short are no JSON object any more: kept as the text sent)
        kept = arguments if isinstance(arguments, dict) else ({"value": arguments} if arguments else {})
        call = {"tool_call_id": call_id, "function_name": name, "arguments": kept}
        calls.append(call)
    if skill:
        call["extra"] = {**call.get("extra", {}), "skill": skill}
    results = step.setdefault("observation", {"results": []})["results"]
    content = json_text(result) if not isinstance(result, str) else result
    results.append(
        {"source_call_id": call_id, "content": text_of(content) if not isinstance(content, str) else content}
    )


def _skill_ref(span: Span) -> dict[str, str]:
    """What a step run within a skill names of it: the skill (and resource), and the call that ran it."""
    skill = skill_of(span)
    ref = {"name": skill.get("name", ""), "tool_call_id": call_id_of(span)}
    if "resource" in skill:
        ref["resource"] = skill["resource"]
    return ref
