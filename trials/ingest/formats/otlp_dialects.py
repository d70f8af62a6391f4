"""The shapes OTLP/JSON comes in, read as the standard one (trials/ingest/formats/otlp.py). No Django.

- Standard OTLP/JSON: `resourceSpans[].scopeSpans[].spans[]`, ids in hex, times as decimal strings.
- Grafana Tempo's export (and OTLP before 1.0): `batches[].instrumentationLibrarySpans[].spans[]`,
  ids often in base64, span kinds as strings (`SPAN_KIND_SERVER`), times as JSON numbers.
- Log records in the same file (`resourceLogs[].scopeLogs[].logRecords[]`, as Google ADK and other
  GenAI emitters write them): each names its span by trace and span id, its event name in
  `eventName` or the attribute `event.name`; they become the span's events, as a span's own
  `events[]` are.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from typing import Any

from ijson.common import ObjectBuilder

from trials.ingest.values import as_dict, as_list

DIALECTS = (  # (resource key, scope keys, dialect)
    ("resourceSpans", ("scopeSpans", "instrumentationLibrarySpans"), "OTLP/JSON"),
    ("batches", ("instrumentationLibrarySpans", "scopeSpans"), "Grafana Tempo export"),
)
LOGS = ("resourceLogs", ("scopeLogs", "instrumentationLibraryLogs"), "OTLP/JSON logs")
# Model families and the providers that make them: a `gen_ai.system` naming another maker is a disagreement.
MAKERS = {
    "openai": ("gpt", "o1", "o3", "o4", "chatgpt", "davinci", "text-embedding"),
    "anthropic": ("claude",),
    "gcp.gemini": ("gemini", "gemma"),
    "mistral_ai": ("mistral", "mixtral", "codestral"),
    "deepseek": ("deepseek",),
}
MAKERS["gemini"] = MAKERS["google"] = MAKERS["gcp.gemini"]
Group = tuple[str, Any, Iterable[Any]]  # a scope's spans: its JSON path, its resource's attribute pairs, its spans
Logs = tuple[dict[str, list[dict[str, Any]]], list[tuple[str, str]]]  # as `log_events` reads them


def value_of(any_value: Any) -> Any:
    """An OTLP AnyValue as plain JSON."""
    value = as_dict(any_value)
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:  # (a string in OTLP/JSON: 64 bits)
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [value_of(v) for v in as_list(as_dict(value["arrayValue"]).get("values"))]
    if "kvlistValue" in value:
        return attributes(as_dict(value["kvlistValue"]).get("values"))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def attributes(pairs: Any) -> dict[str, Any]:
    return {str(kv["key"]): value_of(kv.get("value")) for kv in as_list(pairs) if isinstance(kv, dict) and "key" in kv}


def is_otlp(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("resourceSpans"), list):
        return True
    batches = data.get("batches")
    return isinstance(batches, list) and any(
        isinstance(b, dict) and any(k in b for k in ("instrumentationLibrarySpans", "scopeSpans")) for b in batches
    )


def span_groups(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """Each scope's spans with its JSON path and its resource's attributes, in whichever dialect."""
    yield from _groups(data, *next((d for d in DIALECTS if isinstance(data.get(d[0]), list)), DIALECTS[0])[:2])


def _groups(data: dict[str, Any], key: str, scope_keys: tuple[str, ...]) -> Iterator[tuple[str, Any, list[Any]]]:
    for i, resource_spans in enumerate(as_list(data.get(key))):
        resource_spans = as_dict(resource_spans)
        resource = as_dict(resource_spans.get("resource")).get("attributes")
        scope_key = next((k for k in scope_keys if k in resource_spans), scope_keys[0])
        for j, scope in enumerate(as_list(resource_spans.get(scope_key))):
            items = as_dict(scope)
            for item_key in ("spans", "logRecords"):
                if item_key in items:
                    yield f"{key}[{i}].{scope_key}[{j}].{item_key}", resource, as_list(items[item_key])


def hex_id(value: Any, digits: int) -> str:
    """A trace or span id as lower-case hex: OTLP/JSON writes hex, Tempo and protobuf's JSON base64."""
    text = str(value or "").strip()
    if len(text) == digits and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.lower()
    return raw.hex() if len(raw) == digits // 2 else text.lower()


def nanos(value: Any) -> int:
    """A time in unix nanoseconds: a decimal string, or a JSON number (Tempo)."""
    if isinstance(value, bool):
        return 0
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def log_events(data: dict[str, Any]) -> Logs:
    """The file's named log records by the span id they name; records naming no span, as (JSON path,
    what) to warn of."""
    events: dict[str, list[dict[str, Any]]] = {}
    unattached: list[tuple[str, str]] = []
    for path, _, records in _groups(data, LOGS[0], LOGS[1]):
        for n, raw in enumerate(records):
            record = as_dict(raw)
            attrs = attributes(record.get("attributes"))
            name = str(record.get("eventName") or attrs.get("event.name") or "")
            if not name:
                continue
            event = {
                "name": name,
                "attrs": attrs,
                "body": value_of(record.get("body")),
                "time": nanos(record.get("timeUnixNano") or record.get("observedTimeUnixNano")),
            }
            span_id = hex_id(record.get("spanId"), 16)
            if span_id.strip("0"):
                events.setdefault(span_id, []).append(event)
            else:
                unattached.append((f"{path}[{n}]", f"log event {name!r} names no span"))
    return events, unattached


