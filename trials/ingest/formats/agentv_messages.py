"""AgentV output messages as steps: a row's `output[]` as the trial's trajectory, each message a
step, a tool call's recorded `output` its observation; and one stored message read back as the
importer read it (the step API). agentv.py reads the rows.
"""

from __future__ import annotations

from typing import Any

from trials.ingest.atif_steps import content_text
from trials.ingest.jsonio import dumps_text
from trials.ingest.records import ParsedObservation, ParsedStep, ParsedToolCall, ParsedTrajectory, Problem
from trials.ingest.values import as_dict, as_list, parse_time, pick, to_count, to_float, to_str

_MESSAGE_ALIASES = {
    "durationMs": "duration_ms",
    "endTime": "end_time",
    "startTime": "start_time",
    "tokenUsage": "token_usage",
    "toolCalls": "tool_calls",
}

# An AgentV message role, as an ATIF step source (the viewer's vocabulary).
_SOURCES = {"assistant": "agent", "user": "user", "system": "system", "tool": "tool"}
OUTPUT_MARK = "#output"  # path of a row's messages: file#output@line N (not a file: no ATIF to download)


def aliases(value: dict[str, Any], spellings: dict[str, str]) -> dict[str, Any]:
    """Snake key wins; a camel key is dropped unless it disagrees (then both are kept)."""
    out = dict(value)
    for camel, snake in spellings.items():
        if camel not in out:
            continue
        if out.get(snake) is None:
            out[snake] = out.pop(camel)
        elif out[snake] == out[camel]:
            del out[camel]
    return out


def normalize_message(value: Any) -> Any:
    return aliases(value, _MESSAGE_ALIASES) if isinstance(value, dict) else value


def output_trajectory(
    obj: dict[str, Any], row: dict[str, Any], path: str, line: int, problems: list[Problem]
) -> list[ParsedTrajectory]:
    """A row's `output[]` messages as the trial's steps, so its tool calls are indexed and browsable.

    Each message is a step; a tool call's `output`, when AgentV recorded one, is its observation.
    The message as written is the step's raw JSON (the row itself stays whole in `documents.row`).
    """
    messages = row.get("output")
    if not isinstance(messages, list) or not messages:
        return []
    output = obj.get("output")
    originals = output if isinstance(output, list) else messages
    steps: list[ParsedStep] = []
    for index, (message, original) in enumerate(zip(messages, originals, strict=True)):
        if not isinstance(message, dict):
            what, kept = "an output message that is not an object", "in the stored row; not a step"
            problems.append(Problem(path, what, f"output[{index}]", line, severity="warning", kept=kept))
            continue
        steps.append(_message_step(message, original, len(steps)))
    trial_path = f"{path}{OUTPUT_MARK}@line {line}"
    return [
        ParsedTrajectory(
            path=trial_path,
            role="main",
            schema_version="",
            session_id="",
            trajectory_id="",
            agent={},
            final_metrics=None,
            header={},
            steps=steps,
            problems=[],
        )
    ]


def message_step(raw: dict[str, Any], index: int) -> ParsedStep:
    """One stored output message as the step the importer made of it."""
    return _message_step(normalize_message(raw), raw, index)


def _message_step(message: dict[str, Any], original: dict[str, Any], index: int) -> ParsedStep:
    calls, observations = [], []
    for number, call in enumerate(as_list(message.get("tool_calls"))):
        if not isinstance(call, dict):
            continue
        function = as_dict(call.get("function"))  # the OpenAI shape, as some targets write it
        call_id = to_str(pick(call, "id", "tool_call_id")) or f"{index + 1}.{number + 1}"
        calls.append(
            ParsedToolCall(
                tool_call_id=call_id,
                function_name=to_str(pick(call, "tool", "name") or function.get("name")),
                arguments=pick(call, "input", "arguments", default=function.get("arguments")),
            )
        )
        if call.get("output") is not None:
            text = _text(call["output"])
            observations.append(ParsedObservation(call_id, text, len(text.encode("utf-8", "surrogatepass"))))
    usage = as_dict(message.get("token_usage"))
    return ParsedStep(
        index=index,
        step_id=index + 1,
        source=_SOURCES.get(to_str(message.get("role")), to_str(message.get("role"))[:10]),
        timestamp=parse_time(message.get("start_time"), "", ""),
        model_name="",
        message_text=_text(message.get("content")),
        reasoning="",
        prompt_tokens=to_count(pick(usage, "input", "input_tokens", "prompt_tokens")),
        completion_tokens=to_count(pick(usage, "output", "output_tokens", "completion_tokens")),
        cached_tokens=to_count(pick(usage, "cached", "cached_tokens", "cache_read")),
        cost_usd=to_float(message.get("cost_usd")),
        is_copied_context=False,
        llm_call_count=None,
        context_management="",
        tool_calls=calls,
        observations=observations,
        raw=original if isinstance(original, dict) else message,
    )


def _text(value: Any) -> str:
    """Message content or tool output as text: a string, content parts, or any other JSON as JSON."""
    return content_text(value) if value is None or isinstance(value, (str, list)) else dumps_text(value)
