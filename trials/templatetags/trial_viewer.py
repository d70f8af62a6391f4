"""Template helpers of the trial viewer: query-string links, durations, scrubbed JSON, a share's plain links."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

from django import template
from django.http import QueryDict
from django.utils import dateformat, timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from core.durations import duration
from trials.reading import markdown_text, side_by_side, text

register = template.Library()


@register.simple_tag(takes_context=True)
def url_q(context, base: str, **changes: Any) -> str:
    """`base` plus the current query string with `changes` applied (None or "" drops a key)."""
    params: QueryDict = context["request"].GET.copy()
    for key, value in changes.items():
        params.pop(key, None)
        if value not in (None, ""):
            params[key] = str(value)
    query = params.urlencode()
    return f"{base}?{query}" if query else base


@register.simple_tag(takes_context=True)
def sort_header(context, label: str, key: str) -> str:
    """A column header that sorts the list by `key`, ascending first, then descending; the arrow says which."""
    current = context["request"].GET.get("sort", "")
    descending = current == f"-{key}"
    wanted = key if descending or current != key else f"-{key}"
    arrow = " ▲" if current == key else " ▼" if descending else ""
    sort = "ascending" if current == key else "descending" if descending else "none"
    return format_html(
        '<a href="{}" aria-sort="{}" data-sort="{}">{}{}</a>',
        url_q(context, "", sort=wanted, page=None),
        sort,
        wanted,
        label,
        arrow,
    )


@register.filter
def required_for(field: Any) -> str:
    """ "always" when a form field is required, the kinds it is required for (`data-required-for`), or ""."""
    attrs = field.field.widget.attrs
    if field.field.required or attrs.get("required"):
        return "always"
    return attrs.get("data-required-for", "")


@register.filter
def scrub(value: Any) -> str:
    """Mask anything shaped like a credential (defence in depth; parsers scrub first)."""
    return text.scrub(value)


@register.filter
def explanation(value: Any) -> SafeString:
    """A grader's explanation, its Markdown read as a safe subset of HTML (trials.reading.markdown_text)."""
    return markdown_text.render(value)


@register.filter
def isolated(value: Any) -> str:
    return text.isolated(str(value))


@register.filter
def pretty(value: Any) -> str:
    return text.pretty_json(value)


@register.filter
def seconds(value: Any) -> str:
    """12.3 -> "12.3 s", 125 -> "2 min 5 s" (core.durations.duration)."""
    return duration(value)


@register.filter
def middle(value: Any, length: int = 24) -> str:
    """A long name cut in its middle, head and tail kept ("20250923_dr…aude-4-1-opus"): names that share
    a prefix (sonnet and opus runs of one agent) stay apart in a narrow column. The whole name goes in a title."""
    name = "" if value is None else str(value)
    if len(name) <= length:
        return name
    head = (length - 1) * 2 // 5
    return f"{name[:head]}…{name[len(name) - (length - 1 - head) :]}"


@register.filter
def configuration_cut(configuration: Any, length: int = 24) -> str:
    """A configuration's key cut in its middle, unless the cut hides its model ("inspec…→ generate"):
    then the model and the key's tail ("openai/gpt-4o…basic_agent_loop")."""
    read = configuration.get if isinstance(configuration, dict) else lambda f: getattr(configuration, f, "")
    key, model = str(read("key") or ""), str(read("model_name") or "")
    cut = middle(key, length)
    if not model or model not in key or model in cut:
        return cut
    tail = key[key.index(model) + len(model) :]
    if not tail:  # a key ending in its model keeps the model's end in a middle cut
        return cut
    room = max(length - len(model) - 1, 8)
    return model + (f"…{tail[len(tail) - room :]}" if len(tail) > room else tail)


