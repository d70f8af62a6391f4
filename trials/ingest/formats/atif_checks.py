"""ATIF's schema, checked field by field: versions, known fields, each step's and the header's
values. A problem names the file and JSON path and what was kept."""

from __future__ import annotations

import re
from typing import Any

from trials.ingest.atif_steps import call_identity, is_openai_message, nonnegative_count
from trials.ingest.records import (
    Problem,
)
from trials.ingest.values import as_dict, as_list, parse_iso

KNOWN_VERSIONS = {f"ATIF-v1.{n}" for n in range(0, 9)}


VERSION_RE = re.compile(r"^ATIF-v1\.\d+$")


AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


STEP_FIELDS = {
    "step_id",
    "timestamp",
    "source",
    "model_name",
    "reasoning_effort",
    "message",
    "reasoning_content",
    "tool_calls",
    "observation",
    "metrics",
    "is_copied_context",
    "llm_call_count",
    "extra",
}


ROOT_FIELDS = {
    "schema_version",
    "session_id",
    "trajectory_id",
    "agent",
    "steps",
    "notes",
    "final_metrics",
    "continued_trajectory_ref",
    "extra",
    "subagent_trajectories",
}


# What each nested ATIF object may hold (Harbor's models forbid anything else: we keep it and flag it).
NESTED_FIELDS = {
    "agent": {"name", "version", "model_name", "tool_definitions", "extra"},
    "final_metrics": {
        "total_prompt_tokens",
        "total_completion_tokens",
        "total_cached_tokens",
        "total_cost_usd",
        "total_steps",
        "extra",
    },
    "metrics": {
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cost_usd",
        "prompt_token_ids",
        "completion_token_ids",
        "logprobs",
        "extra",
    },
    "tool_call": {"tool_call_id", "function_name", "arguments", "extra"},
    "observation": {"results"},
    "result": {"source_call_id", "content", "subagent_trajectory_ref", "extra"},
    "ref": {"session_id", "trajectory_id", "trajectory_path", "extra"},
    "content_part": {"type", "text", "source"},
    "source": {"media_type", "path", "duration_sec"},  # an image's or an audio clip's
}


def unknown_fields(obj: Any, kind: str, where: str) -> list[str]:
    """JSON paths of the keys `obj` (an ATIF object of that kind) may not hold."""
    if not isinstance(obj, dict) or not (unknown := obj.keys() - NESTED_FIELDS[kind]):
        return []
    return [f"{where}.{key}" for key in sorted(unknown, key=str)]


def validate_header(header: dict[str, Any], rel: str) -> list[Problem]:
    problems: list[Problem] = []
    version = header.get("schema_version")
    if not isinstance(version, str) or version not in KNOWN_VERSIONS:
        if isinstance(version, str) and VERSION_RE.match(version):
            problems.append(
                Problem(
                    rel,
                    f"newer ATIF version {version}; read as the latest known",
                    json_path="schema_version",
                    severity="warning",
                    kept="the whole file",
                )
            )
        else:
            problems.append(
                Problem(
                    rel,
                    f"unknown schema_version {version!r}",
                    json_path="schema_version",
                    kept="the whole file, flagged",
                )
            )
    old_version = isinstance(version, str) and version in KNOWN_VERSIONS and int(version.rpartition(".")[2]) < 7
    if old_version and not header.get("session_id"):
        problems.append(Problem(rel, f"session_id is required in {version}", json_path="session_id"))
    agent = header.get("agent")
    if not isinstance(agent, dict) or not agent.get("name"):
        problems.append(Problem(rel, "agent.name is required", json_path="agent"))
    elif "version" not in agent:
        problems.append(Problem(rel, "agent.version is required", json_path="agent.version"))
    unknown = [str(key) for key in header if key not in ROOT_FIELDS]
    unknown += unknown_fields(header.get("agent"), "agent", "agent")
    unknown += unknown_fields(header.get("final_metrics"), "final_metrics", "final_metrics")
    for path in unknown:
        problems.append(Problem(rel, f"unknown field {path!r} (kept)", json_path=path, severity="warning"))
    subagents = as_list(header.get("subagent_trajectories"))
    seen: set[str] = set()
    for i, sub in enumerate(subagents if isinstance(subagents, list) else []):
        tid = sub.get("trajectory_id") if isinstance(sub, dict) else None
        if not tid:
            problems.append(
                Problem(
                    rel,
                    "embedded subagent needs a trajectory_id",
                    json_path=f"subagent_trajectories[{i}].trajectory_id",
                )
            )
        elif tid in seen:
            problems.append(
                Problem(
                    rel,
                    f"duplicate subagent trajectory_id {tid!r}",
                    json_path=f"subagent_trajectories[{i}].trajectory_id",
                )
            )
        seen.add(tid or "")
    return problems