def span_events(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """A span's own `events[]` in the shape log events take (their attributes stand for the body)."""
    found = []
    for event in as_list(raw.get("events")):
        event = as_dict(event)
        attrs = attributes(event.get("attributes"))
        found.append(
            {
                "name": str(event.get("name") or ""),
                "attrs": attrs,
                "body": attrs,
                "time": nanos(event.get("timeUnixNano")),
            }
        )
    return found


def provider_disagreement(system: Any, model: str) -> str:
    """Why `gen_ai.system` (or `gen_ai.provider.name`) and the model name disagree; "" when they do not."""
    said = str(system or "").lower()
    name = model.lower().rpartition("/")[2]
    maker = next((m for m, families in MAKERS.items() if name.startswith(families)), "")
    if not said or not maker or said not in MAKERS or MAKERS[said] == MAKERS[maker]:
        return ""
    return f"gen_ai.system {system!r} disagrees with the model {model!r} ({maker}'s): the model name kept"


# ---------------------------------------------------------------- a big file, streamed (otlp_stream.py)

Events = Iterator[tuple[str, str, Any]]  # ijson's (prefix, event, value)
STARTS = ("start_map", "start_array", "string", "number", "null", "boolean")  # the events a value begins with


class Unstreamable(Exception):
    """A file of a shape the streamed reading does not follow the whole reading in: read it whole."""


def streamed_groups(events: Events) -> Iterator[Group]:
    """`span_groups` of a file given as ijson's events: each group's spans are read as they are iterated
    (iterate each before the next group)."""
    key = ""
    for prefix, event, value in events:
        if prefix == "" and event == "map_key" and value in (DIALECTS[0][0], DIALECTS[1][0]):
            if key:  # (both dialects' keys: the whole reading picks by type, this one cannot)
                raise Unstreamable(f"both {key!r} and {value!r}")
            key = value
            scope_keys = next(d[1] for d in DIALECTS if d[0] == key)
            yield from _resources(events, key, scope_keys)


def _resources(events: Events, key: str, scope_keys: tuple[str, ...]) -> Iterator[Group]:
    _, event, value = next(events)
    if event != "start_array":
        raise Unstreamable(f"{key} is not a list")
    item, i = f"{key}.item", -1
    resource: Any = None
    scope_key = ""
    for prefix, event, value in events:
        if prefix == key and event == "end_array":
            return
        if prefix == item and event in STARTS:
            i, resource, scope_key = i + 1, None, ""
            if event != "start_map":
                build(events, event, value)
        elif prefix == item and event == "map_key" and value == "resource":
            if scope_key:  # (its attributes would be known only after its spans)
                raise Unstreamable(f"{key}[{i}].resource after its spans")
            resource = as_dict(build(events, *next(events)[1:])).get("attributes")
        elif prefix == item and event == "map_key" and value in scope_keys:
            if scope_key:
                raise Unstreamable(f"{key}[{i}] holds both {scope_key!r} and {value!r}")
            scope_key = value
            yield from _scopes(events, f"{item}.{value}", f"{key}[{i}].{value}", resource)


def _scopes(events: Events, prefix: str, path: str, resource: Any) -> Iterator[Group]:
    _, event, value = next(events)
    if event != "start_array":
        build(events, event, value)
        return
    item, j, read = f"{prefix}.item", -1, ""
    for p, event, value in events:
        if p == prefix and event == "end_array":
            return
        if p == item and event in STARTS:
            j, read = j + 1, ""
            if event != "start_map":
                build(events, event, value)
        elif p == item and event == "map_key" and value in ("spans", "logRecords"):
            if read:  # (the whole reading takes a scope's spans first)
                raise Unstreamable(f"{path}[{j}] holds both spans and logRecords")
            read = value
            yield f"{path}[{j}].{value}", resource, _items(events, f"{item}.{value}")


def _items(events: Events, prefix: str) -> Iterator[Any]:
    _, event, value = next(events)
    if event != "start_array":
        build(events, event, value)
        return
    for p, event, value in events:
        if p == prefix and event == "end_array":
            return
        yield build(events, event, value)


def build(events: Events, event: str, value: Any) -> Any:
    """The value that begins with this event, read from the events that follow it."""
    if event not in ("start_map", "start_array"):
        return value
    builder = ObjectBuilder()
    builder.event(event, value)
    depth = 1
    for _, event, value in events:
        builder.event(event, value)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                break
    return builder.value
