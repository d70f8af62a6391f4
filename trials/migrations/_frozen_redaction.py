"""The redaction rules as migrations 0018 and 0020 ran them (a frozen copy of
trials.ingest.agentcontext on 2026-11-26): a data migration must not change when the app does."""

import json
import re
from typing import Any

import orjson


def pick(data: dict[str, Any], *keys: str, default: Any = None) -> Any:
    """First present, non-None value among `keys` (camelCase and snake_case spellings)."""
    for key in keys:
        value = data.get(key)
        if value is not None:
            return value
    return default


def to_str(value: Any) -> str:
    return "" if value is None else str(value)


REDACTED = "[redacted]"


_NOT_REDACTED = ("", "none")


# Keys that can hold the raw value of an item; all are blanked when the item is redacted.
_RAW_VALUE_KEYS = ("content", "text", "snippet", "excerpt", "preview", "raw", "value", "summary")


CONTEXT_EVENT_TYPES = frozenset(
    {
        "context.surface.created",
        "context.surface.updated",
        "context.item.added",
        "context.item.updated",
        "context.item.removed",
        "context.selection.started",
        "context.selection.completed",
        "context.budget.applied",
        "context.assembly.created",
        "context.injection.applied",
        "context.compaction.started",
        "context.compaction.completed",
        "context.summary.created",
        "context.missing.detected",
        "context.missing.requested",
        "context.missing.resolved",
        "context.redaction.applied",
        "context.exported",
        # Lime runtime profile spellings of the same family
        "context.resolved",
        "context.compaction.failed",
    }
)


def record_kind(obj: Any) -> str:
    """Which Agent Context record `obj` is, or "" when it is none."""
    if not isinstance(obj, dict):
        return ""
    if is_context_event(obj):
        return "event"
    if "item_id" in obj and "context_kind" in obj:
        return "item"
    for id_key, kind in (
        ("selection_id", "selection"),
        ("compaction_id", "compaction"),
        ("missing_id", "missing"),
        ("injection_id", "injection"),
        ("assembly_id", "assembly"),
        ("budget_id", "budget"),
        ("redaction_id", "redaction"),
    ):
        if id_key in obj:
            return kind
    if all(key in obj for key in ("context_id", "scope", "lifecycle")):
        return "envelope"
    if "max_tokens" in obj and any(k in obj for k in ("overflow_strategy", "actual_tokens", "truncation_records")):
        return "budget"
    if "redaction_method" in obj or "redacted_fields" in obj:
        return "redaction"
    return ""


def is_context_event(obj: Any) -> bool:
    return isinstance(obj, dict) and "event_id" in obj and to_str(obj.get("event_type")).startswith("context.")


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


def _redaction_targets(obj: dict[str, Any]) -> list[str]:
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
        for target in _redaction_targets(value):
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
