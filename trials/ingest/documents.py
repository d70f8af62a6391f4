"""Generic evidence documents: JSON Schemas shipped beside the samples.

A schema is evidence of what a producer promised, never a record of a run.
"""

from __future__ import annotations

from typing import Any

from trials.ingest.records import ParsedDocument


def is_json_schema(data: Any) -> bool:
    return isinstance(data, dict) and ("$schema" in data or ("$id" in data and "properties" in data))


def parse_json_schema(data: dict[str, Any], path: str) -> ParsedDocument:
    properties = data.get("properties")
    required = data.get("required")
    return ParsedDocument(
        kind="json-schema",
        path=path,
        title=str(data.get("title") or data.get("$id") or path),
        data=data,
        counts={
            "properties": len(properties) if isinstance(properties, dict) else 0,
            "required": len(required) if isinstance(required, list) else 0,
        },
    )
