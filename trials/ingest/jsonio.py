"""Reading JSON and JSONL with errors that say which file and line; writing JSON as a file holds it."""

from __future__ import annotations

import json
import re
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from trials.ingest.records import PackError, Problem

UTF8_BOM = b"\xef\xbb\xbf"


def json_bytes(value: Any) -> bytes:
    """JSON indented by two, as a file holds it; an integer past 64 bits written exactly."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:  # orjson refuses integers past 64 bits
        return json.dumps(value, indent=2, ensure_ascii=False).encode()


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
    lineno, colno = exc.lineno, exc.colno
    if isinstance(exc.doc, str) and exc.pos >= len(text := exc.doc.rstrip()):
        # It ended too early: orjson points past the trailing newline, at a line that is not there.
        lineno = text.count("\n") + 1
        colno = len(text) - text.rfind("\n")
    message = f"{what}: {exc.msg}, column {colno}"
    if isinstance(exc.doc, str) and exc.doc.startswith(("NaN", "Inf", "-Inf"), exc.pos):
        message += " (NaN and Infinity are not JSON)"
    return Problem(rel, message, line=line + lineno - 1 if line else lineno, kept=kept)


# Files up to this size are read a second time by the standard library, which orjson is not:
# it keeps integers past 64 bits exact (orjson makes them floats) and lets duplicate keys be seen.
# Configs, results, rewards and evidence packs are this small; trajectories are read by orjson alone.
EXACT_BYTES = 1 << 20
DUPLICATES_REPORTED = 20


def load_json(path: Path, rel: str, problems: list[Problem] | None = None) -> Any:
    """The file's JSON. Given `problems`, a small file is read exactly and its duplicate keys are reported there."""
    raw = without_bom(path.read_bytes())
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PackError(malformed(rel, exc)) from exc
    if problems is None or len(raw) > EXACT_BYTES:
        return data
    return exact(raw, rel, problems, default=data)


def load_jsonl(path: Path, rel: str) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """Rows as (line number, value); a bad line is a problem, the other lines still count."""
    rows: list[tuple[int, Any]] = []
    problems: list[Problem] = []
    small = path.stat().st_size <= EXACT_BYTES
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            line = without_bom(line) if number == 1 else line
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                kept = "the other lines, and this one in the raw bytes"
                problems.append(malformed(rel, exc, "malformed JSON line", kept=kept, line=number))
                continue
            rows.append((number, exact(line, rel, problems, default=value, line=number) if small else value))
    return rows, problems


def exact(raw: bytes, rel: str, problems: list[Problem], default: Any, line: int = 0) -> Any:
    """JSON that orjson has read as `default`, read again by the standard library: integers past 64 bits
    stay integers, and each key that appears twice in one object is reported (the last value is the one read)."""
    duplicates: list[str] = []

    def pairs_to_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        value = dict(pairs)
        if len(value) != len(pairs):
            seen: set[str] = set()
            for k, _ in pairs:
                if k in seen:
                    duplicates.append(k)
                else:
                    seen.add(k)
        return value

    try:
        value = json.loads(raw, object_pairs_hook=pairs_to_dict)
    except RecursionError:  # nested deeper than this process lets Python recurse: orjson's reading stands
        return default
    keys = list(dict.fromkeys(duplicates))
    for key in keys[:DUPLICATES_REPORTED]:  # each line is a search of the file: a hostile one has thousands
        problems.append(
            Problem(
                rel,
                f"key {key!r} appears twice in one object: the last value is read",
                line=line or _second_line_of(raw, key),
                severity="warning",
                kept="every value, in the raw bytes",
            )
        )
    if len(keys) > DUPLICATES_REPORTED:
        more = f"{len(keys) - DUPLICATES_REPORTED} more keys appear twice in one object"
        problems.append(Problem(rel, more, line=line or None, severity="warning", kept="every value, in the raw bytes"))
    return value


def _second_line_of(raw: bytes, key: str) -> int | None:
    """The line of the key's second appearance (found as text: a key written with escapes is not found)."""
    written = re.compile(re.escape(orjson.dumps(key)) + rb"\s*:")
    found = [m.start() for m in islice(written.finditer(raw), 2)]
    return raw.count(b"\n", 0, found[1]) + 1 if len(found) == 2 else None


def dumps_text(value: Any) -> str:
    """JSON text of a parsed value; orjson first, the standard library for integers past 64 bits."""
    return dumps_bytes(value).decode()


def dumps_bytes(value: Any) -> bytes:
    """`dumps_text`, as UTF-8 bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()
