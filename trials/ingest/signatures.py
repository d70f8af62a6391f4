"""What a step is for aligning two trajectories (trials/reading/align.py): pure, no Django.

Each step gets three short hashes, stored on its row at import:
- `align_key`: what may pair it with a step of the other trajectory: the names of its tool
  calls in order, or, for a step without tool calls, its source (a message pairs a message);
- `signature`: what makes the pair `same`: the tool names with their normalised arguments and
  results, or the source with the message text;
- `chain`: the signature of the whole prefix up to this step, so the first divergence of two
  trajectories is found by a search on the step index instead of reading every step.

They are computed from what the step rows keep (arguments whole, results as their stored
preview and size), so a trajectory imported before these columns gets the same values from
its rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import orjson

PREVIEW_CHARS = 2000  # a result's text as the observation row keeps it (trials/imports/steps.py)


class StepSignature(NamedTuple):
    align_key: str
    signature: str
    chain: str


def digest(*parts: bytes) -> str:
    return hashlib.blake2b(b"\x1f".join(parts), digest_size=8).hexdigest()


def encoded(value: Any) -> bytes:
    """Arguments as compared: keys sorted, whitespace runs as one space, arguments sent as a JSON string parsed."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        value = _json_in(value.strip()) or value
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # nested past orjson's 255 levels, or integers past 64 bits
        return _walked(value)
    # Runs of spaces and of JSON's escaped whitespace as one space (bytes.replace: a regex took 3x as long).
    return b" ".join(text.replace(b"\\n", b" ").replace(b"\\t", b" ").replace(b"\\r", b" ").split())


def _walked(value: Any) -> bytes:
    """`encoded` by a walk with a stack, not recursion: arguments nest as deep as a file does
    (orjson writes only 255 levels, Python recurses about 1,000), and integers may pass 64 bits."""
    out: list[bytes] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bytes):  # (a closing bracket or separator pushed below)
            out.append(item)
        elif isinstance(item, str):
            stripped = item.strip()
            parsed = _json_in(stripped) if stripped[:1] in ("{", "[") else None
            if parsed is not None:
                stack.append(parsed)
            else:
                out.append(orjson.dumps(" ".join(item.split())))
        elif isinstance(item, dict):
            out.append(b"{")
            stack.append(b"}")
            for n, key in enumerate(sorted(item, key=str, reverse=True)):
                stack += ([b","] if n else []) + [item[key], orjson.dumps(str(key)) + b":"]
        elif isinstance(item, list):
            out.append(b"[")
            stack.append(b"]")
            for n, element in enumerate(reversed(item)):
                stack += ([b","] if n else []) + [element]
        else:  # numbers, true, false, null
            out.append(b"null" if item is None else str(item).lower().encode())
    return b"".join(out)


def _json_in(text: str) -> dict | list | None:
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def step_signature(
    source: str,
    message_text: str,
    calls: Sequence[tuple[str, Any]],
    results: Iterable[str],
    previous_chain: str = "",
) -> StepSignature:
    """A step's hashes: `calls` are (function name, arguments); `results` the observations' text."""
    if calls:
        names = [name.encode() for name, _ in calls]
        key = digest(b"call", *names)
        texts = [" ".join(text[:PREVIEW_CHARS].split()).encode() for text in results]
        signature = digest(key.encode(), *(encoded(arguments) for _, arguments in calls), b"\x1e", *texts)
    else:
        key = digest(b"message", source.encode())
        signature = digest(key.encode(), " ".join(message_text.split()).encode())
    return StepSignature(key, signature, digest(previous_chain.encode(), signature.encode()))
