"""Which Agent Context record a JSON object is (an event, an item, a selection, a redaction...)."""

from __future__ import annotations

from typing import Any

from trials.ingest.documents import is_json_schema
from trials.ingest.values import to_str

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
