"""ATIF trajectories (v1.0 to v1.8): lenient parsing, strict validation as a separate record.

Small files are parsed with orjson; files past STREAM_THRESHOLD are streamed step by
step with ijson, so memory stays flat however long the trajectory is. Violations of
Harbor's validators are recorded as problems on the trajectory; the file is kept.

For a file parsed whole, msgspec also finds where each step's JSON lies in it
(`step_spans`): a step is then served from the stored file itself, and the import
writes no copy of the steps (trials.imports.blobs.StepBodies) for it.

The checks of each field against ATIF's schema are in atif_checks.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import msgspec
import orjson

from trials.ingest.atif_steps import nonnegative_count, parse_step
from trials.ingest.formats.atif_checks import (
    validate_header,
    validate_step,
)
from trials.ingest.jsonio import malformed, open_json, without_bom
from trials.ingest.records import (
    PackError,
    ParsedStep,
    ParsedTrajectory,
    Problem,
)
from trials.ingest.values import as_dict, as_list, to_float

STREAM_THRESHOLD = 32 * 1024 * 1024


STARTS_A_VALUE = {"start_map", "start_array", "string", "number", "null", "boolean"}  # ijson events


EMBEDDED_MARK = "#subagent_trajectories"  # path of an embedded subagent: file#subagent_trajectories[i]


def looks_like_atif(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    version = data.get("schema_version")
    return (isinstance(version, str) and version.startswith("ATIF")) or ("steps" in data and "agent" in data)


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
        gap = _BETWEEN_STEPS.match(raw, at)
        assert gap is not None  # ([\s,]* matches anywhere, if only the empty string)
        at = gap.end()
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
    agent = as_dict(header.get("agent"))
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
        steps = as_list(sub.get("steps"))
        path = f"{parent.path}{EMBEDDED_MARK}[{i}]"
        found.append(trajectory_from(header, iter(steps), path, "subagent", parent.step_name))
    return found


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


def final_totals(trajectories: list[ParsedTrajectory]) -> dict[str, Any]:
    """Prompt, completion and cached tokens and cost from the files' `final_metrics`, summed over the
    files given (a main file and its continuations: a subagent's cost is already in its parent's)."""
    totals: dict[str, Any] = {}
    for metrics in (t.final_metrics for t in trajectories if isinstance(t.final_metrics, dict)):
        for key, read in (
            ("total_prompt_tokens", nonnegative_count),
            ("total_completion_tokens", nonnegative_count),
            ("total_cached_tokens", nonnegative_count),
            ("total_cost_usd", to_float),
        ):
            if (value := read(metrics.get(key))) is not None:
                totals[key] = totals.get(key, 0) + value
    return totals


def _ijson_error(rel: str, exc: Exception, json_path: str = "", line: int | None = None) -> PackError:
    return PackError(Problem(rel, f"malformed JSON: {exc}", json_path=json_path, line=line, kept="the raw bytes"))


class _LineByLine:
    """A file handed to ijson one line (at most 64 kB) at a time, so that an error knows its line.

    yajl stops in the chunk it was given, and reports no position of its own.
    """

    def __init__(self, f: BinaryIO) -> None:
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
