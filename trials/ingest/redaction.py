"""Every rule that keeps a redacted Agent Context item out of what Benchviewer stores.

A redaction (a record, or an item marked redacted in place) names an item; its raw values
are blanked wherever the item appears: in context records, runtime events, JSON inside any
text, the trial's documents and logs, and the agent's own trajectory (`withhold_redacted`).
The stored packs keep their bytes. Pure: no Django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from trials.ingest.atif_steps import parse_step
from trials.ingest.context_kinds import record_kind
from trials.ingest.jsonio import json_bytes
from trials.ingest.records import (
    ParsedStep,
    ParsedTrajectory,
    ParsedTrial,
    read_all,
)
from trials.ingest.values import pick, to_str

REDACTED = "[redacted]"


_NOT_REDACTED = ("", "none")


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


def is_redacted_state(state: Any) -> bool:
    return to_str(state).strip().lower() not in _NOT_REDACTED


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


# Keys that name an item, in a record or in a ref to it (`_norm_refs` reads refs by the same).
_ITEM_ID_KEYS = ("item_id", "item_ref", "source_item_ref", "itemId", "id", "ref")


def _item_identity(obj: dict[str, Any]) -> str:
    value = pick(obj, *_ITEM_ID_KEYS)
    return value if isinstance(value, str) else ""


def scrub_tree(value: Any, named: dict[str, dict[str, Any]]) -> Any:
    """Copy of any JSON value with every redacted item inside it scrubbed (inside JSON text too)."""
    if isinstance(value, list):
        return [scrub_tree(v, named) for v in value]
    if isinstance(value, str) and named:
        return scrub_text(value, named)
    if not isinstance(value, dict):
        return value
    out = {k: scrub_tree(v, named) for k, v in value.items()}
    identity = _item_identity(out)
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


def redaction_targets(obj: dict[str, Any]) -> list[str]:
    targets = []
    for key in ("item_id", "target_ref", "target_item_id", "item_ref", "target"):
        if isinstance(obj.get(key), str):
            targets.append(obj[key])
    for key in ("item_refs", "target_refs", "target_item_refs"):
        for ref in obj.get(key) or []:
            ref_id = _item_identity(ref) if isinstance(ref, dict) else ref
            if isinstance(ref_id, str) and ref_id:
                targets.append(ref_id)
    return targets


def has_redaction_marks(values: Any) -> bool:
    """Whether a key starts "redact" anywhere in `values`: every mark of a redaction is one
    (redaction_state, redacted_fields, redaction_id, redaction_method), so values with
    none have nothing to scrub."""
    try:
        return b'"redact' in orjson.dumps(values)
    except orjson.JSONEncodeError:  # an integer past 64 bits (read exactly): look the slow way
        return True


def redactions_in(values: list[Any]) -> dict[str, dict[str, Any]]:
    """`collect_redactions`, at once when there is no mark of one."""
    return collect_redactions(values) if has_redaction_marks(values) else {}


def collect_redactions(value: Any, named: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """item id -> {fields, reason, policy_refs, redaction_state, ...} from the whole input."""
    named = {} if named is None else named
    if isinstance(value, list):
        for v in value:
            collect_redactions(v, named)
        return named
    if not isinstance(value, dict):
        return named
    kind = record_kind(value)
    if kind == "redaction":
        for target in redaction_targets(value):
            entry = named.setdefault(target, {"fields": []})
            entry["fields"] += list(value.get("redacted_fields") or [])
            for key in ("reason", "policy_refs", "redaction_method", "redaction_state", "redaction_id"):
                if value.get(key) is not None:
                    entry.setdefault(key, value[key])
    elif isinstance(value.get("item_id"), str) and is_redacted_state(value.get("redaction_state")):
        # An item (with or without its context_kind, as a runtime event may carry it). Its own
        # redacted_fields too: a copy of it elsewhere (another file) has them blanked as well.
        entry = named.setdefault(value["item_id"], {"fields": []})
        own = value.get("redacted_fields")
        entry["fields"] += [f for f in own if f not in entry["fields"]] if isinstance(own, list) else []
    for v in value.values():
        collect_redactions(v, named)
    return named


def withhold_redacted(trial: ParsedTrial, redactions: dict[str, dict[str, Any]]) -> None:
    """A redacted context item's values, out of the trial's trajectories too.

    An agent's tool call or result may carry the item itself (`{"item_id": …, "content": …}`),
    or an item marked redacted in place. Each step is scrubbed (`scrub_tree`);
    a trajectory where that changed anything is marked `withheld`: its steps are kept as
    scrubbed copies, never served from the file, and its ATIF download is made of them.
    (A value the agent printed as plain text, with no item around it, cannot be told apart
    and stays.)
    """
    trial.documents = scrub_tree(trial.documents, redactions)  # (the Config and Verifier tabs)
    trial.texts = scrub_tree(trial.texts, redactions)  # (the Logs tab: JSON printed in a log)
    trial.exception_message = scrub_tree(trial.exception_message, redactions)
    trial.exception_traceback = scrub_tree(trial.exception_traceback, redactions)
    for criterion in trial.criteria:
        criterion.raw = scrub_tree(criterion.raw, redactions)
        criterion.evidence_refs = scrub_tree(criterion.evidence_refs, redactions)
    for artifact in trial.artifacts:
        artifact.raw = scrub_tree(artifact.raw, redactions)
    for trajectory in trial.trajectories:
        header = scrub_tree(trajectory.header, redactions)
        if header != trajectory.header:
            trajectory.header, trajectory.withheld = header, True
        steps = trajectory.steps if trajectory.streamed else read_all(trajectory.steps)  # (held whole anyway)
        if not isinstance(steps, list):  # streamed, or reading failed: scrubbed as they are read, as copies
            trajectory.steps = _scrubbed_steps(steps, trajectory, redactions)
            trajectory.steps_in_file = False
            continue
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


def without_redacted_context(objs: list[Any], named: dict[str, dict[str, Any]] | None = None) -> list[Any]:
    """The events with every redacted context item in them scrubbed (`context.*` events carry items):
    redacted by its own redaction_state, or named by a redaction anywhere in the same file
    (or in `named`: a trial's other files). Events with nothing to scrub are not copied."""

    named = redactions_in(objs) if named is None else named
    if not named and not has_redaction_marks(objs):
        return objs
    return [scrub_tree(obj, named) for obj in objs]