def validate_step(step: dict[str, Any], index: int, rel: str) -> list[Problem]:
    where = f"steps[{index}]"
    problems: list[Problem] = []

    def add(message: str, path: str = "", severity: str = "error") -> None:
        problems.append(
            Problem(rel, message, json_path=f"{where}{path}", severity=severity, kept="the step as written")
        )

    if step.get("step_id") != index + 1:
        add(f"step_id: expected {index + 1} (sequential from 1), got {step.get('step_id')!r}", ".step_id")
    source = step.get("source")
    if source not in ("system", "user", "agent"):
        add(f"source must be system, user or agent, got {source!r}", ".source")
    elif source != "agent":
        for key in AGENT_ONLY:
            if step.get(key) is not None:
                add(f"{key} is allowed only on agent steps (this is a {source} step)", f".{key}")
    if "message" not in step:
        add("message is required", ".message")
    if step.get("timestamp") is not None and parse_iso(step.get("timestamp")) is None:
        add(f"timestamp is not ISO 8601: {step.get('timestamp')!r}", ".timestamp")
    if step.get("llm_call_count") == 0 and source == "agent":
        for key in ("metrics", "reasoning_content"):
            if step.get(key) is not None:
                add(f"{key} must be absent when llm_call_count is 0", f".{key}")
    unknown = [f".{key}" for key in step if key not in STEP_FIELDS] if step.keys() - STEP_FIELDS else []
    metrics = as_dict(step.get("metrics"))
    unknown += unknown_fields(metrics, "metrics", ".metrics")
    counts = [(f".metrics.{key}", metrics.get(key)) for key in METRIC_COUNTS if key in metrics]
    for path, value in [*counts, (".llm_call_count", step.get("llm_call_count"))]:
        if value is not None and nonnegative_count(value) is None:
            add(f"{path[1:]} must be a whole number from 0 to 2^63, got {value!r}: not indexed", path, "warning")
    call_ids = set()
    for i, call in enumerate(as_list(step.get("tool_calls"))):
        if not isinstance(call, dict) or not call.get("tool_call_id") or "function_name" not in call:
            add("tool call needs tool_call_id and function_name", f".tool_calls[{i}]")
            continue
        unknown += unknown_fields(call, "tool_call", f".tool_calls[{i}]")
        for key in ("tool_call_id", "function_name"):
            if not isinstance(call[key], str):
                add(f"{key} must be a string, got {_json_type(call[key])}", f".tool_calls[{i}].{key}")
        if isinstance(call["tool_call_id"], str):
            call_ids.add(call["tool_call_id"])
    observation = step.get("observation")
    unknown += unknown_fields(observation, "observation", ".observation")
    results = observation.get("results") if isinstance(observation, dict) else None
    for i, result in enumerate(as_list(results)):
        if not isinstance(result, dict):
            continue
        unknown += unknown_fields(result, "result", f".observation.results[{i}]")
        unknown += _content_part_fields(result.get("content"), f".observation.results[{i}].content")
        scid = result.get("source_call_id")
        if scid is not None and not isinstance(scid, str):
            add(
                f"source_call_id must be a string, got {_json_type(scid)}: not linked to a tool call",
                f".observation.results[{i}].source_call_id",
            )
        elif scid is not None and scid not in call_ids:
            add(
                f"source_call_id {scid!r} matches no tool call in this step",
                f".observation.results[{i}].source_call_id",
            )
        for j, ref in enumerate(as_list(result.get("subagent_trajectory_ref"))):
            unknown += unknown_fields(ref, "ref", f".observation.results[{i}].subagent_trajectory_ref[{j}]")
            if isinstance(ref, dict) and not (ref.get("trajectory_id") or ref.get("trajectory_path")):
                add(
                    "subagent_trajectory_ref needs trajectory_id or trajectory_path",
                    f".observation.results[{i}].subagent_trajectory_ref[{j}]",
                    severity="warning",
                )
    for key in ("message",):
        problems.extend(_content_part_problems(step.get(key), f"{where}.{key}", rel))
    problems.extend(_lenient_problems(step, where, rel))
    unknown += _content_part_fields(step.get("message"), ".message")
    for path in unknown:
        add(f"unknown field {path.lstrip('.')!r} (kept)", path, severity="warning")
    return problems


