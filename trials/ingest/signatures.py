"""What a step is for aligning two trajectories (trials/viewer/align.py): pure, no Django.

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


def normalised(value: Any) -> Any:
    """Arguments as compared: keys sorted (by orjson), whitespace runs as one space, JSON strings parsed."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return normalised(orjson.loads(stripped))
            except orjson.JSONDecodeError:
                pass
        return " ".join(value.split())
    if isinstance(value, dict):
        return {str(k): normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def encoded(value: Any) -> bytes:
    return orjson.dumps(normalised(value), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


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
