"""One ATIF step read into what its rows hold: its text, tool calls, observations, tokens and cost.

Pure and shared below the parsers: the ATIF parser reads each step with it, and a step scrubbed of a
redacted value is read again with it (trials.ingest.redaction), at import, live or later. Its
subagent refs are matched to the trial's trajectories here too, whatever format read them.
"""

from __future__ import annotations

import json
from typing import Any

from trials.ingest.records import ParsedObservation, ParsedStep, ParsedToolCall, ParsedTrial, Problem
from trials.ingest.values import as_dict, as_list, parse_iso, to_float


def parse_step(raw: Any, index: int) -> ParsedStep:
    if not isinstance(raw, dict):  # the file keeps the real value; the row says what was wrong
        shown = json.dumps(raw, default=str)[:200]
        raw = {
            "step_id": None,
            "source": "invalid",
            "message": f"(not a step object: {shown})",
            "extra": {"invalid": raw},
        }
    tool_calls = [
        ParsedToolCall(
            tool_call_id=str(call.get("tool_call_id") or ""),
            function_name=str(call.get("function_name") or ""),
            arguments=call.get("arguments"),
            skill=as_dict(as_dict(call.get("extra")).get("skill")),
        )
        for call in unique_calls(as_list(raw.get("tool_calls")))
    ]
    observations = []
    observation = raw.get("observation")
    results = (
        [r for r in as_list(observation.get("results")) if isinstance(r, dict)] if isinstance(observation, dict) else []
    )
    # (no source_call_id anywhere, as many results as calls: each result is its call's, in order)
    by_position = len(results) == len(tool_calls) and not any("source_call_id" in r for r in results)
    for position, result in enumerate(results):
        text = content_text(result.get("content"))
        scid = tool_calls[position].tool_call_id or None if by_position else result.get("source_call_id")
        observations.append(
            ParsedObservation(
                source_call_id=scid if isinstance(scid, str) else None,
                content_text=text,
                content_size=len(text.encode("utf-8", "surrogatepass")),
                subagent_refs=[r for r in as_list(result.get("subagent_trajectory_ref")) if isinstance(r, dict)],
            )
        )
    metrics = raw.get("metrics") if isinstance(raw.get("metrics"), dict) else {}
    extra = raw.get("extra") if isinstance(raw.get("extra"), dict) else {}
    context_management = extra.get("context_management")
    return ParsedStep(
        index=index,
        step_id=raw.get("step_id"),
        source=str(raw.get("source") or ""),
        timestamp=parse_iso(raw.get("timestamp")),
        model_name=str(raw.get("model_name") or ""),
        message_text=content_text(raw.get("message")),
        reasoning=str(raw.get("reasoning_content") or ""),
        prompt_tokens=nonnegative_count(metrics.get("prompt_tokens")),
        completion_tokens=nonnegative_count(metrics.get("completion_tokens")),
        cached_tokens=nonnegative_count(metrics.get("cached_tokens")),
        cost_usd=to_float(metrics.get("cost_usd")),
        is_copied_context=raw.get("is_copied_context") is True,
        llm_call_count=nonnegative_count(raw.get("llm_call_count")),
        context_management=str(context_management.get("type") or "") if isinstance(context_management, dict) else "",
        tool_calls=tool_calls,
        observations=observations,
        raw=raw,
        skill=str(as_dict(extra.get("skill")).get("name") or ""),
    )


def unique_calls(calls: list[Any]) -> list[dict[str, Any]]:
    """A step's tool calls, each once: some producers write every call twice (same id, or same name and arguments)."""
    seen: set[str] = set()
    kept = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        identity = call_identity(call)
        if identity not in seen:
            seen.add(identity)
            kept.append(call)
    return kept


def content_text(content: Any) -> str:
    """The text of a message or observation: a string, or the text of its content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") == "text":
                    parts.append(str(part.get("text") or ""))
                elif is_openai_message(part):
                    parts.append(content_text(part.get("content")))
                else:
                    source = as_dict(part.get("source"))
                    parts.append(f"[{part.get('type')}: {source.get('path', '')}]")
        return "\n".join(parts)
    if is_openai_message(content):  # (non-conformant producers: {"role": …, "content": …} as the message)
        return content_text(content.get("content"))
    return json.dumps(content, default=str)  # not orjson: agents print integers past 64 bits


def is_openai_message(value: Any) -> bool:
    """An OpenAI-style chat message where ATIF wants a string or content parts (other producers' "ATIF-v1.6")."""
    return isinstance(value, dict) and "type" not in value and "content" in value and "role" in value


def call_identity(call: dict[str, Any]) -> str:
    call_id = call.get("tool_call_id")
    if isinstance(call_id, str) and call_id:
        return f"id:{call_id}"
    return "call:" + json.dumps([call.get("function_name"), call.get("arguments")], sort_keys=True, default=str)


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def nonnegative_count(value: Any) -> int | None:
    """A count as the columns hold it: a whole number from 0 to 2^63 (validate_step flags others)."""
    value = int_or_none(value)
    return value if value is not None and 0 <= value < 2**63 else None


def names_trajectory(ref: dict[str, Any], path: str, trajectory_id: str, session_id: str, role: str) -> bool:
    """Does a subagent_trajectory_ref name this trajectory (by its file, its trajectory_id, or a
    subagent's session_id)? `path`: the trajectory's pack-relative path."""
    wanted = str(ref.get("trajectory_path") or "")
    return bool(
        (wanted and (path == wanted or path.endswith("/" + wanted.lstrip("./"))))
        or (ref.get("trajectory_id") and trajectory_id == ref.get("trajectory_id"))
        or (ref.get("session_id") and session_id == ref.get("session_id") and role != "main")
    )


def flag_missing_subagents(trial: ParsedTrial) -> None:
    """Subagent refs naming no trajectory of the trial: that subagent's steps are missing.
    (Once the trial's steps are read: the refs are found as they are.)"""
    names = [(t.path, t.trajectory_id, t.session_id, t.role) for t in trial.trajectories]
    for trajectory in trial.trajectories:
        for json_path, ref in trajectory.subagent_refs:
            named = ref.get("trajectory_path") or ref.get("trajectory_id") or ref.get("session_id")
            if named and not any(names_trajectory(ref, *name) for name in names):
                # (a ref naming nothing at all is flagged by atif_checks.validate_step)
                message = f"subagent_trajectory_ref names {named!r}, which is not in this trial: its steps are missing"
                trial.problems.append(
                    Problem(
                        trajectory.path,
                        message,
                        json_path=json_path,
                        severity="warning",
                        kept="the reference, shown on its step",
                    )
                )
