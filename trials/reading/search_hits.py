"""Search across trials: the steps of every trial that hold a needle, a page at a time.

The word index answers (`trials.search.matching_everywhere`); each hit then gets its trial,
job, task and configuration in the same query, a snippet cut from the step's stored body
(scrubbed like every text on its way out, then escaped, the match in `<mark>`) and its
step permalink. A page costs the same few queries whatever the number of steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.http import QueryDict
from django.utils.html import escape

from core.ids import parse_pk
from trials import query as trials_query
from trials import search
from trials.filters import TrialFilter
from trials.models import Step, StepText, ToolCall, Trajectory, Trial, step_url
from trials.reading.steps import main_trajectory
from trials.reading.text import scrub

HITS_PAGE = 50
MAX_HITS_PAGE = 10_000  # (OFFSET past this costs more than anyone pages)
SNIPPET_CONTEXT = 80  # characters shown either side of the match
SCRUB_MARGIN = 2000  # scrubbed before cutting, so a secret at the snippet's edge is masked whole
FILTER_KEYS = ("job", "configuration", "task")
WHERE = "where"  # a query of the trials query language (trials/query.py): only its trials are searched


def dataset_label(name: str | None, version: str | None) -> str:
    """A dataset as `Dataset.__str__` names it (name@version), from a values() row."""
    return f"{name}@{version}" if name and version else name or ""


@dataclass
class Hits:
    query: str
    page: int
    hits: list[dict]
    has_more: bool
    pending_trials: int  # imported but not yet in the word index: not searched
    where_error: str = ""  # why `where` cannot run (then nothing is found)


def needle_of(query: str) -> str:
    return query.replace("\x00", "").strip().lower()


def requested_page(value: str | None) -> int:
    return min(max(1, parse_pk(value) or 1), MAX_HITS_PAGE)


def matching_texts(params: QueryDict) -> QuerySet[StepText]:
    """The search texts matching `q`, narrowed by the trial filters (job, configuration, task) and `tool`."""
    texts = search.matching_everywhere(needle_of(str(params.get("q", ""))))
    wanted = QueryDict(mutable=True)
    for key in FILTER_KEYS:
        if value := str(params.get(key, "")).strip():
            wanted[key] = value
    if where := str(params.get(WHERE, "")).strip():
        wanted["q"] = where  # the trial list's `q`: a query that cannot run narrows to nothing
    if wanted:  # the trial list's own filters: a part of a name, or an id
        texts = texts.filter(trial__in=TrialFilter(wanted, queryset=Trial.objects.all()).qs.values("pk"))
    if tool := str(params.get("tool", "")).strip():
        # part of the name, any case, as the other filters; EXISTS per hit through the tool call's step
        # index: an IN list would hold every call of a common tool
        calls = ToolCall.objects.filter(step_id=OuterRef("step_id"), function_name__icontains=tool)
        texts = texts.filter(Exists(calls))
    return texts


def where_error(params: Mapping[str, Any]) -> str:
    """Why the `where` query cannot run (where and what was expected), or "" when it can or is empty."""
    text = str(params.get(WHERE, "")).strip()
    try:
        trials_query.parse(text) if text else None
    except trials_query.QueryError as error:
        return str(error)
    return ""


def search_trials(params: QueryDict) -> Hits:
    """One page (`?page=`, HITS_PAGE hits) of the steps matching `?q=`, the newest steps first.

    The page's step ids first, from the index alone (joining every hit of a common word to
    its trial before the sort cost three times as much), then their facts; within the page,
    a trial's hits in step order.
    """
    query = str(params.get("q", "")).strip()
    page = requested_page(params.get("page"))
    start = (page - 1) * HITS_PAGE
    ids = list(
        matching_texts(params).order_by("-step_id").values_list("step_id", flat=True)[start : start + HITS_PAGE + 1]
    )
    more, ids = len(ids) > HITS_PAGE, ids[:HITS_PAGE]
    rows = sorted(
        StepText.objects.filter(step_id__in=ids).values(
            "step_id",
            "trial_id",
            "step__index",
            "step__trajectory_id",
            "trial__name",
            "trial__status",
            "trial__reward",
            "trial__job_id",
            "trial__job__name",
            "trial__task__name",
            "trial__task__dataset_id",
            "trial__task__dataset__name",
            "trial__task__dataset__version",
            "trial__configuration_id",
            "trial__configuration__key",
            "trial__configuration__model_name",
        ),
        key=lambda r: (-r["trial_id"], r["step_id"]),
    )
    snippets = _snippets([r["step_id"] for r in rows], needle_of(query))
    permalinks = _permalinks(rows)
    hits = [
        {
            "trial": {
                "id": r["trial_id"],
                "name": r["trial__name"],
                "status": r["trial__status"],
                "reward": r["trial__reward"],
            },
            "job": {"id": r["trial__job_id"], "name": r["trial__job__name"]} if r["trial__job_id"] else None,
            "task": r["trial__task__name"],
            "dataset_id": r["trial__task__dataset_id"],
            "dataset": dataset_label(r["trial__task__dataset__name"], r["trial__task__dataset__version"]),
            "configuration": (
                {
                    "id": r["trial__configuration_id"],
                    "key": r["trial__configuration__key"],
                    "model_name": r["trial__configuration__model_name"],
                }
                if r["trial__configuration_id"]
                else None
            ),
            "step": r["step__index"] + 1,
            "url": permalinks[r["step_id"]],
            **snippets.get(r["step_id"], {"snippet": "", "snippet_html": ""}),
        }
        for r in rows
    ]
    pending = Trial.objects.filter(step_text_indexed=False).count() if query else 0
    return Hits(
        query=query, page=page, hits=hits, has_more=more, pending_trials=pending, where_error=where_error(params)
    )


def _permalinks(rows: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Each hit's step permalink: /trials/<id>/steps/<n>/, with ?t= when the step is not in the main trajectory."""
    trajectories: dict[int, list[Trajectory]] = {}
    for t in Trajectory.objects.filter(trial_id__in={r["trial_id"] for r in rows}).order_by("position", "pk"):
        trajectories.setdefault(t.trial_id, []).append(t)
    links = {}
    for r in rows:
        main = main_trajectory(None, trajectories.get(r["trial_id"], []))  # type: ignore[arg-type]
        off_main = None if main is not None and main.pk == r["step__trajectory_id"] else r["step__trajectory_id"]
        links[r["step_id"]] = step_url(r["trial_id"], r["step__index"] + 1, off_main)
    return links


