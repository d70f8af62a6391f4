"""Agent Context records (seed 002, ACTX-AR-* cases): what context was available,
selected, omitted, budgeted, assembled, injected, compacted, redacted or missing.

Agent Context is snake_case. Ids are kept exactly and exposed with the camelCase keys of
Lime runtime events so both join. Two rules are enforced here, not later:
- a redacted item is marked so (status, redaction_state, the redaction's facts); its raw values
  are withheld from `data` by the import's redaction stage (trials.ingest.redaction.withhold_redacted);
- a context record never decides turn/task/tool status (ACTX-AR-GOV-001).
"""

from __future__ import annotations

from typing import Any

from trials.ingest.context_kinds import (
    CONTEXT_EVENT_TYPES,
    ITEM_ID_KEYS,
    collect_redactions,
    is_context_event,
    is_context_record,
    is_redacted_state,
    record_kind,
    redaction_targets,
)
from trials.ingest.documents import is_json_schema
from trials.ingest.records import (
    PackError,
    ParsedContextRecord,
    ParsedEvent,
    ParsedPack,
    Problem,
)
from trials.ingest.values import pick, to_str

# snake_case id -> camelCase key used in ParsedEvent.correlation
_ID_KEYS = {
    "runtime_id": "runtimeId",
    "session_id": "sessionId",
    "thread_id": "threadId",
    "turn_id": "turnId",
    "task_id": "taskId",
    "run_id": "runId",
    "attempt_id": "attemptId",
    "step_id": "stepId",
    "tool_call_id": "toolCallId",
    "action_id": "actionId",
    "evidence_id": "evidenceId",
    "context_id": "contextId",
}


# Values that only the runtime may decide (turn/task/tool status, approvals).
_RUNTIME_STATUS_KEYS = (
    "status",
    "turn_status",
    "task_status",
    "tool_status",
    "runtime_status",
    "run_status",
    "approval_status",
)


_RUNTIME_STATUSES = frozenset({"completed", "complete", "failed", "approved", "succeeded", "success", "passed"})


def context_correlation(obj: dict[str, Any]) -> dict[str, str]:
    """Runtime ids of a record, camelCase keys, values exactly as given."""
    sources = [obj]
    runtime_refs = obj.get("runtime_refs")
    if isinstance(runtime_refs, dict):
        sources.append(runtime_refs)
    elif isinstance(runtime_refs, list):
        sources += [ref for ref in runtime_refs if isinstance(ref, dict)]
    correlation: dict[str, str] = {}
    for source in sources:
        for snake, camel in _ID_KEYS.items():
            value = pick(source, snake, camel)
            if value not in (None, "") and camel not in correlation:
                correlation[camel] = to_str(value)
    return correlation


def _check_governance(obj: dict[str, Any], file: str, where: str, line: int | None, problems: list[Problem]) -> None:
    """ACTX-AR-GOV-001: runtime status in a context record is kept but never believed."""
    for key in _RUNTIME_STATUS_KEYS:
        if to_str(obj.get(key)).strip().lower() in _RUNTIME_STATUSES:
            problems.append(
                Problem(
                    file,
                    "context record declares runtime status; ignored",
                    f"{where}.{key}",
                    line,
                    "warning",
                    kept="in data",
                )
            )
    event_type = to_str(obj.get("event_type"))
    if (
        event_type
        and event_type not in CONTEXT_EVENT_TYPES
        and event_type.rsplit(".", 1)[-1] in _RUNTIME_STATUSES | {"approved"}
    ):
        problems.append(
            Problem(
                file,
                "context record declares runtime status; ignored",
                f"{where}.event_type",
                line,
                "warning",
                kept="in data",
            )
        )


class _Ctx:
    """What every builder needs: where we are, redactions seen, and problems."""

    def __init__(self, file: str, line: int | None, named: dict[str, dict[str, Any]], problems: list[Problem]):
        self.file = file
        self.line = line
        self.named = named
        self.problems = problems

    def warn(self, message: str, where: str) -> None:
        self.problems.append(Problem(self.file, message, where, self.line, "warning"))


def _record(
    kind: str, record_id: Any, obj: dict[str, Any], corr: dict[str, str], ctx: _Ctx, **fields: Any
) -> ParsedContextRecord:
    data = fields.pop("data", None)
    return ParsedContextRecord(
        kind=kind,
        record_id=to_str(record_id),
        context_id=to_str(obj.get("context_id") or corr.get("contextId")),
        correlation=corr,
        data=obj if data is None else data,
        **fields,
    )


