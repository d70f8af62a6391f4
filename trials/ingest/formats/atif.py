"""ATIF trajectories (v1.0 to v1.8): lenient parsing, strict validation as a separate record.

Small files are parsed with orjson; files past STREAM_THRESHOLD are streamed step by
step with ijson, so memory stays flat however long the trajectory is. Violations of
Harbor's validators are recorded as problems on the trajectory; the file is kept.

For a file parsed whole, msgspec also finds where each step's JSON lies in it
(`step_spans`): a step is then served from the stored file itself, and the import
writes no copy of the steps (trials.storage.blobs.StepBodies) for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson
import msgspec
import orjson

from trials.ingest.jsonio import malformed, open_json, without_bom
from trials.ingest.records import (
    PackError,
    ParsedObservation,
    ParsedStep,
    ParsedToolCall,
    ParsedTrajectory,
    Problem,
)
from trials.ingest.values import as_dict, as_list, parse_iso

STREAM_THRESHOLD = 32 * 1024 * 1024
STARTS_A_VALUE = {"start_map", "start_array", "string", "number", "null", "boolean"}  # ijson events
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
    "final_metrics": {"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd",
                      "total_steps", "extra"},
    "metrics": {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids",
                "completion_token_ids", "logprobs", "extra"},
    "tool_call": {"tool_call_id", "function_name", "arguments", "extra"},
    "observation": {"results"},
    "result": {"source_call_id", "content", "subagent_trajectory_ref", "extra"},
    "ref": {"session_id", "trajectory_id", "trajectory_path", "extra"},
    "content_part": {"type", "text", "source"},
    "source": {"media_type", "path", "duration_sec"},  # an image's or an audio clip's
}  # fmt: skip


def unknown_fields(obj: Any, kind: str, where: str) -> list[str]:
    """JSON paths of the keys `obj` (an ATIF object of that kind) may not hold."""
    if not isinstance(obj, dict) or not (unknown := obj.keys() - NESTED_FIELDS[kind]):
        return []
    return [f"{where}.{key}" for key in sorted(unknown, key=str)]


EMBEDDED_MARK = "#subagent_trajectories"  # path of an embedded subagent: file#subagent_trajectories[i]


def looks_like_atif(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    version = data.get("schema_version")
    return (isinstance(version, str) and version.startswith("ATIF")) or ("steps" in data and "agent" in data)


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
                else:
                    source = as_dict(part.get("source"))
                    parts.append(f"[{part.get('type')}: {source.get('path', '')}]")
        return "\n".join(parts)
    return json.dumps(content, default=str)  # not orjson: agents print integers past 64 bits


def read_trajectory(path: Path, rel: str, role: str = "main", step_name: str = "") -> ParsedTrajectory:
    """Read one trajectory file. Raises PackError when it is not JSON or not a trajectory."""
    streamed = path.stat().st_size > STREAM_THRESHOLD
    if streamed:
        header = _stream_header(path, rel)
        steps_source: Iterator[Any] = _stream_steps(path, rel)
        spans = None  # (finding them would read the whole file into memory)
    else:
        file_bytes = path.read_bytes()
        raw = without_bom(file_bytes)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise PackError(malformed(rel, exc)) from exc
        if not isinstance(data, dict):
            raise PackError(Problem(rel, "a trajectory must be a JSON object", kept="the raw bytes"))
        header = {k: v for k, v in data.items() if k != "steps"}
        steps = data.get("steps")
        if not isinstance(steps, list):
            raise PackError(Problem(rel, "no steps list", json_path="steps", kept="the raw bytes"))
        steps_source = iter(steps)
        spans = step_spans(raw, len(steps), shift=len(file_bytes) - len(raw))
    parsed = trajectory_from(header, steps_source, rel, role, step_name, spans)
    parsed.streamed = streamed
    return parsed


class _StepsOnly(msgspec.Struct):
    steps: list[msgspec.Raw] = []


_STEPS_AS_WRITTEN = msgspec.json.Decoder(_StepsOnly)  # the rest of the file is scanned, not built
_BETWEEN_STEPS = re.compile(rb"[\s,]*")
_STEPS_KEY = re.compile(rb'"steps"\s*:\s*\[\s*')


def step_spans(raw: bytes, count: int, shift: int = 0) -> list[tuple[int, int]] | None:
    """(offset, size) of each step's JSON in the file, or None when they cannot be told for sure.

    msgspec reads the root's `steps` as the same last one orjson keeps (a key written twice),
    each step as a view of its bytes; a step's place is found right after the one before
    and checked byte for byte. `shift`: bytes before `raw` in the file (a byte order mark).
    """
    try:
        steps = _STEPS_AS_WRITTEN.decode(raw).steps
    except msgspec.MsgspecError:
        return None
    if len(steps) != count:
        return None
    spans = []
    at = _start_of_first(raw, steps[0]) if steps else 0
    if at == -1:
        return None
    for step in steps:
        at = _BETWEEN_STEPS.match(raw, at).end()
        if not raw.startswith(step, at):  # (a memcmp; comparing memoryviews goes byte by byte)
            return None
        size = len(memoryview(step))
        spans.append((at + shift, size))
        at += size
    return spans


def _start_of_first(raw: bytes, body: msgspec.Raw) -> int:
    """Where the first step's bytes are, right after a `"steps": [`; -1 if nowhere.

    (An equal copy under another `steps` key serves as well: the same bytes.)
    """
    at = raw.find(b'"steps"')
    while at != -1:
        key = _STEPS_KEY.match(raw, at)
        if key and raw.startswith(body, key.end()):
            return key.end()
        at = raw.find(b'"steps"', at + 1)
    return -1


def trajectory_from(
    header: dict[str, Any],
    steps: Iterator[Any],
    rel: str,
    role: str,
    step_name: str = "",
    spans: list[tuple[int, int]] | None = None,
) -> ParsedTrajectory:
    problems = validate_header(header, rel)
    agent = header.get("agent") if isinstance(header.get("agent"), dict) else {}
    final_metrics = header.get("final_metrics")
    subagent_refs: list[tuple[str, dict[str, Any]]] = []
    return ParsedTrajectory(
        path=rel,
        role=role,
        schema_version=str(header.get("schema_version") or ""),
        session_id=str(header.get("session_id") or ""),
        trajectory_id=str(header.get("trajectory_id") or ""),
        agent=agent,
        final_metrics=final_metrics if isinstance(final_metrics, dict) else None,
        header=header,
        steps=_parse_steps(steps, rel, problems, spans, subagent_refs),
        problems=problems,
        step_name=step_name,
        steps_in_file=spans is not None,
        subagent_refs=subagent_refs,
    )


def embedded_subagents(parent: ParsedTrajectory) -> list[ParsedTrajectory]:
    """v1.7 `subagent_trajectories[]`: whole trajectories inside their parent's file, each read on its own.

    Their path is the parent's with `#subagent_trajectories[i]`, so a problem says where it is.
    """
    found = []
    for i, sub in enumerate(as_list(parent.header.get("subagent_trajectories"))):
        if not isinstance(sub, dict):
            continue  # validate_header has flagged it
        header = {k: v for k, v in sub.items() if k != "steps"}
        steps = sub.get("steps") if isinstance(sub.get("steps"), list) else []
        path = f"{parent.path}{EMBEDDED_MARK}[{i}]"
        found.append(trajectory_from(header, iter(steps), path, "subagent", parent.step_name))
    return found


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


def _parse_steps(
    steps: Iterator[Any],
    rel: str,
    problems: list[Problem],
    spans: list[tuple[int, int]] | None,
    subagent_refs: list[tuple[str, dict[str, Any]]],
) -> Iterator[ParsedStep]:
    count = 0
    for index, raw in enumerate(steps):
        count += 1
        if not isinstance(raw, dict):
            kept = "the value, as an invalid step"
            problems.append(Problem(rel, "a step must be an object", json_path=f"steps[{index}]", kept=kept))
        else:
            problems.extend(validate_step(raw, index, rel))
        step = parse_step(raw, index)
        if spans is not None:
            step.span = spans[index]
        if any(obs.subagent_refs for obs in step.observations):
            subagent_refs += _subagent_refs(step.raw, index)
        yield step
    if count == 0:
        problems.append(Problem(rel, "steps must not be empty", json_path="steps"))


def _subagent_refs(step: dict[str, Any], index: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(JSON path, ref) of each subagent_trajectory_ref in the step's observation."""
    for i, result in enumerate(as_list(step["observation"].get("results"))):
        if isinstance(result, dict):
            where = f"steps[{index}].observation.results[{i}].subagent_trajectory_ref"
            refs = as_list(result.get("subagent_trajectory_ref"))
            yield from ((f"{where}[{j}]", ref) for j, ref in enumerate(refs) if isinstance(ref, dict))