@register.filter
def two_lines(value: Any, line: int = 14) -> SafeString | str:
    """A name on at most two lines of `line` characters: its tail whole on the second, where names that
    share a prefix differ (`…_claude-4-sonnet`, `…_claude-4-1-opus`); its head, cut with "…" if need be, on
    the first. The lines split after a separator where one is near. The whole name goes in a title."""
    name = "" if value is None else str(value)
    if len(name) <= line:
        return name
    if len(name) <= 2 * line:  # both halves whole: split after the separator nearest the middle
        splits = [at for at in range(len(name) - line, line + 1) if _splits_at(name, at)] or [len(name) - line]
        cut = min(splits, key=lambda at: (abs(2 * at - len(name)), -at))
        return format_html("{}<wbr>{}", name[:cut], name[cut:])
    cut = len(name) - line
    cut = next((at for at in range(cut, cut + line // 3) if _splits_at(name, at)), cut)
    return format_html("{}…<wbr>{}", name[: line - 1], name[cut:])


@register.filter
def name_beside(trial: Any) -> str:
    """A trial's name less the task and job names its row shows beside it, where it is made of them (TB1's
    `oom.1-of-1.2025-08-07__20-46-16` of task `oom`, job `2025-08-07__20-46-16`, is `…1-of-1`): the part
    that tells its attempts apart. Any other name whole."""
    name = str(trial.name)
    task, job = (trial.task.name if trial.task else ""), (trial.job.name if trial.job else "")
    if not task or not name.startswith(task):
        return name
    rest = name[len(task) :]
    rest = rest.removesuffix(job) if job else rest
    rest = rest.strip(text.NAME_BREAKS)
    return f"…{rest}" if rest else name


def _splits_at(name: str, at: int) -> bool:
    """Whether a line may end before name[at]: after a separator, never inside a run of them ("__")."""
    return name[at - 1] in text.NAME_BREAKS and name[at] not in text.NAME_BREAKS


@register.filter
def configuration_lines(configuration: Any, line: int = 16) -> SafeString | str:
    """A configuration's key on two lines (`two_lines`), unless that hides its model: then the model on the
    first line and what follows it in the key on the second ("openai/gpt-4o-mini", "chain_of_thought →…")."""
    read = configuration.get if isinstance(configuration, dict) else lambda f: getattr(configuration, f, "")
    key, model = str(read("key") or ""), str(read("model_name") or "")
    after = key[key.index(model) + len(model) :].lstrip("|_ ") if model and model in key else ""
    if len(key) <= 2 * line or not after:
        return two_lines(key, line)
    first = model if len(model) <= line else model[: line - 1] + "…"
    return format_html("{}<wbr> {}", first, after if len(after) <= line else after[: line - 1] + "…")


@register.simple_tag
def task_label(name: Any, dataset: Any = None, length: int = 0) -> SafeString | str:
    """A task named with its dataset ("56 · ic_ctf"): Inspect sample ids are bare numbers that recur
    across logs. `length` cuts each part in its middle; the whole goes in a title."""
    task = "" if name is None else str(name)
    if not task:
        return "–"
    data = str(dataset) if dataset else ""
    cut = (lambda v: middle(v, length)) if length else (lambda v: v)
    if not data:
        return format_html('<span class="task-label" title="{}">{}</span>', task, cut(task))
    # a long dataset keeps its own name, not its namespace ("inspect_evals/luce_intercode_ctf@0")
    short = data.rsplit("/", 1)[-1] if length and len(data) > length else data
    return format_html(
        '<span class="task-label" title="{} · {}">{} <span class="muted task-dataset">· {}</span></span>',
        task,
        data,
        cut(task),
        cut(short),
    )


DATETIME_FORMAT = "Y-m-d H:i:s T"  # one format on every page: 2026-11-26 04:12:33 UTC


@register.filter
def when(value: Any) -> SafeString | str:
    """A date-time in the one format of every page, in the site's zone, named; "–" for none."""
    if isinstance(value, datetime):
        local = timezone.localtime(value) if timezone.is_aware(value) else value
        shown = dateformat.format(local, DATETIME_FORMAT if timezone.is_aware(value) else "Y-m-d H:i:s")
        return format_html('<time datetime="{}">{}</time>', value.isoformat(), shown.strip())
    if isinstance(value, date):
        return format_html('<time datetime="{}">{}</time>', value.isoformat(), value.isoformat())
    return "–" if value in (None, "") else str(value)


@register.filter
def when_iso(value: str | None) -> SafeString | str:
    """`when` for a time kept as ISO text (a stored JSON result); text that isn't one is shown as is."""
    try:
        return when(datetime.fromisoformat(value)) if value else "–"
    except ValueError:
        return value or "–"


@register.filter
def thousands(value: Any) -> Any:
    """12345 -> "12,345"; anything but a whole number as it is."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value


@register.filter
def usd(value: Any) -> str:
    if not isinstance(value, int | float):
        return "–"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


@register.filter
def as_text(value: Any) -> str:
    """A list joined with commas, a mapping as JSON, anything else as text (all scrubbed)."""
    if value is None or value == "":
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(as_text(v) for v in value)
    if isinstance(value, dict):
        return text.pretty_json(value)
    return text.scrub(value)


@register.filter
def listed(value: Any) -> Any:
    """A list as "a, b, c" (a QC item's evidence refs in its history), anything else as it is."""
    return ", ".join(str(v) for v in value) if isinstance(value, list) else value


@register.simple_tag
def compare_with(trial: Any) -> Any:
    """Other trials of the trial's task, for its "compare with…" menu (one query)."""
    return side_by_side.compare_with(trial)


LINK = re.compile(r"<a\b([^>]*)>(.*?)</a>", re.S)
HREF = re.compile(r'\s+href="([^"]*)"')


def _plain_link(match: re.Match[str]) -> str:
    attributes, inner = match.group(1), match.group(2)
    href = HREF.search(attributes)
    if href and href.group(1).startswith("#"):
        return match.group(0)
    return f"<span{HREF.sub('', attributes)}>{inner}</span>"


@register.filter
def unlinked(html: str) -> SafeString:
    """`html` with every link out of the page made a `<span>` keeping its id, class and title (a link within
    the page stays): a share shows the comparison page's includes, whose links would only ask a visitor for a
    login. Only our templates' rendered output goes through it, where untrusted text is escaped, so no `<a`
    in that text is a tag."""
    return mark_safe(LINK.sub(_plain_link, str(conditional_escape(html))))  # (escaped above; tags only rewritten)