def _norm_refs(refs: Any, reasons: Any) -> list[dict[str, Any]]:
    """Item refs (ids or dicts) -> [{item_id, reason, ...other keys}]."""
    reasons = reasons if isinstance(reasons, dict) else {}
    out = []
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict):
            item_id = to_str(pick(ref, *ITEM_ID_KEYS))
            reason = pick(ref, "reason", "omission_reason", "omitted_reason", "selection_reason")
            out.append({**ref, "item_id": item_id, "reason": to_str(reason or reasons.get(item_id))})
        else:
            out.append({"item_id": to_str(ref), "reason": to_str(reasons.get(to_str(ref)))})
    return out


def _selection(obj: dict[str, Any], corr: dict[str, str], ctx: _Ctx, where: str) -> list[ParsedContextRecord]:
    sel_id = to_str(obj["selection_id"])
    reasons = pick(obj, "omission_reasons", "reasons")
    selected = _norm_refs(pick(obj, "selected_item_refs", "selected_items"), reasons)
    omitted = _norm_refs(pick(obj, "omitted_item_refs", "omitted_items"), reasons)
    data = {**obj, "selected_item_refs": selected, "omitted_item_refs": omitted}
    records = [_record("selection", sel_id, obj, corr, ctx, data=data)]
    for status, refs in (("selected", selected), ("omitted", omitted)):
        for ref in refs:
            if status == "omitted" and not ref["reason"]:
                ctx.warn(f"omitted item {ref['item_id']!r} has no reason", f"{where}.omitted_item_refs")
            records.append(
                _record(
                    "selection",
                    f"{sel_id}:{ref['item_id']}",
                    obj,
                    corr,
                    ctx,
                    status=status,
                    reason=ref["reason"],
                    data={"selection_id": sel_id, **ref},
                )
            )
    return records


def _item(obj: dict[str, Any], corr: dict[str, str], ctx: _Ctx) -> ParsedContextRecord:
    item_id = to_str(obj["item_id"])
    named = ctx.named.get(item_id)
    state = to_str(obj.get("redaction_state"))
    if named is not None and not is_redacted_state(state):  # redacted by a record of its own
        state = to_str(named.get("redaction_state")) or "redacted"
    redacted = is_redacted_state(state)
    data = dict(obj)  # (its values withheld by the redaction stage: `named` names it, or its own state)
    if named and (set(named) - {"fields"} or named.get("fields")):
        # the redaction record's facts (reason, policy refs) travel with the item
        data["redaction"] = {k: v for k, v in named.items() if k != "fields"} | {
            "redacted_fields": named.get("fields") or []
        }
    reason = to_str(pick(obj, "redaction_reason") or (named or {}).get("reason"))
    return _record(
        "item",
        item_id,
        obj,
        corr,
        ctx,
        data=data,
        status="redacted" if redacted else "",
        reason=reason,
        redaction_state=state,
    )


def _missing(obj: dict[str, Any], corr: dict[str, str], ctx: _Ctx) -> ParsedContextRecord:
    data = dict(obj)
    # The three facts ACTX-AR-MISSING-001 asks for, under stable names.
    data.setdefault("owner", obj.get("requested_from"))
    data.setdefault("requested_action", pick(obj, "blocked_actions", "needed_for"))
    data.setdefault("safe_summary", pick(obj, "safe_summary", "question"))
    return _record(
        "missing", obj["missing_id"], obj, corr, ctx, data=data, status="missing", reason=to_str(data["safe_summary"])
    )


def _build(kind: str, obj: dict[str, Any], corr: dict[str, str], ctx: _Ctx, where: str) -> list[ParsedContextRecord]:
    if kind == "selection":
        return _selection(obj, corr, ctx, where)
    if kind == "item":
        return [_item(obj, corr, ctx)]
    if kind == "missing":
        return [_missing(obj, corr, ctx)]
    if kind == "envelope":
        return [_record("envelope", obj["context_id"], obj, corr, ctx)]
    if kind == "compaction":
        # Status only: its summary is a pointer to a source window, never a final answer.
        return [_record("compaction", obj["compaction_id"], obj, corr, ctx, status="compacted")]
    if kind in ("assembly", "injection"):
        if not pick(obj, "source_item_refs", "source_refs"):
            ctx.warn(f"{kind} does not point to source item refs", where)
        return [_record(kind, obj[f"{kind}_id"], obj, corr, ctx)]
    if kind == "budget":
        budget_id = pick(obj, "budget_id") or f"{pick(obj, 'context_id', 'selection_id')}:budget"
        return [_record("budget", budget_id, obj, corr, ctx)]
    # redaction
    targets = redaction_targets(obj)
    record_id = pick(obj, "redaction_id") or "redaction:" + ",".join(targets)
    return [
        _record(
            "redaction",
            record_id,
            obj,
            corr,
            ctx,
            status="redacted",
            reason=to_str(pick(obj, "reason", "redaction_reason")),
            redaction_state=to_str(obj.get("redaction_state")),
        )
    ]


