"""Untrusted text on its way out: secrets masked, bidi names isolated, JSON printed, where a long name breaks."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.stripe import StripeDetector

TEXT_PREVIEW = 4000  # characters of a message / reasoning shown before "show all"
ARGUMENTS_PREVIEW = 4000
REDACTED = "[redacted]"

# Where a long name (a configuration, a job) may break, for a page's two lines and a chart's ticks alike:
# between its parts (agent_model, job/trial, key|solver), where a chart's shared head ends too, or, on a
# page, inside a part as well (claude-4-sonnet, name@2025-01-15T10:00). Never inside an escaped &amp;.
NAME_PARTS = "_/|: "
NAME_BREAKS = NAME_PARTS + "-@."

# Defence in depth: the parsers already scrub redacted values, but anything shaped like a
# credential is masked again on the way out (pages, API, downloads of text). Only a whole
# token in a known key format is masked, so names, paths and ids are never rewritten
# ("flask-add-rate-limit" holds "sk-" but is no key). Key shapes come from detect-secrets'
# plugins where it has one; the others are the vendors' documented prefixes.
TOKEN_START = r"(?<![A-Za-z0-9_\-])"  # a key starts a token: no letter, digit, _ or - before it
TOKEN_REST = r"[A-Za-z0-9_\-]*"  # and the whole token is masked, not the part a pattern matched
KEY_FORMATS = (
    AWSKeyDetector.denylist[0].pattern,  # AWS access key ids
    GitHubTokenDetector.denylist[0].pattern,  # ghp_, gho_, ghu_, ghs_, ghr_
    r"github_pat_[A-Za-z0-9_]{40,}",  # GitHub fine-grained tokens
    SlackDetector.denylist[0].pattern,  # xoxb-, xoxp-, …
    StripeDetector.denylist[0].pattern,  # sk_live_, rk_live_
    OpenAIDetector.denylist[0].pattern,  # OpenAI's older keys
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API keys
    JwtTokenDetector.denylist[0].pattern,  # JSON Web Tokens
)
# OpenAI (sk-proj-…, sk-…) and Anthropic (sk-ant-…) keys: "sk-" and a long mix of upper and
# lower case letters and digits; a name such as "sk-learn-regression" has no capitals or digits.
SK_KEY = re.compile(r"sk-[A-Za-z0-9_\-]{20,}")
SECRET_RE = re.compile(
    rf"{TOKEN_START}(?:{'|'.join(KEY_FORMATS)}){TOKEN_REST}"
    rf"|(?P<sk>{TOKEN_START}{SK_KEY.pattern})"
    r"|(?P<bearer>(?i:authorization[\"']?\s*[:=]\s*[\"']?bearer\s+))[A-Za-z0-9\-._~+/]+=*"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
)


def _masked(match: re.Match[str]) -> str:
    if match["bearer"]:
        return match["bearer"] + REDACTED
    if match["sk"] and not all(re.search(chars, match["sk"][3:]) for chars in ("[a-z]", "[A-Z]", "[0-9]")):
        return match[0]
    return REDACTED


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
    return SECRET_RE.sub(_masked, str(text))


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


def argument_blocks(arguments: Any) -> tuple[Any, list[tuple[str, str]]]:
    """A tool call's arguments split for reading: its multi-line strings (a file's content, a
    script, a command) as (name, text) blocks with their line breaks, and the rest as it was.

    Only top-level strings of an object are lifted out; the rest is printed as JSON, in order.
    """
    if not isinstance(arguments, dict):
        return arguments, []
    blocks = [(str(k), scrub(v)) for k, v in arguments.items() if isinstance(v, str) and "\n" in v.strip()]
    lifted = {name for name, _ in blocks}
    return {k: v for k, v in arguments.items() if str(k) not in lifted}, blocks
