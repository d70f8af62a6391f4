"""Which Agent Context record a JSON object is (an event, an item, a selection, a redaction...), and
which items the redactions among any values name (`collect_redactions`): what a parser finds. The
values are withheld elsewhere, by one stage (trials.ingest.redaction)."""

from __future__ import annotations

from typing import Any

import orjson

from trials.ingest.documents import is_json_schema
from trials.ingest.values import pick, to_str

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


def is_context_record(obj: Any) -> bool:
    """A record, or a bundle (list, or dict of lists/records) holding at least one."""
    if is_json_schema(obj):  # its `properties` name record fields but hold no record
        return False
    if record_kind(obj) not in ("", "event"):
        return True
    if isinstance(obj, list):
        return any(record_kind(item) for item in obj)
    if isinstance(obj, dict) and not ("type" in obj and "eventId" in obj):
        for value in obj.values():
            values = value if isinstance(value, list) else [value]
            if any(record_kind(item) for item in values):
                return True
    return False


_NOT_REDACTED = ("", "none")


def is_redacted_state(state: Any) -> bool:
    return to_str(state).strip().lower() not in _NOT_REDACTED


# Keys that name an item, in a record or in a ref to it (`_norm_refs` reads refs by the same).
ITEM_ID_KEYS = ("item_id", "item_ref", "source_item_ref", "itemId", "id", "ref")


def item_identity(obj: dict[str, Any]) -> str:
    value = pick(obj, *ITEM_ID_KEYS)
    return value if isinstance(value, str) else ""


def redaction_targets(obj: dict[str, Any]) -> list[str]:
    targets = []
    for key in ("item_id", "target_ref", "target_item_id", "item_ref", "target"):
        if isinstance(obj.get(key), str):
            targets.append(obj[key])
    for key in ("item_refs", "target_refs", "target_item_refs"):
        for ref in obj.get(key) or []:
            ref_id = item_identity(ref) if isinstance(ref, dict) else ref
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