def _snippets(step_pks: list[int], needle: str) -> dict[int, dict[str, str]]:
    """Each step's text around the first match, from its stored body (redactions already applied there)."""
    out = {}
    for pk, _, step in search.stored_steps(Step.objects.filter(pk__in=step_pks)):
        out[pk] = snippet(search.step_text(step), needle)
    return out


def snippet(text: str, needle: str) -> dict[str, str]:
    """The text around the first `needle` (lower-cased): plain, and as HTML (escaped, each match in <mark>)."""
    at = text.lower().find(needle) if len(text.lower()) == len(text) else -1
    if at >= 0:  # scrubbed around the match, then the match found again (a mask moves it)
        text = scrub(text[max(0, at - SCRUB_MARGIN) : at + len(needle) + SCRUB_MARGIN])
        at = text.lower().find(needle)
    else:
        text = scrub(text[: 2 * SCRUB_MARGIN])
    if at < 0:  # (the needle was inside a masked secret, or lower-casing moved it)
        cut = text[: 2 * SNIPPET_CONTEXT]
        return {"snippet": cut, "snippet_html": escape(cut)}
    start, end = max(0, at - SNIPPET_CONTEXT), at + len(needle) + SNIPPET_CONTEXT
    cut = ("…" if start > 0 else "") + text[start:end] + ("…" if end < len(text) else "")
    return {"snippet": cut, "snippet_html": highlighted(cut, needle)}


def highlighted(text: str, needle: str) -> str:
    """`text` escaped, each case-insensitive occurrence of `needle` wrapped in <mark>."""
    lowered, parts, i = text.lower(), [], 0
    if len(lowered) != len(text) or not needle:
        return escape(text)
    while (at := lowered.find(needle, i)) >= 0:
        parts += [escape(text[i:at]), f"<mark>{escape(text[at : at + len(needle)])}</mark>"]
        i = at + len(needle)
    parts.append(escape(text[i:]))
    return "".join(parts)
