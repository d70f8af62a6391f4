"""Every rule that keeps a redacted Agent Context item out of what Benchviewer stores or serves.

A redaction (a record, or an item marked redacted in place) names an item; its raw values
are blanked wherever the item appears: in context records, runtime events, permissions, JSON
inside any text, the trial's documents and logs, and the agent's own trajectory. One stage does
it to what a parser found, before anything is stored (`withhold_redacted`); a later redaction
scrubs the stored rows again (trials.imports.rescrub); a stored file is scrubbed on its way out
(`scrub_file`). The stored packs keep their bytes. Which items are redacted is read by
trials.ingest.context_kinds. Pure: no Django.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from trials.ingest.atif_steps import parse_step
from trials.ingest.context_kinds import (
    collect_redactions,
    has_redaction_marks,
    is_redacted_state,
    item_identity,
)
from trials.ingest.jsonio import json_bytes
from trials.ingest.records import (
    ParsedEvent,
    ParsedPack,
    ParsedStep,
    ParsedTrajectory,
    ParsedTrial,
    read_all,
)

REDACTED = "[redacted]"


# Keys that can hold the raw value of an item; all are blanked when the item is redacted.
_RAW_VALUE_KEYS = ("content", "text", "snippet", "excerpt", "preview", "raw", "value", "summary")


_PATH_PARTS = re.compile(r"[^.\[\]/]+")


def _blank_path(obj: dict[str, Any], path: str) -> None:
    """Replace the value at a path with the placeholder: dotted (`a.b`, `$.a.b`), with list
    indices (`a[0].b`, `a.0.b`), or a JSON pointer (`/a/0/b`). A path that leads nowhere
    here blanks its first key, if the item has it: a value is never left for a path
    this reader could not follow."""
    parts = _PATH_PARTS.findall(path.removeprefix("$"))
    node: Any = obj
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, dict) and part in node:
            if last:
                node[part] = REDACTED
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            if last:
                node[int(part)] = REDACTED
            node = node[int(part)]
        else:
            if parts and parts[0] in obj:
                obj[parts[0]] = REDACTED
            return


def _copy_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_tree(v) for v in value]
    return value


def scrub_redacted(
    item: dict[str, Any], redacted_fields: list[Any] | None = None, force: bool = False
) -> dict[str, Any]:
    """A copy of `item` with no raw value left when it is redacted.

    Redacted = redaction_state other than none/empty, or `force` (a redaction record names
    it). Raw-value keys and every field named in redacted_fields become "[redacted]".
    """
    fields = list(item.get("redacted_fields") or []) + list(redacted_fields or [])
    redacted = force or is_redacted_state(item.get("redaction_state"))
    if not redacted and not fields:
        return item
    out = _copy_tree(item)
    if redacted:
        _blank_raw_values(out)
    for field_path in fields:
        if isinstance(field_path, str):
            _blank_path(out, field_path)
    return out


def _blank_raw_values(value: Any) -> None:
    """Every raw-value key at any depth (content_parts[].text, a nested data.value...)."""
    if isinstance(value, list):
        for v in value:
            _blank_raw_values(v)
    elif isinstance(value, dict):
        for key, v in value.items():
            if key in _RAW_VALUE_KEYS:
                value[key] = REDACTED
            else:
                _blank_raw_values(v)


def scrub_tree(value: Any, named: dict[str, dict[str, Any]]) -> Any:
    """Copy of any JSON value with every redacted item inside it scrubbed (inside JSON text too)."""
    if isinstance(value, list):
        return [scrub_tree(v, named) for v in value]
    if isinstance(value, str) and named:
        return scrub_text(value, named)
    if not isinstance(value, dict):
        return value
    out = {k: scrub_tree(v, named) for k, v in value.items()}
    identity = item_identity(out)
    if identity in named:
        return scrub_redacted(out, named[identity].get("fields"), force=True)
    return scrub_redacted(out)


_OBJECT_START = re.compile(r'\{\s*"')


MAX_OBJECT_TRIES = 1000  # objects tried in one text: a text of braces cannot make this quadratic


def scrub_text(text: str, named: dict[str, dict[str, Any]]) -> str:
    """Text that names a redacted item (a tool's arguments as a string, a result printed as JSON, a log
    line, JSON lines): each JSON object in it that holds the item is scrubbed and written again.

    An id escaped inside the text is not looked for, nor a value with no object around it.
    """
    if not any(item in text for item in named):
        return text
    decoder = json.JSONDecoder()
    pieces, done = [], 0
    for tries, start in enumerate(_OBJECT_START.finditer(text)):
        at = start.start()
        if at < done:  # inside an object already taken
            continue
        if tries >= MAX_OBJECT_TRIES:
            break
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:  # no whole object starts here
            continue
        scrubbed = scrub_tree(value, named)
        if scrubbed != value:
            pieces += [text[done:at], json.dumps(scrubbed, ensure_ascii=False)]
            done = end
    return "".join([*pieces, text[done:]]) if pieces else text


def scrub_file(data: bytes, named: dict[str, dict[str, Any]]) -> bytes:
    """A stored file's bytes on the way out (an export, an artifact's preview), every redacted item in it
    scrubbed: a JSON file read and written again, any other text through `scrub_text` (JSON lines, JSON
    in a log). Bytes that are not UTF-8 are kept as they are around what is scrubbed (surrogateescape),
    so a stray byte hides nothing; a file that nothing changes comes back as it is."""
    if not named:
        return data
    text = data.decode("utf-8", "surrogateescape")
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
        clean = scrub_text(text, named)
        return data if clean == text else clean.encode("utf-8", "surrogateescape")
    clean_value = scrub_tree(value, named)
    return data if clean_value == value else json_bytes(clean_value)


def withhold_redacted(found: ParsedTrial | ParsedPack) -> None:
    """The import's redaction stage: every value a redaction withholds, out of every field of what a
    parser found (a trial, or a pack's events and context records joined to no trial), before any of it
    is stored. Parsers only say which items are redacted (`redactions`); the redactions its own events,
    context records and documents declare are added here.

    An agent's tool call or result may carry the item itself (`{"item_id": …, "content": …}`), or an
    item marked redacted in place. Each step is scrubbed (`scrub_tree`) and read again; a trajectory
    where that changed anything is marked `withheld`: its steps are kept as scrubbed copies, never
    served from the file, and its ATIF download is made of them. (A value the agent printed as plain
    text, with no item around it, cannot be told apart and stays.)
    """
    own = [found.documents] if isinstance(found, ParsedTrial) else []
    own += [e.raw for e in found.events] if isinstance(found.events, list) else []  # (a lazy one: its parser's)
    own += [r.data for r in found.context_records]
    marked = has_redaction_marks(own)
    named = collect_redactions(own, _copy_tree(found.redactions)) if marked else found.redactions
    found.redactions = named
    found.events = _each_scrubbed(found.events, named, _scrub_event)
    found.context_records = list(_each_scrubbed(found.context_records, named, _scrub_fields))
    if isinstance(found, ParsedPack):
        return
    found.permissions = _each_scrubbed(found.permissions, named, _scrub_fields)
    if named or marked or found.carries_context:
        _scrub_fields(found, named, kept=_TRIAL_KEPT)
        for trajectory in found.trajectories:
            _withhold_in_trajectory(trajectory, named)


# A trial's fields kept as found: its identity and the import's bookkeeping (and what is scrubbed on its own).
_TRIAL_KEPT = frozenset(
    {"key", "name", "job_key", "source_format", "files", "files_sha256", "present", "problems", "redactions"}
    | {"carries_context", "trajectories", "events", "permissions", "context_records"}
)


def _scrub_fields(obj: Any, named: dict[str, dict[str, Any]], kept: frozenset[str] = frozenset()) -> Any:
    """`obj` (a parsed record) with every text and JSON field scrubbed, and those of the records it holds."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in kept or value is None:
            continue
        if dataclasses.is_dataclass(value):
            _scrub_fields(value, named)
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            for record in value:
                _scrub_fields(record, named)
        elif isinstance(value, str | dict | list):
            setattr(obj, f.name, scrub_tree(value, named))
    return obj


def _scrub_event(event: ParsedEvent, named: dict[str, dict[str, Any]]) -> ParsedEvent:
    """A runtime event scrubbed; a payload or refs that are its raw event's own are taken from the scrubbed
    raw (an item marked redacted around them blanks them too)."""
    raw = event.raw
    own = {name: getattr(event, name) for name in ("payload", "refs") if raw.get(name) is getattr(event, name)}
    _scrub_fields(event, named)
    for name in own:
        if isinstance(event.raw.get(name), dict):
            setattr(event, name, event.raw[name])
    return event


def _each_scrubbed(records: Iterable[Any], named: dict[str, dict[str, Any]], scrub: Any) -> Any:
    """Each record scrubbed where a redaction may reach it; a lazy sequence stays lazy (a big Inspect sample's)."""
    scrubbed = (scrub(r, named) if named or has_redaction_marks(vars(r)) else r for r in records)
    return list(scrubbed) if isinstance(records, list) else scrubbed


def _withhold_in_trajectory(trajectory: ParsedTrajectory, redactions: dict[str, dict[str, Any]]) -> None:
    trajectory.agent = scrub_tree(trajectory.agent, redactions)  # (its header's: a change there marks it)
    trajectory.final_metrics = scrub_tree(trajectory.final_metrics, redactions)
    header = scrub_tree(trajectory.header, redactions)
    if header != trajectory.header:
        trajectory.header, trajectory.withheld = header, True
    steps = trajectory.steps if trajectory.streamed else read_all(trajectory.steps)  # (held whole anyway)
    if not isinstance(steps, list):  # streamed, or reading failed: scrubbed as they are read, as copies
        trajectory.steps = _scrubbed_steps(steps, trajectory, redactions)
        trajectory.steps_in_file = False
        return
    trajectory.steps = list(_scrubbed_steps(steps, trajectory, redactions))
    if trajectory.withheld:  # (the others are still served from their places in the file)
        trajectory.steps_in_file = False


def _scrubbed_steps(
    steps: Iterable[ParsedStep], trajectory: ParsedTrajectory, redactions: dict[str, dict[str, Any]]
) -> Iterator[ParsedStep]:
    for step in steps:
        scrubbed = scrub_step(step, redactions)
        if scrubbed is not step:
            trajectory.withheld = True
        yield scrubbed


def scrub_step(step: ParsedStep, redactions: dict[str, dict[str, Any]]) -> ParsedStep:
    """The step read again with every redacted item in it scrubbed; the step itself when none is."""
    raw = scrub_tree(step.raw, redactions)
    return step if raw == step.raw else parse_step(raw, step.index)