def _lenient_problems(step: dict[str, Any], where: str, rel: str) -> list[Problem]:
    """What non-conformant producers of "ATIF-v1.6" write, read anyway: each a warning at its JSON path."""
    found: list[tuple[str, str]] = []
    message = step.get("message")
    if is_openai_message(message):
        found.append((".message", "message is an OpenAI-style object, not a string or content parts: its content read"))
    for i, part in enumerate(message if isinstance(message, list) else []):
        if is_openai_message(part):
            found.append((f".message[{i}]", "an OpenAI-style message among the content parts: its content read"))
    seen: set[str] = set()
    calls = [c for c in as_list(step.get("tool_calls")) if isinstance(c, dict)]
    for i, call in enumerate(calls):
        identity = call_identity(call)
        if identity in seen:
            found.append((f".tool_calls[{i}]", "repeats an earlier tool call of this step: counted once"))
        seen.add(identity)
    observation = step.get("observation")
    results = [r for r in as_list(as_dict(observation).get("results")) if isinstance(r, dict)]
    if calls and results and not any("source_call_id" in r for r in results):
        linked = "linked to the tool calls in order" if len(results) == len(seen) else "not linked to a tool call"
        found.append((".observation.results", f"no result names its source_call_id: {linked}"))
    return [
        Problem(rel, message, json_path=f"{where}{path}", severity="warning", kept="the step, read leniently")
        for path, message in found
    ]


def _json_type(value: Any) -> str:
    """What JSON calls a parsed value: an object, an array, a number…"""
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", type(None): "null"}.get(type(value), "a number")


def _content_part_fields(content: Any, where: str) -> list[str]:
    """Unknown keys of a content part list's parts and their sources (text content has none)."""
    unknown: list[str] = []
    for i, part in enumerate(content if isinstance(content, list) else []):
        if is_openai_message(part):  # (said once, by _lenient_problems)
            continue
        unknown += unknown_fields(part, "content_part", f"{where}[{i}]")
        if isinstance(part, dict):
            unknown += unknown_fields(part.get("source"), "source", f"{where}[{i}].source")
    return unknown


def _content_part_problems(content: Any, where: str, rel: str) -> list[Problem]:
    if not isinstance(content, list):
        return []
    problems = []
    for i, part in enumerate(content):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and ("text" not in part or part.get("source") is not None):
            problems.append(Problem(rel, "a text part has text and no source", json_path=f"{where}[{i}]"))
        if kind in ("image", "audio") and (part.get("source") is None or part.get("text") is not None):
            problems.append(Problem(rel, f"an {kind} part has a source and no text", json_path=f"{where}[{i}]"))
    return problems


METRIC_COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens")
