"""Writing untrusted text into Markdown: escaped inline, fenced as code, cut to a bound.

Every string that came from a pack (a task's name, a step's message, a tool's output) passes
through `inline` or `fenced` after the viewer's `scrub`: so a name cannot open a link or a heading,
and a step's text cannot close its code fence early.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from trials.reading.text import scrub

# Characters that make Markdown syntax inside a line: emphasis, code, links and images, html, table
# cells, strike-through. (A digest never starts a line with untrusted text, so "#", "-", "1." stay.)
# An "_" between two letters or digits opens no emphasis (CommonMark): "test_timeout" stays as written.
ACTIVE = re.compile(r"([\\`*\[\]()<>|!~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
BACKTICKS = re.compile(r"`+")


def inline(value: Any, limit: int = 300) -> str:
    """`value` scrubbed, on one line, cut to `limit` and with every Markdown-active character escaped."""
    text = " ".join(scrub(value).split())
    text, more = cut(text, limit)
    return ACTIVE.sub(r"\\\1", text) + (f" … ({more} more characters)" if more else "")


def cut(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` characters of `text`, and how many were left out."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def fenced(text: str, limit: int, language: str = "text", more: int = 0, unit: str = "characters") -> str:
    """`text` scrubbed and cut to `limit`, in a code fence longer than any backtick run it holds.

    `more`: what was already left out before it came here (a page's preview of a long message), in `unit`."""
    body, cut_off = cut(scrub(text), limit)
    longest = max((len(run) for run in BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    if unit == "characters":
        cut_off, more = cut_off + more, 0
    said = [f"{n} more {u}" for n, u in ((cut_off, "characters"), (more, unit)) if n]
    note = f"\n… ({', '.join(said)})" if said else ""
    return f"{fence}{language}\n{body}\n{fence}{note}"


def link(label: str, url: str) -> str:
    """A link whose label is escaped; the URL is ours (built by reverse()), with brackets and spaces encoded."""
    safe = url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")
    return f"[{inline(label)}]({safe})"


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """A Markdown table of cells already escaped (`inline` escapes `|`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return inline(value)
