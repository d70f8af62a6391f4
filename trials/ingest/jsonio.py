"""Reading JSON and JSONL with errors that say which file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from trials.ingest.records import PackError, Problem

UTF8_BOM = b"\xef\xbb\xbf"


def without_bom(raw: bytes) -> bytes:
    """JSON bytes without a leading UTF-8 byte order mark: RFC 8259 lets a reader ignore one; orjson refuses it."""
    return raw[3:] if raw.startswith(UTF8_BOM) else raw


def open_json(path: Path) -> BinaryIO:
    """The file, opened for reading past a leading UTF-8 byte order mark (for ijson, which refuses it too)."""
    f = open(path, "rb")
    if f.read(3) != UTF8_BOM:
        f.seek(0)
    return f


def malformed(
    rel: str, exc: orjson.JSONDecodeError, what: str = "malformed JSON", kept: str = "the raw bytes", line: int = 0
) -> Problem:
    """orjson's complaint, with its column (a one-line file has only that) and the usual non-JSON culprits named.

    `line`: where the parsed text starts in its file (a JSONL line), when not at the top.
    """
    message = f"{what}: {exc.msg}, column {exc.colno}"
    if isinstance(exc.doc, str) and exc.doc.startswith(("NaN", "Inf", "-Inf"), exc.pos):
        message += " (NaN and Infinity are not JSON)"
    return Problem(rel, message, line=line + exc.lineno - 1 if line else exc.lineno, kept=kept)


def load_json(path: Path, rel: str) -> Any:
    raw = without_bom(path.read_bytes())
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PackError(malformed(rel, exc)) from exc


def load_jsonl(path: Path, rel: str) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """Rows as (line number, value); a bad line is a problem, the other lines still count."""
    rows: list[tuple[int, Any]] = []
    problems: list[Problem] = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rows.append((number, orjson.loads(without_bom(line) if number == 1 else line)))
            except orjson.JSONDecodeError as exc:
                kept = "the other lines, and this one in the raw bytes"
                problems.append(malformed(rel, exc, "malformed JSON line", kept=kept, line=number))
    return rows, problems


def dumps_text(value: Any) -> str:
    """JSON text of a parsed value; orjson first, the standard library for integers past 64 bits."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)
