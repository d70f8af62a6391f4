"""Untrusted text on its way out: secrets masked, bidi names isolated, JSON printed."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

TEXT_PREVIEW = 4000  # characters of a message / reasoning shown before "show all"


ARGUMENTS_PREVIEW = 4000


REDACTED = "[redacted]"


# Defence in depth: the parsers already scrub redacted values, but anything that looks
# like a credential is masked again on the way out (pages, API, downloads of text).
SECRET_RE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{12,}"  # OpenAI / Anthropic style keys, the demo secret
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)"
)


BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


ISOLATES = {ord(c): None for c in "\u2066\u2067\u2068\u2069"}


def isolated(name: str) -> str:
    """A name with bidi controls, isolated (FSI … PDI) so that none of them reorders the text around it:
    a right-to-left override in a job's name would otherwise turn its label's " #9" around, even in a chart
    or a <select> (which takes no <bdi>). The name's own isolates go, so none can close this one early."""
    return f"\u2068{name.translate(ISOLATES)}\u2069" if BIDI_CONTROLS & set(name) else name


def scrub(text: Any) -> str:
    """The text with anything shaped like a secret replaced by a placeholder."""
    if text is None:
        return ""
    return SECRET_RE.sub(REDACTED, str(text))


def scrub_json(value: Any) -> Any:
    """A copy of a JSON value with every string scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [scrub_json(v) for v in value]
    if isinstance(value, dict):
        return {k: scrub_json(v) for k, v in value.items()}
    return value


def pretty_json(value: Any, limit: int | None = None) -> str:
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # integers past 64 bits, or nested past orjson's 255 levels
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    text = scrub(text)
    if limit is not None and len(text) > limit:
        return text[:limit] + f"\n… [{len(text) - limit} more characters]"
    return text