def _extract(value: Any, corr: dict[str, str], ctx: _Ctx, where: str) -> list[ParsedContextRecord]:
    """Every record in `value`, nested ones included, inheriting correlation ids."""
    if isinstance(value, list):
        return [r for i, v in enumerate(value) for r in _extract(v, corr, ctx, f"{where}[{i}]")]
    if not isinstance(value, dict):
        return []
    kind = record_kind(value)
    if kind == "event":
        return _event_records(value, ctx, where)
    records: list[ParsedContextRecord] = []
    if kind:
        corr = {**corr, **context_correlation(value)}
        _check_governance(value, ctx.file, where, ctx.line, ctx.problems)
        records += _build(kind, value, corr, ctx, where)
    for key, child in value.items():
        if isinstance(child, dict | list):
            records += _extract(child, corr, ctx, f"{where}.{key}")
    return records


def _event_records(obj: dict[str, Any], ctx: _Ctx, where: str) -> list[ParsedContextRecord]:
    corr = context_correlation(obj)
    _check_governance(obj, ctx.file, where, ctx.line, ctx.problems)
    data = obj.get("data")
    if isinstance(data, dict) and not record_kind(data):
        _check_governance(data, ctx.file, f"{where}.data", ctx.line, ctx.problems)
    event = _record("event", obj["event_id"], obj, corr, ctx)
    return [event] + _extract(data, corr, ctx, f"{where}.data")


def _dedupe(records: list[ParsedContextRecord]) -> list[ParsedContextRecord]:
    """Each record once by kind, id and status: an item is "redacted" wherever a redaction names it
    (`_Ctx.named`, why the parser reads them), so its copies marked and unmarked are one."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for record in records:
        key = (record.kind, record.record_id, record.status)
        if key not in seen:
            seen.add(key)
            out.append(record)
    return out


def parse_context_rows(
    rows: list[tuple[int, Any]], file: str, named: dict[str, dict[str, Any]] | None = None
) -> tuple[list[ParsedContextRecord], list[Problem]]:
    """JSONL of context events/records; redactions anywhere in the file (or `named`, a trial's) apply everywhere."""
    named = collect_redactions([obj for _, obj in rows]) if named is None else named
    records: list[ParsedContextRecord] = []
    problems: list[Problem] = []
    for line, obj in rows:
        ctx = _Ctx(file, line, named, problems)
        if is_context_event(obj) or is_context_record(obj):
            records += _extract(obj, {}, ctx, f"line {line}")
        else:
            problems.append(
                Problem(file, "line is not an Agent Context event or record", line=line, kept="in the stored file")
            )
    return _dedupe(records), problems


def parse_context_document(data: Any, path: str) -> ParsedPack:
    if is_json_schema(data):
        raise PackError(Problem(path, "a JSON Schema, not Agent Context records"))
    problems: list[Problem] = []
    ctx = _Ctx(path, None, collect_redactions(data), problems)
    records = _dedupe(_extract(data, {}, ctx, "$"))
    if not records:
        raise PackError(Problem(path, "no Agent Context event or record found"))
    if isinstance(data, dict) and not record_kind(data):
        unread = [k for k, v in data.items() if not _extract(v, {}, _Ctx(path, None, {}, []), "")]
        if unread:
            problems.append(
                Problem(
                    path,
                    "keys not read as context records: " + ", ".join(unread),
                    "$",
                    severity="warning",
                    kept="in the stored file",
                )
            )
    return ParsedPack(kind="agent-context", context_records=records, problems=problems)


def context_records_from_runtime_event(
    event: ParsedEvent, problems: list[Problem] | None = None, named: dict[str, dict[str, Any]] | None = None
) -> list[ParsedContextRecord]:
    """Records carried in the payload of a Lime `context.*` runtime event (`named`: redactions beyond it)."""
    if not event.type.startswith("context."):
        return []
    named = {**(named or {}), **collect_redactions(event.payload)}
    ctx = _Ctx(event.file, event.line, named, [] if problems is None else problems)
    return _dedupe(_extract(event.payload, dict(event.correlation), ctx, "$.payload"))
