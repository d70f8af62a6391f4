"""Query helpers behind the trial page, the trial and job lists, and the viewer API.

The trial page must cost the same whatever the trajectory length, so nothing here ever
loads a whole trajectory: steps come in index windows (the unique (trajectory, index)
index serves them), long texts are cut in the database, and everything hanging off a
step (tool calls, observations, permissions, context records) is fetched for the window
only. Search runs in the database over each step's search text (`StepText`) and returns step numbers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db.models import Avg, Count, F, FloatField, Prefetch, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Length, Substr
from django.http import QueryDict
from django.urls import reverse

from benchviewer.ids import parse_pk
from trials import completeness, search
from trials.filters import TrialFilter
from trials.ingest.formats.atif import names_trajectory
from trials.models import ContextRecord, Job, ObservationResult, PermissionDecision, Step, ToolCall, Trajectory, Trial

STEP_WINDOW = 50
TEXT_PREVIEW = 4000  # characters of a message / reasoning shown before "show all"
ARGUMENTS_PREVIEW = 4000
SEARCH_PAGE = 50
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


# ---------------------------------------------------------------- trial lists


TRIAL_SORTS: dict[str, tuple[str, ...]] = {
    "newest": ("-pk",),
    "oldest": ("pk",),
    "name": ("name", "pk"),
    "task": ("task__name", "attempt", "pk"),
    "reward": (F("reward").asc(nulls_first=True), "pk"),
    "-reward": (F("reward").desc(nulls_last=True), "pk"),
    "duration": (F("duration_sec").asc(nulls_first=True), "pk"),
    "-duration": (F("duration_sec").desc(nulls_last=True), "pk"),
    "cost": (F("cost_usd").asc(nulls_first=True), "pk"),
    "-cost": (F("cost_usd").desc(nulls_last=True), "pk"),
    "status": ("status", "pk"),
}
SORT_LABELS = {
    "newest": "newest first",
    "oldest": "oldest first",
    "name": "name",
    "task": "task",
    "reward": "reward ↑",
    "-reward": "reward ↓",
    "duration": "duration ↑",
    "-duration": "duration ↓",
    "cost": "cost ↑",
    "-cost": "cost ↓",
    "status": "status",
}


def trial_list(params: QueryDict) -> tuple[TrialFilter, QuerySet[Trial]]:
    """The filtered and sorted trial list for a query string (page, tab, q… are ignored)."""
    filterset = TrialFilter(params, queryset=Trial.objects.for_list())
    qs = filterset.qs
    if params.get("untriaged"):
        qs = qs.untriaged()
    if params.get("uncategorised"):
        qs = qs.filter(failure_category="")
    return filterset, qs.order_by(*TRIAL_SORTS.get(params.get("sort", ""), TRIAL_SORTS["newest"]))


LIST_KEYS = set(TrialFilter.base_filters) | {"sort", "untriaged", "uncategorised"}


def list_query(params: QueryDict) -> str:
    """The part of a trial-list URL that defines the list (not its page): carried to trials."""
    kept = QueryDict(mutable=True)
    for key in sorted(params):
        if key in LIST_KEYS:
            kept.setlist(key, [v for v in params.getlist(key) if v != ""])
    return kept.urlencode()


@dataclass
class Neighbours:
    position: int  # 1-based; 0 when the trial is not in the list
    total: int
    prev_pk: int | None = None
    next_pk: int | None = None


def neighbours(trial: Trial, query: str) -> Neighbours:
    """Where the trial sits in the list it was opened from, and its previous / next trial."""
    _, qs = trial_list(QueryDict(query))
    ids = list(qs.values_list("pk", flat=True))
    if trial.pk not in ids:
        return Neighbours(0, len(ids))
    i = ids.index(trial.pk)
    return Neighbours(
        position=i + 1,
        total=len(ids),
        prev_pk=ids[i - 1] if i > 0 else None,
        next_pk=ids[i + 1] if i + 1 < len(ids) else None,
    )


# ---------------------------------------------------------------- job page


TASK_SORTS = {
    "task": ("task_name",),
    "reward": (F("mean_reward").asc(nulls_first=True), "task_name"),
    "-reward": (F("mean_reward").desc(nulls_last=True), "task_name"),
    "passed": ("n_passed", "task_name"),
    "-passed": ("-n_passed", "task_name"),
    "duration": (F("mean_duration").asc(nulls_first=True), "task_name"),
    "-duration": (F("mean_duration").desc(nulls_last=True), "task_name"),
    "cost": (F("cost").asc(nulls_first=True), "task_name"),
    "-cost": (F("cost").desc(nulls_last=True), "task_name"),
    "-failed": ("-n_failed", "task_name"),
}
TASK_SORT_LABELS = {
    "task": "task name",
    "reward": "mean reward ↑",
    "-reward": "mean reward ↓",
    "passed": "passed ↑",
    "-passed": "passed ↓",
    "duration": "mean duration ↑",
    "-duration": "mean duration ↓",
    "cost": "cost ↑",
    "-cost": "cost ↓",
    "-failed": "failed ↓",
}


def job_task_rows(job: Job, params: QueryDict) -> QuerySet:
    """One row per task of the job: mean reward, passes, duration, tokens, cost."""
    qs = job.trials.all()
    if params.get("q"):
        qs = qs.filter(task__name__icontains=params["q"])
    if params.get("role"):
        qs = qs.filter(configuration__role=params["role"])
    rows = (
        qs.annotate(task_name=Coalesce("task__name", Value("(no task)")))
        .values("task_name", "task_id")
        .annotate(
            n=Count("pk"),
            n_passed=Count("pk", filter=Q(status=Trial.Status.PASSED)),
            n_failed=Count("pk", filter=Q(status__in=Trial.FAILED_STATUSES)),
            mean_reward=Avg("reward"),
            mean_duration=Avg("duration_sec"),
            tokens=Sum(Coalesce("input_tokens", 0) + Coalesce("output_tokens", 0)),
            cost=Sum("cost_usd", output_field=FloatField()),
        )
    )
    if params.get("failing"):
        rows = rows.filter(n_failed__gt=0)
    return rows.order_by(*TASK_SORTS.get(params.get("sort", ""), TASK_SORTS["task"]))


def exception_types_by_task(job: Job, task_ids: list[int | None]) -> dict[int | None, list[str]]:
    pairs = (
        job.trials.filter(task_id__in=[t for t in task_ids if t is not None])
        .exclude(exception_type="")
        .values_list("task_id", "exception_type")
        .distinct()
    )
    out: dict[int | None, list[str]] = {}
    for task_id, exc in pairs:
        out.setdefault(task_id, []).append(exc)
    return out


# ---------------------------------------------------------------- trajectories


def main_trajectory(trial: Trial, trajectories: list[Trajectory]) -> Trajectory | None:
    for t in trajectories:
        if t.role in ("main", "step"):
            return t
    return trajectories[0] if trajectories else None


MAX_PAGE = 10**6  # (a page past every trajectory's end is empty; the offset stays within what SQL takes)


def requested_page(value: str | None) -> int:
    """`?page=` as a number from 1; anything else is page 1."""
    return min(max(1, parse_pk(value) or 1), MAX_PAGE)


def requested_offset(value: str | None) -> int:
    """`?offset=` (search results) as a number from 0; anything else is 0."""
    return min(parse_pk(value) or 0, MAX_PAGE * SEARCH_PAGE)


def pick_trajectory(trial: Trial, trajectories: list[Trajectory], wanted: str | None) -> Trajectory | None:
    if (pk := parse_pk(wanted)) is not None:
        for t in trajectories:
            if t.pk == pk:
                return t
    return main_trajectory(trial, trajectories)


def window_start(step_number: int) -> int:
    """The 0-based index that starts the window holding 1-based step number n."""
    return max(0, (step_number - 1) // STEP_WINDOW * STEP_WINDOW)


@dataclass
class ToolCallView:
    call: ToolCall
    arguments_text: str
    arguments_truncated: bool
    observation: ObservationResult | None = None
    permissions: list[PermissionDecision] = field(default_factory=list)
    context: list[ContextRecord] = field(default_factory=list)
    subagents: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StepView:
    step: Step
    number: int  # 1-based position in its trajectory (the anchor / permalink number)
    seconds_since_previous: float | None
    message: str
    message_truncated: bool
    reasoning: str
    reasoning_truncated: bool
    images: list[str]
    calls: list[ToolCallView]
    other_observations: list[tuple[ObservationResult, list[dict[str, Any]]]]
    permissions: list[PermissionDecision]  # on the step but on none of its calls
    context: list[ContextRecord]
    is_compaction: bool
    token_pct: dict[str, float]
    tokens_label: str = ""
    permalink: str = ""

    @property
    def flagged(self) -> bool:
        return any(p.side_effect_after_denial for p in self.all_permissions)

    @property
    def all_permissions(self) -> list[PermissionDecision]:
        return self.permissions + [p for c in self.calls for p in c.permissions]


@dataclass
class StepWindow:
    trajectory: Trajectory
    start: int  # 0-based index of the first step shown
    steps: list[StepView]
    total: int

    @property
    def end(self) -> int:
        return self.start + len(self.steps)

    @property
    def page(self) -> int:
        return self.start // STEP_WINDOW + 1

    @property
    def pages(self) -> int:
        return max(1, (self.total + STEP_WINDOW - 1) // STEP_WINDOW)

    @property
    def prev_page(self) -> int | None:
        return self.page - 1 if self.page > 1 else None

    @property
    def next_page(self) -> int | None:
        return self.page + 1 if self.page < self.pages else None


IMAGE_RE = re.compile(r"\[image: ([^\]\n]*)\]")
CONTEXT_INLINE_KINDS = ("item", "selection", "budget", "assembly", "injection", "compaction", "missing", "redaction")


def _subagent_links(refs: list[dict[str, Any]], trajectories: list[Trajectory]) -> list[dict[str, Any]]:
    """Subagent refs of an observation, each with the trajectory of this trial it names."""
    out = []
    for ref in refs:
        target = None
        path = str(ref.get("trajectory_path") or "")
        for t in trajectories:
            if names_trajectory(ref, t.path, t.trajectory_id, t.session_id, t.role):
                target = t
                break
        summary = (ref.get("extra") or {}).get("summary") if isinstance(ref.get("extra"), dict) else None
        out.append({"ref": ref, "label": summary or path or ref.get("session_id") or "subagent", "trajectory": target})
    return out


def step_window(trial: Trial, trajectory: Trajectory, start: int, trajectories: list[Trajectory]) -> StepWindow:
    """Steps [start, start + STEP_WINDOW) of one trajectory with everything shown inline.

    A fixed number of queries whatever the trajectory length: steps (one before the window
    for "time since previous"), tool calls, observations, permissions, context records.
    """
    start = max(0, start)
    rows = list(
        Step.objects.filter(trajectory=trajectory, index__gte=max(0, start - 1), index__lt=start + STEP_WINDOW)
        .defer("message_text", "reasoning")
        .annotate(
            message_head=Substr("message_text", 1, TEXT_PREVIEW),
            message_len=Length("message_text"),
            reasoning_head=Substr("reasoning", 1, TEXT_PREVIEW),
            reasoning_len=Length("reasoning"),
        )
        .prefetch_related(
            Prefetch("tool_calls", queryset=ToolCall.objects.order_by("pk")),
            Prefetch("observations", queryset=ObservationResult.objects.order_by("pk")),
        )
        .order_by("index")
    )
    previous = rows.pop(0) if rows and rows[0].index < start else None
    step_ids = {s.step_id for s in rows}
    call_ids = {c.tool_call_id for s in rows for c in s.tool_calls.all() if c.tool_call_id}
    permissions = list(
        PermissionDecision.objects.filter(trial=trial)
        .filter(Q(step_id__in=step_ids) | Q(tool_call_id__in=call_ids))
        .order_by("pk")
    )
    context = list(
        ContextRecord.objects.filter(trial=trial, kind__in=CONTEXT_INLINE_KINDS)
        .filter(Q(step_id__in=step_ids) | Q(tool_call_id__in=call_ids))
        .exclude(kind="selection", status="")  # the per-item rows say it all
        .order_by("pk")
    )
    # One scale for the whole file (set at import); trajectories imported before it: this window's.
    window_max = max((s.prompt_tokens or 0) + (s.completion_tokens or 0) for s in rows) if rows else 0
    max_tokens = max(trajectory.max_step_tokens or 0, window_max, 1)
    # Permalinks are built from one reverse(): a url tag per step is a measurable cost.
    base = reverse("trial-step", args=[trial.pk, 0]).removesuffix("0/")
    main = main_trajectory(trial, trajectories)
    suffix = "" if trajectory == main else f"?t={trajectory.pk}"
    views = []
    for step in rows:
        since = None
        if previous is not None and previous.timestamp and step.timestamp:
            since = (step.timestamp - previous.timestamp).total_seconds()
        view = _step_view(step, since, permissions, context, trajectories, max_tokens)
        view.permalink = f"{base}{view.number}/{suffix}"
        views.append(view)
        previous = step
    return StepWindow(trajectory=trajectory, start=start, steps=views, total=trajectory.step_count)


def _step_view(
    step: Step,
    since: float | None,
    permissions: list[PermissionDecision],
    context: list[ContextRecord],
    trajectories: list[Trajectory],
    max_tokens: int,
) -> StepView:
    observations = list(step.observations.all())
    for i, obs in enumerate(observations):
        obs.position = i  # its place in observation.results, for "show all"
    by_call = {o.source_call_id: o for o in observations if o.source_call_id}
    calls = []
    claimed: set[int] = set()
    for call in step.tool_calls.all():
        args = pretty_json(call.arguments) if call.arguments is not None else ""
        obs = by_call.get(call.tool_call_id)
        if obs is not None:
            claimed.add(obs.pk)
        call_perms = [p for p in permissions if call.tool_call_id and p.tool_call_id == call.tool_call_id]
        call_ctx = [c for c in context if call.tool_call_id and c.tool_call_id == call.tool_call_id]
        calls.append(
            ToolCallView(
                call=call,
                arguments_text=args[:ARGUMENTS_PREVIEW],
                arguments_truncated=len(args) > ARGUMENTS_PREVIEW,
                observation=obs,
                permissions=call_perms,
                context=call_ctx,
                subagents=_subagent_links(obs.subagent_refs, trajectories) if obs else [],
            )
        )
    call_ids = {c.call.tool_call_id for c in calls}
    step_perms = [
        p for p in permissions if p.step_id == step.step_id and not (p.tool_call_id and p.tool_call_id in call_ids)
    ]
    step_ctx = [c for c in context if c.step_id == step.step_id and c.tool_call_id not in call_ids]
    others = [(o, _subagent_links(o.subagent_refs, trajectories)) for o in observations if o.pk not in claimed]
    prompt, cached, completion = step.prompt_tokens or 0, step.cached_tokens or 0, step.completion_tokens or 0
    return StepView(
        step=step,
        number=step.index + 1,
        seconds_since_previous=since,
        message=scrub(step.message_head),
        message_truncated=(step.message_len or 0) > TEXT_PREVIEW,
        reasoning=scrub(step.reasoning_head),
        reasoning_truncated=(step.reasoning_len or 0) > TEXT_PREVIEW,
        images=IMAGE_RE.findall(step.message_head or ""),
        calls=calls,
        other_observations=others,
        permissions=step_perms,
        context=step_ctx,
        is_compaction=bool(step.context_management),
        token_pct={
            "cached": round(100 * min(cached, prompt) / max_tokens, 1),
            "prompt": round(100 * max(prompt - cached, 0) / max_tokens, 1),
            "completion": round(100 * completion / max_tokens, 1),
        },
        tokens_label=" · ".join(
            part
            for part in (
                f"{prompt} in",
                f"{cached} cached" if step.cached_tokens is not None else "",  # not "0" when the file says nothing
                f"{completion} out",
            )
            if part
        ),
    )


def referenced_from(trial: Trial, trajectory: Trajectory, trajectories: list[Trajectory]) -> list[dict[str, Any]]:
    """Steps of other trajectories whose observations point at this (subagent) trajectory."""
    if trajectory.role in ("main", "step"):
        return []
    out = []
    observations = (
        ObservationResult.objects.filter(step__trial=trial)
        .exclude(subagent_refs=[])
        .select_related("step")
        .only("subagent_refs", "step__index", "step__trajectory_id", "step__step_id")
    )
    for obs in observations:
        for link in _subagent_links(obs.subagent_refs, trajectories):
            if link["trajectory"] is not None and link["trajectory"].pk == trajectory.pk:
                out.append({"trajectory_id": obs.step.trajectory_id, "number": obs.step.index + 1})
    return out


def continuation_neighbours(trajectory: Trajectory, trajectories: list[Trajectory]) -> dict[str, Trajectory | None]:
    """The previous / next segment of a main trajectory split into .cont-N files."""
    chain = [t for t in trajectories if t.role in ("main", "continuation") and t.step_name == trajectory.step_name]
    if trajectory not in chain:
        return {"previous": None, "next": None}
    i = chain.index(trajectory)
    return {"previous": chain[i - 1] if i > 0 else None, "next": chain[i + 1] if i + 1 < len(chain) else None}


# ---------------------------------------------------------------- search


@dataclass
class SearchResult:
    matches: list[dict]
    more: bool
    word_starts_only: bool  # found through the word index: a match inside a word may be missing


def search_steps(
    trial: Trial, query: str, offset: int = 0, limit: int = SEARCH_PAGE, inside_words: bool = False
) -> SearchResult:
    """Matches of `query` in the trial's trajectories, found by the database.

    Up to `limit` matches in (trajectory, step) order from `offset`, and whether there are
    more; the page pages with `offset`, so a million matches cost one page. By default the
    word index answers, which finds the needle where a word starts ("error" in "error: x",
    not in "TypeError"); `inside_words` scans for it anywhere, as does a search the index
    finds nothing for.
    """
    needle = query.replace("\x00", "").strip().lower()  # (a NUL matched every step)
    if not needle:
        return SearchResult([], False, False)

    # (trial, trajectory, index) order is the Step index: the scan stops after a page of
    # matches. Trajectories are written in position order, so their ids follow it.
    def page(steps) -> list[dict]:
        return list(
            steps.order_by("trajectory_id", "index").values("trajectory_id", "index", "source", "step_id")[
                offset : offset + limit + 1
            ]
        )

    indexed = search.uses_index(trial, needle) and not inside_words
    rows = page(search.matching(trial, needle) if indexed else search.scan(trial, needle))
    if not rows and indexed:
        indexed, rows = False, page(search.scan(trial, needle))  # before saying "no match"
    matches = [
        {"trajectory": r["trajectory_id"], "number": r["index"] + 1, "step_id": r["step_id"], "source": r["source"]}
        for r in rows[:limit]
    ]
    return SearchResult(matches, len(rows) > limit, word_starts_only=indexed)


# ---------------------------------------------------------------- one step in full


def step_detail(step: Step) -> dict[str, Any]:
    """Everything of one step, for "show all" on the page (loaded on demand)."""
    read = step.trajectory.read_step(step.raw, step.index)  # (AgentV: observations are its calls' outputs)
    raw = read.raw  # (a step that is not an object: what the importer put in its place)
    return {
        "number": step.index + 1,
        "step_id": step.step_id,
        "source": step.source,
        "timestamp": step.timestamp.isoformat() if step.timestamp else None,
        "model_name": step.model_name,
        "message": scrub(step.message_text),
        "reasoning": scrub(step.reasoning),
        "tool_calls": [
            {
                "tool_call_id": c.tool_call_id,
                "function_name": c.function_name,
                "arguments": scrub_json(c.arguments),
                "arguments_text": pretty_json(c.arguments) if c.arguments is not None else "",
            }
            for c in step.tool_calls.order_by("pk")
        ],
        "observations": [
            {
                "source_call_id": o.source_call_id,
                "content": scrub(o.content_text),
                "subagent_trajectory_ref": scrub_json(o.subagent_refs) or None,
            }
            for o in read.observations
        ],
        "metrics": scrub_json(raw.get("metrics")),
        "is_copied_context": step.is_copied_context,
        "extra": scrub_json(raw.get("extra")),
    }


# ---------------------------------------------------------------- trial tabs


def header_facts(trial: Trial, trajectories: list[Trajectory]) -> dict[str, Any]:
    main = main_trajectory(trial, trajectories)
    agent = (main.agent if main else {}) or {}
    config = trial.configuration
    bench = trial.benchmark or {}
    refs = {**(trial.refs or {})}
    for key in ("harborJobRef", "harborTrialRef", "taskTomlRef", "datasetRef"):
        if bench.get(key):
            refs.setdefault(key, bench[key])
    # A joined evidence pack's refs, as written: where the trial's own file (its stored path)
    # took a ref's place, or no file backs it, the page says what the pack claimed.
    claimed = ((trial.documents or {}).get("evidence_pack") or {}).get("refs")
    claimed = claimed if isinstance(claimed, dict) else {}
    ref_rows = []
    for key in sorted(refs.keys() | claimed.keys()):
        value = refs.get(key)
        ref_rows.append(
            {"key": key, "value": value, "claimed": claimed[key] if claimed.get(key, value) != value else None}
        )
    total_tokens = None
    if trial.input_tokens is not None or trial.output_tokens is not None:
        total_tokens = (trial.input_tokens or 0) + (trial.output_tokens or 0)
    return {
        "agent_name": (config.agent_name if config else "") or agent.get("name", ""),
        "agent_version": (config.agent_version if config else "") or agent.get("version", ""),
        "model_name": (config.model_name if config else "") or agent.get("model_name", ""),
        "refs": ref_rows,
        "correlation": sorted((trial.runtime_correlation or {}).items()),
        "provenance": sorted((trial.provenance or {}).items()),
        "total_tokens": total_tokens,
    }


PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")


def phase_bar(trial: Trial) -> list[dict[str, Any]]:
    phases = trial.phases or {}
    rows = [(name, (phases.get(name) or {}).get("seconds")) for name in PHASES if name in phases]
    total = sum(s for _, s in rows if isinstance(s, int | float)) or 0
    return [
        {
            "name": name,
            "label": name.replace("_", " "),
            "seconds": s,
            "pct": round(100 * s / total, 2) if total and isinstance(s, int | float) else 0,
        }
        for name, s in rows
    ]


def trial_completeness(trial: Trial) -> dict[str, Any]:
    return completeness.evaluate(trial.benchmark, trial.runtime_correlation, trial.refs)


CONTEXT_SECTIONS = (
    ("envelope", "Envelopes (runtime ids)"),
    ("item", "Context items"),
    ("selection", "Selection: selected and omitted"),
    ("budget", "Budget and truncation"),
    ("assembly", "Assembly (what a model request was built from)"),
    ("injection", "Injection"),
    ("missing", "Missing context"),
    ("compaction", "Compaction"),
    ("redaction", "Redactions"),
    ("event", "Evidence exports (refs, not payloads)"),
)
# Runtime-only statuses a context record may carry but never decides (ACTX-AR-GOV-001).
RUNTIME_STATUS_KEYS = ("status", "turn_status", "task_status", "tool_status", "runtime_status", "approval_status")
RUNTIME_STATUSES = frozenset({"completed", "complete", "failed", "approved", "succeeded", "success", "passed"})


def context_records(trial: Trial, kind: str | None = None) -> list[dict[str, Any]]:
    """The trial's context records as summaries: every kind but raw events (except exports),
    with the reason and policy refs of a separate redaction record joined onto its item."""
    records = trial.context_records.exclude(Q(kind="event") & ~Q(data__event_type="context.exported"))
    if kind:
        records = records.filter(kind=kind)
    summaries = [record_summary(r) for r in records.order_by("pk")]
    redactions = {}
    for r in trial.context_records.filter(kind="redaction").order_by("pk"):
        summary = record_summary(r)
        redactions.setdefault(summary["item_id"], summary)
    for summary in summaries:
        found = redactions.get(summary.get("item_id")) if summary["kind"] == "item" else None
        if found and summary["status"] == "redacted":
            summary["reason"] = summary["reason"] or found["reason"]
            summary["policy_refs"] = summary["policy_refs"] or found["policy_refs"]
            summary["redaction_record"] = found["record_id"]
    return summaries


def context_sections(trial: Trial) -> list[dict[str, Any]]:
    """The trial's context records grouped for the Context tab (events themselves are omitted)."""
    records = context_records(trial)
    sections = []
    for kind, title in CONTEXT_SECTIONS:
        rows = [r for r in records if r["kind"] == kind]
        if kind == "selection":
            groups: dict[str, dict[str, Any]] = {}
            for r in rows:
                sel_id = r["selection_id"] or r["record_id"]
                group = groups.setdefault(sel_id, {"id": sel_id, "record": None, "selected": [], "omitted": []})
                if r["status"] in ("selected", "omitted"):
                    group[r["status"]].append(r)
                else:
                    group["record"] = r
            sections.append({"kind": kind, "title": title, "groups": list(groups.values()), "count": len(groups)})
        else:
            sections.append({"kind": kind, "title": title, "records": rows, "count": len(rows)})
    return sections


