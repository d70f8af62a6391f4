"""Agent Context records (seed 002, ACTX-AR-* cases): what context was available,
selected, omitted, budgeted, assembled, injected, compacted, redacted or missing.

Agent Context is snake_case. Ids are kept exactly and exposed with the camelCase keys of
Lime runtime events so both join. Two rules are enforced here, not later:
- a redacted raw value never reaches `data` (see `scrub_redacted`);
- a context record never decides turn/task/tool status (ACTX-AR-GOV-001).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from trials.ingest.documents import is_json_schema
from trials.ingest.lime import pick, to_str
from trials.ingest.records import (
    PackError,
    ParsedContextRecord,
    ParsedEvent,
    ParsedPack,
    Problem,
)

REDACTED = "[redacted]"
_NOT_REDACTED = ("", "none")
# Keys that can hold the raw value of an item; all are blanked when the item is redacted.
_RAW_VALUE_KEYS = ("content", "text", "snippet", "excerpt", "preview", "raw", "value", "summary")

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


# ---------------------------------------------------------------- detection


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


# ---------------------------------------------------------------- redaction


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


# ---------------------------------------------------------------- correlation / governance


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


# ---------------------------------------------------------------- record builders


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
        data=scrub_tree(obj, ctx.named) if data is None else data,
        **fields,
    )


def _norm_refs(refs: Any, reasons: Any) -> list[dict[str, Any]]:
    """Item refs (ids or dicts) -> [{item_id, reason, ...other keys}]."""
    reasons = reasons if isinstance(reasons, dict) else {}
    out = []
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict):
            item_id = to_str(pick(ref, *_ITEM_ID_KEYS))
            reason = pick(ref, "reason", "omission_reason", "omitted_reason", "selection_reason")
            out.append({**ref, "item_id": item_id, "reason": to_str(reason or reasons.get(item_id))})
        else:
            out.append({"item_id": to_str(ref), "reason": to_str(reasons.get(to_str(ref)))})
    return out


def _selection(obj: dict[str, Any], corr: dict[str, str], ctx: _Ctx, where: str) -> list[ParsedContextRecord]:
    sel_id = to_str(obj["selection_id"])
    reasons = pick(obj, "omission_reasons", "reasons")
    selected = scrub_tree(_norm_refs(pick(obj, "selected_item_refs", "selected_items"), reasons), ctx.named)
    omitted = scrub_tree(_norm_refs(pick(obj, "omitted_item_refs", "omitted_items"), reasons), ctx.named)
    data = {**scrub_tree(obj, ctx.named), "selected_item_refs": selected, "omitted_item_refs": omitted}
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
    data = scrub_redacted(scrub_tree(obj, ctx.named), (named or {}).get("fields"), force=redacted)
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
    data = scrub_tree(obj, ctx.named)
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
    targets = _redaction_targets(obj)
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
    seen: set[tuple[str, str, str]] = set()
    out = []
    for record in records:
        key = (record.kind, record.record_id, record.status)
        if key not in seen:
            seen.add(key)
            out.append(record)
    return out


# ---------------------------------------------------------------- public parsers


def parse_context_event(
    obj: dict[str, Any],
    file: str,
    line: int | None = None,
    problems: list[Problem] | None = None,
    named: dict[str, dict[str, Any]] | None = None,
) -> list[ParsedContextRecord]:
    """One context event -> an "event" record plus every record inside its `data`."""
    ctx = _Ctx(file, line, collect_redactions(obj) if named is None else named, [] if problems is None else problems)
    where = f"line {line}" if line is not None else "$"
    return _dedupe(_event_records(obj, ctx, where))


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
