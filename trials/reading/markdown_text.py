"""A grader's explanation written in Markdown (an Inspect `model_graded_fact` score's), as safe HTML.

No Markdown library is among the runtime dependencies, and explanations use a small part of it, so this
reads only that part: paragraphs, line breaks, `-`/`*`/`+` and `1.` lists (nested by indentation), fenced
code, and inline `code`, **bold** and *italic*. The text is scrubbed of credentials and HTML-escaped
before any of it is read, and only the tags written here come out, with no attribute but a numbered list's
`start` (its digits): raw HTML in an explanation stays text, and no link, image or URL is ever made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from trials.reading.text import scrub

ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:(?P<bullet>[-*+])|(?P<number>\d{1,9})[.)])[ \t]+(?P<text>.*)$")
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
CODE = re.compile(r"(`+)(.+?)\1")
BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
# One `*` or `_` around a word or words; an `_` inside a word (test_timeout) opens nothing.
ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?!\*)|(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])")
PLACEHOLDER = "\x00{}\x00"


def render(value: Any) -> SafeString:
    """`value` (scrubbed, then escaped) with its Markdown read as HTML; "" for none."""
    text = escape(scrub(value or "")).replace("\r\n", "\n")
    html: list[str] = []
    paragraph: list[str] = []
    lists = _Lists(html)
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        item = ITEM.match(line)
        if fence:  # a code block up to its closing fence (or the end)
            _close(paragraph, html, lists)
            body = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(fence.group(1)):
                body.append(lines[i])
                i += 1
            html.append(f"<pre><code>{chr(10).join(body)}</code></pre>")
        elif item:
            if paragraph:
                html.append(f"<p>{_inline(paragraph)}</p>")
                paragraph.clear()
            lists.item(len(item["indent"].expandtabs(4)), item["number"], item["text"])
        elif not line.strip():
            following = next((n for n in lines[i + 1 :] if n.strip()), "")
            if not (lists.open and (ITEM.match(following) or following.startswith((" ", "\t")))):
                _close(paragraph, html, lists)  # (a blank line between two items of a list keeps it one list)
        elif lists.open and line.startswith((" ", "\t")):  # an item's text on its next line
            lists.more(line.strip())
        else:
            lists.close()
            paragraph.append(line.strip())
        i += 1
    _close(paragraph, html, lists)
    return mark_safe("".join(html))  # noqa: S308 (every character of the text was escaped above)


def _close(paragraph: list[str], html: list[str], lists: _Lists) -> None:
    if paragraph:
        html.append(f"<p>{_inline(paragraph)}</p>")
        paragraph.clear()
    lists.close()


def _inline(lines: list[str]) -> str:
    """Code spans first (their text is read as written), then bold and italic; lines kept apart by <br>."""
    codes: list[str] = []

    def keep(match: re.Match[str]) -> str:
        codes.append(f"<code>{match.group(2).strip()}</code>")
        return PLACEHOLDER.format(len(codes) - 1)

    text = CODE.sub(keep, "<br>".join(lines))
    text = BOLD.sub(r"<strong>\2</strong>", text)
    text = ITALIC.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)


@dataclass
class _Lists:
    """The lists open at this point, outermost first: each its indentation and tag."""

    html: list[str]
    stack: list[tuple[int, str]] = field(default_factory=list)
    item_lines: list[str] = field(default_factory=list)

    @property
    def open(self) -> bool:
        return bool(self.stack)

    def item(self, indent: int, number: str | None, text: str) -> None:
        """An item of a bulleted list (`number` None) or a numbered one."""
        self._flush()
        tag = "ol" if number else "ul"
        while self.stack and indent < self.stack[-1][0]:
            self._end()
        if self.stack and indent == self.stack[-1][0] and tag != self.stack[-1][1]:
            self._end()  # (a numbered list right after a bulleted one at one depth: two lists)
        if not self.stack or indent > self.stack[-1][0]:
            start = f' start="{int(number)}"' if number and int(number) != 1 else ""  # (digits only)
            self.html.append(f"<{tag}{start}>")
            self.stack.append((indent, tag))
        else:
            self.html.append("</li>")
        self.html.append("<li>")
        self.item_lines.append(text)

    def more(self, text: str) -> None:
        self.item_lines.append(text)

    def close(self) -> None:
        self._flush()
        while self.stack:
            self._end()

    def _flush(self) -> None:
        if self.item_lines:
            self.html.append(_inline(self.item_lines))
            self.item_lines.clear()

    def _end(self) -> None:
        self._flush()
        _, tag = self.stack.pop()
        self.html.append(f"</li></{tag}>")