def record_summary(record: ContextRecord) -> dict[str, Any]:
    """The facts of one context record under stable names, for pages and the API."""
    data = record.data or {}
    out: dict[str, Any] = {
        "pk": record.pk,
        "kind": record.kind,
        "record_id": record.record_id,
        "context_id": record.context_id,
        "status": record.status,
        "reason": scrub(record.reason),
        "redaction_state": record.redaction_state,
        "step_id": record.step_id,
        "tool_call_id": record.tool_call_id,
        "step_number": int(record.step_id) if record.step_id.isdigit() and int(record.step_id) > 0 else None,
        "correlation": scrub_json(record.correlation),
    }
    if record.kind == "item":
        redaction = data.get("redaction") if isinstance(data.get("redaction"), dict) else {}
        out |= {
            "reason": out["reason"] or scrub(data.get("reason") or redaction.get("reason") or ""),  # the item's own
            "item_id": data.get("item_id"),
            "context_kind": data.get("context_kind"),
            "title": scrub(data.get("title")),
            "sensitivity": data.get("sensitivity"),
            "source_refs": scrub_json(data.get("source_refs") or []),
            "policy_refs": scrub_json(
                data.get("policy_refs") or (data.get("redaction") or {}).get("policy_refs") or []
            ),
            "redaction": scrub_json(data.get("redaction")),
        }
    elif record.kind == "selection":
        out |= {"selection_id": data.get("selection_id"), "item_id": data.get("item_id")}
    elif record.kind == "budget":
        keys = ("max_tokens", "reserved_tokens", "actual_tokens", "overflow_strategy", "truncation_records")
        out |= {k: scrub_json(data.get(k)) for k in keys}
    elif record.kind in ("assembly", "injection"):
        out |= {
            "target": data.get("target"),
            "model_request_id": data.get("model_request_id"),
            "source_item_refs": scrub_json(data.get("source_item_refs") or []),
            "source_refs": scrub_json(data.get("source_refs") or []),
        }
    elif record.kind == "missing":
        out |= {
            "owner": scrub_json(data.get("owner")),
            "requested_action": scrub_json(data.get("requested_action")),
            "safe_summary": scrub_json(data.get("safe_summary")),
        }
    elif record.kind == "compaction":
        out |= {
            "source_window": scrub_json(
                data.get("source_window") or data.get("source_range") or data.get("source_item_refs")
            ),
            "source_item_refs": scrub_json(data.get("source_item_refs") or []),
            "summary_ref": scrub_json(data.get("summary_ref")),
            "method": data.get("method"),
        }
    elif record.kind == "redaction":
        out |= {
            "item_id": data.get("item_id") or data.get("target_ref"),
            "redaction_method": data.get("redaction_method"),
            "redacted_fields": scrub_json(data.get("redacted_fields") or []),
            "policy_refs": scrub_json(data.get("policy_refs") or []),
        }
    elif record.kind == "event":
        out |= {
            "event_type": data.get("event_type"),
            "evidence_id": record.correlation.get("evidenceId"),
            "refs": scrub_json(data.get("data")),
        }
    out["declares_runtime_status"] = [
        f"{key}={data[key]}"
        for key in RUNTIME_STATUS_KEYS
        if str(data.get(key, "")).strip().lower() in RUNTIME_STATUSES
    ]
    out["data"] = scrub_json(data)
    return out


def log_texts(trial: Trial) -> list[tuple[str, str]]:
    """trial.log, agent logs and verifier logs (exception.txt has its own tab)."""
    texts = trial.texts or {}

    def order(key: str) -> tuple[int, str]:
        return (0 if key == "trial.log" else 1 if key.startswith("agent/") else 2, key)

    return [(k, scrub(texts[k])) for k in sorted(texts, key=order) if k != "exception.txt"]


def config_documents(trial: Trial) -> list[tuple[str, str]]:
    docs = trial.documents or {}
    return [(name, pretty_json(docs[name])) for name in ("config", "lock", "result", "evidence_pack") if name in docs]