def names_trajectory(ref: dict[str, Any], path: str, trajectory_id: str, session_id: str, role: str) -> bool:
    """Does a subagent_trajectory_ref name this trajectory (by its file, its trajectory_id, or a
    subagent's session_id)? `path`: the trajectory's pack-relative path."""
    wanted = str(ref.get("trajectory_path") or "")
    return bool(
        (wanted and (path == wanted or path.endswith("/" + wanted.lstrip("./"))))
        or (ref.get("trajectory_id") and trajectory_id == ref.get("trajectory_id"))
        or (ref.get("session_id") and session_id == ref.get("session_id") and role != "main")
    )


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
        if value is not None and _nonnegative_count(value) is None:
            add(f"{path[1:]} must be a whole number from 0 to 2^63, got {value!r}: not indexed", path, "warning")
    call_ids = set()
    for i, call in enumerate(as_list(step.get("tool_calls"))):
        if not isinstance(call, dict) or not call.get("tool_call_id") or "function_name" not in call:
            add("tool call needs tool_call_id and function_name", f".tool_calls[{i}]")
            continue
        unknown += unknown_fields(call, "tool_call", f".tool_calls[{i}]")
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
        if scid is not None and scid not in call_ids:
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
    unknown += _content_part_fields(step.get("message"), ".message")
    for path in unknown:
        add(f"unknown field {path.lstrip('.')!r} (kept)", path, severity="warning")
    return problems


def _content_part_fields(content: Any, where: str) -> list[str]:
    """Unknown keys of a content part list's parts and their sources (text content has none)."""
    unknown: list[str] = []
    for i, part in enumerate(content if isinstance(content, list) else []):
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


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _nonnegative_count(value: Any) -> int | None:
    """A count as the columns hold it: a whole number from 0 to 2^63 (validate_step flags others)."""
    value = _int(value)
    return value if value is not None and 0 <= value < 2**63 else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def final_totals(trajectories: list[ParsedTrajectory]) -> dict[str, Any]:
    """Prompt, completion and cached tokens and cost from the files' `final_metrics`, summed over the
    files given (a main file and its continuations: a subagent's cost is already in its parent's)."""
    totals: dict[str, Any] = {}
    for metrics in (t.final_metrics for t in trajectories if isinstance(t.final_metrics, dict)):
        for key, read in (
            ("total_prompt_tokens", _nonnegative_count),
            ("total_completion_tokens", _nonnegative_count),
            ("total_cached_tokens", _nonnegative_count),
            ("total_cost_usd", _float),
        ):
            if (value := read(metrics.get(key))) is not None:
                totals[key] = totals.get(key, 0) + value
    return totals


def parse_step(raw: Any, index: int) -> ParsedStep:
    if not isinstance(raw, dict):  # the file keeps the real value; the row says what was wrong
        shown = json.dumps(raw, default=str)[:200]
        raw = {"step_id": None, "source": "invalid", "message": f"(not a step object: {shown})",
               "extra": {"invalid": raw}}  # fmt: skip
    tool_calls = [
        ParsedToolCall(
            tool_call_id=str(call.get("tool_call_id") or ""),
            function_name=str(call.get("function_name") or ""),
            arguments=call.get("arguments"),
        )
        for call in as_list(raw.get("tool_calls"))
        if isinstance(call, dict)
    ]
    observations = []
    observation = raw.get("observation")
    for result in as_list(observation.get("results")) if isinstance(observation, dict) else []:
        if not isinstance(result, dict):
            continue
        text = content_text(result.get("content"))
        observations.append(
            ParsedObservation(
                source_call_id=result.get("source_call_id"),
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
        prompt_tokens=_nonnegative_count(metrics.get("prompt_tokens")),
        completion_tokens=_nonnegative_count(metrics.get("completion_tokens")),
        cached_tokens=_nonnegative_count(metrics.get("cached_tokens")),
        cost_usd=_float(metrics.get("cost_usd")),
        is_copied_context=raw.get("is_copied_context") is True,
        llm_call_count=_nonnegative_count(raw.get("llm_call_count")),
        context_management=str(context_management.get("type") or "") if isinstance(context_management, dict) else "",
        tool_calls=tool_calls,
        observations=observations,
        raw=raw,
    )


# Streaming (files past STREAM_THRESHOLD) -------------------------------------------------


def _ijson_error(rel: str, exc: Exception, json_path: str = "", line: int | None = None) -> PackError:
    return PackError(Problem(rel, f"malformed JSON: {exc}", json_path=json_path, line=line, kept="the raw bytes"))


class _LineByLine:
    """A file handed to ijson one line (at most 64 kB) at a time, so that an error knows its line.

    yajl stops in the chunk it was given, and reports no position of its own.
    """

    def __init__(self, f):
        self.f = f
        self.line = 0  # of the last chunk handed out
        self.newlines = 0

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson's probe for bytes or text
            return b""
        chunk = self.f.readline(65536)
        self.line = self.newlines + 1
        self.newlines += chunk.count(b"\n")
        return chunk


def _error_line(path: Path) -> int | None:
    """The line a streamed file stops being JSON on: a second, slower pass, taken only once it has failed."""
    with open_json(path) as f:
        reader = _LineByLine(f)
        try:
            for _ in ijson.basic_parse(reader, use_float=True):
                pass
        except ijson.JSONError:
            return reader.line
    return None


def _json_path(prefix: str, steps_seen: int) -> str:
    """Where ijson was, as a JSON path: the step's index is counted, deeper list indexes are not."""
    if prefix == "steps.item" or prefix.startswith("steps.item."):
        return f"steps[{steps_seen - 1}]" + prefix.removeprefix("steps.item").replace(".item", "[]")
    return prefix.replace(".item", "[]")


def _stream_header(path: Path, rel: str) -> dict[str, Any]:
    """Every root key except `steps`, without building the steps in memory."""
    header: dict[str, Any] = {}
    builder: ijson.ObjectBuilder | None = None
    key = prefix = ""
    steps_seen = 0
    try:
        with open_json(path) as f:
            for prefix, event, value in ijson.parse(f, use_float=True):
                if prefix == "steps.item" and event in STARTS_A_VALUE:
                    steps_seen += 1
                if prefix == "" and event == "map_key":
                    if builder is not None:
                        header[key] = builder.value
                    key, builder = value, None
                    continue
                if prefix == "" and event in ("start_map", "end_map"):
                    if event == "end_map" and builder is not None:
                        header[key] = builder.value
                    continue
                if key == "steps":
                    continue
                if builder is None:
                    builder = ijson.ObjectBuilder()
                builder.event(event, value)
    except ijson.JSONError as exc:
        raise _ijson_error(rel, exc, _json_path(prefix, steps_seen), _error_line(path)) from exc
    return header


def _stream_steps(path: Path, rel: str) -> Iterator[Any]:
    with open_json(path) as f:
        try:
            yield from ijson.items(f, "steps.item", use_float=True)
        except ijson.JSONError as exc:
            raise _ijson_error(rel, exc, line=_error_line(path)) from exc
