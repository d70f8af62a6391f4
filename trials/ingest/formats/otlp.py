"""OpenTelemetry traces (OTLP/JSON, or an OTLP/protobuf body decoded to the same dict) as trials. No Django.

GenAI semantic conventions (`gen_ai.*`), and OpenInference's (`openinference.span.kind`, what
harbor-atif2otel writes): an `invoke_agent` (AGENT) span is a trajectory, or a subagent when it
sits under another (an `invoke_workflow` span, which conventions before semconv-genai v0.1.0
write above the agents of a workflow, is the top agent); `chat` (LLM) spans are agent steps with
their tokens; `execute_tool` (TOOL) spans are tool calls with their arguments and result,
joined to the step that asked for them, an agent skill's (`gen_ai.skill.*`) with the calls it made
under it (otlp_steps.py). The benchmark identity comes from `benchmark.*`
attributes of the resource or a span (IDENTITY); without `benchmark.trial.id` the trace id names
the trial.

`read_spans`, `spans_by_trial` and `trace_trial` are shared by the import (`parse`, through
`read_traces`) and the live endpoint (trials/live/otlp.py): both see the same `TraceTrial`s with
the same ATIF step dicts.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from trials.ingest.formats import atif
from trials.ingest.formats.lime import parse_evidence_pack
from trials.ingest.formats.otlp_dialects import (
    Group,
    Logs,
    attributes,
    hex_id,
    log_events,
    nanos,
    provider_disagreement,
    span_events,
    span_groups,
)
from trials.ingest.formats.otlp_dialects import is_otlp as is_otlp  # (detect.py asks here)
from trials.ingest.formats.otlp_steps import AGENT_OPERATIONS, evaluations, steps_of
from trials.ingest.formats.otlp_steps import text_of as text_of
from trials.ingest.records import (
    ConfigurationRef,
    FormatTraits,
    PackError,
    ParsedCriterion,
    ParsedJob,
    ParsedPack,
    ParsedTrial,
    Problem,
    status_from_reward,
)
from trials.ingest.values import as_dict, as_list

# Resource or span attributes that name the benchmark trial (docs/importing.md), as the spine's keys.
IDENTITY = {
    "benchmark.trial.id": "trialId",
    "benchmark.task.id": "taskId",
    "benchmark.dataset.id": "datasetId",
    "benchmark.dataset.version": "datasetVersion",
    "benchmark.job.id": "harborJobRef",
    "benchmark.configuration.id": "configurationId",
    "benchmark.configuration.role": "role",
}
ATTEMPT, REWARD = "benchmark.attempt", "benchmark.reward"
TRAITS = FormatTraits("otlp", status_by_reward=True)  # (`benchmark.reward` decides; an ERROR span makes it errored)
OPENINFERENCE = {"AGENT": "invoke_agent", "LLM": "chat", "TOOL": "execute_tool", "CHAIN": "chain"}
AGENT_IDENTITY = ("gen_ai.agent.name", "gen_ai.agent.id", "agent.name", "trajectory.id", "session.id")
SCHEMA_VERSION = "ATIF-v1.7"
STATUS_ERROR = (2, "STATUS_CODE_ERROR")


def decode_protobuf(body: bytes) -> dict[str, Any]:
    """An ExportTraceServiceRequest as OTLP/JSON would write it (ids in hex); ValueError when it is not one."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise ValueError(f"not an OTLP ExportTraceServiceRequest: {exc}") from exc
    data = MessageToDict(request)
    for resource in as_list(data.get("resourceSpans")):
        for scope in as_list(resource.get("scopeSpans")):
            for span in as_list(scope.get("spans")):
                for key in ("traceId", "spanId", "parentSpanId"):  # (protobuf's JSON writes bytes in base64)
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
    return data


# ---------------------------------------------------------------- spans


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int  # unix nanoseconds
    end: int
    attrs: dict[str, Any]
    resource: dict[str, Any]
    status: dict[str, Any]
    place: str  # its JSON path in the body
    order: int = 0  # its place among the body's spans
    events: list[dict[str, Any]] = field(default_factory=list)  # its span events and the log events naming it

    @property
    def operation(self) -> str:
        name = self.attrs.get("gen_ai.operation.name")
        if isinstance(name, str) and name:
            return name
        return OPENINFERENCE.get(str(self.attrs.get("openinference.span.kind") or ""), "")

    @property
    def failed(self) -> bool:
        return self.status.get("code") in STATUS_ERROR

    def named(self) -> str:
        return f"span {self.span_id or '(no spanId)'} {self.name!r} ({self.place})"


def read_spans(data: dict[str, Any], rel: str) -> tuple[list[Span], list[Problem]]:
    """Every span of the body, in whichever dialect (otlp_dialects), with the log events naming it; one
    with no trace (or span) id is a problem naming it, the others kept."""
    problems: list[Problem] = []
    return list(each_span(span_groups(data), log_events(data), rel, problems)), problems


def each_span(groups: Iterable[Group], logs: Logs, rel: str, problems: list[Problem]) -> Iterator[Span]:
    """The spans of these groups (each a scope's, as `span_groups` gives them), one at a time: a streamed
    file's too (otlp_stream.py); the unusable ones and log events naming no span added to `problems`."""
    logged, unattached = dict(logs[0]), list(logs[1])  # (popped as their spans are read: the caller's kept)
    order = 0
    for path, resource_pairs, raws in groups:
        resource = attributes(resource_pairs)
        for k, raw in enumerate(raws):
            place = f"{path}[{k}]"
            raw = as_dict(raw)
            span = Span(
                trace_id=hex_id(raw.get("traceId"), 32),
                span_id=hex_id(raw.get("spanId"), 16),
                parent_id=hex_id(raw.get("parentSpanId"), 16),
                name=str(raw.get("name") or ""),
                start=nanos(raw.get("startTimeUnixNano")),
                end=nanos(raw.get("endTimeUnixNano")),
                attrs=attributes(raw.get("attributes")),
                resource=resource,
                status=as_dict(raw.get("status")),
                place=place,
                order=order,
                events=span_events(raw) + logged.pop(hex_id(raw.get("spanId"), 16), []),
            )
            order += 1
            if why := _unusable(span):
                problems.append(Problem(rel, f"{span.named()}: {why}", json_path=place, kept="the other spans"))
            else:
                yield span
    unattached += [
        (f"resourceLogs (span {span_id})", f"{len(events)} log events name span {span_id}, not in this file")
        for span_id, events in logged.items()
    ]
    for place, what in unattached:
        problems.append(
            Problem(rel, f"{what}: not read as a step", json_path=place, severity="warning", kept="the spans")
        )


def _unusable(span: Span) -> str:
    if not _hex_id(span.trace_id, 32):
        return f"no trace: traceId must be 32 hex digits, not all zero (got {span.trace_id!r})"
    if not _hex_id(span.span_id, 16):
        return f"spanId must be 16 hex digits, not all zero (got {span.span_id!r})"
    return ""


def _hex_id(value: str, digits: int) -> bool:
    return len(value) == digits and all(c in "0123456789abcdef" for c in value) and value.strip("0") != ""


# ---------------------------------------------------------------- trials


@dataclass
class TraceTrial:
    """The spans of one benchmark trial, as a runner's spine and ATIF trajectories."""

    benchmark: dict[str, Any]
    attempt: int | None
    agent: dict[str, Any]
    trajectories: list[dict[str, Any]]  # ATIF documents: the main one first, then each subagent
    trace_ids: list[str]
    span_count: int
    finished: Span | None = None  # the top agent span (sent once ended): the trial is over
    reward: float | None = None
    criteria: list[ParsedCriterion] = field(default_factory=list)  # its `gen_ai.evaluation.result` events
    lanes: dict[str, str] = field(default_factory=dict)  # span id -> its subagent's span id; "": the main agent
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (JSON path, message) on the trial's spans
    totals: dict[str, float] | None = None  # its steps' metrics summed, when known without reading them again

    @property
    def trial_id(self) -> str:
        return str(self.benchmark["trialId"])

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.trajectories[0]["steps"] if self.trajectories else []


def read_traces(data: dict[str, Any], rel: str) -> tuple[list[TraceTrial], list[Problem]]:
    spans, problems = read_spans(data, rel)
    return [trace_trial(trial_id, members) for trial_id, members in spans_by_trial(spans).items()], problems


def spans_by_trial(spans: list[Span]) -> dict[str, list[Span]]:
    """The spans of each benchmark trial: its id from its traces' identity attributes, else the trace id."""
    by_trial: dict[str, list[Span]] = {}
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    for trace_id, members in by_trace.items():
        trial_id = str(_identity(members).get("trialId") or trace_id)
        by_trial.setdefault(trial_id, []).extend(members)
    return by_trial


def first(spans: list[Span], key: str) -> Any:
    for span in spans:
        for source in (span.attrs, span.resource):
            if source.get(key) not in (None, ""):
                return source[key]
    return None


def _identity(spans: list[Span]) -> dict[str, Any]:
    return {name: str(value) for key, name in IDENTITY.items() if (value := first(spans, key)) is not None}


def trace_trial(trial_id: str, spans: list[Span], partial: bool = False) -> TraceTrial:
    """The trial these spans make. `partial`: they may be part of a trace still arriving (live), where
    an agent span whose parent has not come yet is not known to be the top one: it is read as a
    subagent, and the trial's top agent is one whose parents reach the trace's root."""
    # in time order; spans with no times (a converter given steps without timestamps) as the body lists them
    timed = all(s.start for s in spans)
    spans = sorted(spans, key=lambda s: (s.start, s.order) if timed else (0, s.order))
    by_id = {s.span_id: s for s in spans}
    agents = [s for s in spans if is_agent(s)]
    owner = {s.span_id: _owner(s, by_id) for s in spans}
    tops = [a for a in agents if owner[a.span_id] is None and (not partial or _rooted(a, by_id))]
    top = tops[0] if tops else None
    subagents = [a for a in agents if a not in tops]
    sub_ids = {a.span_id for a in subagents}
    benchmark = {**_identity(spans), "trialId": trial_id}
    model = str(first(spans, "gen_ai.request.model") or first(spans, "llm.model_name") or "")
    agent = agent_of(tops, model)
    main_steps, warnings = steps_of([s for s in spans if owner[s.span_id] not in sub_ids and s not in agents])
    trajectories = [document(top, agent, main_steps, trial_id)]
    for sub in subagents:
        sub_agent = {"name": str(sub.attrs.get("gen_ai.agent.name") or sub.attrs.get("agent.name") or sub.name)}
        steps, more = steps_of([s for s in spans if owner[s.span_id] == sub.span_id and s not in agents])
        trajectories.append(document(sub, {**sub_agent, "version": "", "model_name": ""}, steps, sub.span_id))
        warnings += more
    if why := provider_disagreement(first(spans, "gen_ai.provider.name") or first(spans, "gen_ai.system"), model):
        warnings.append(("", why))
    if not partial and (orphans := [s for s in spans if s.parent_id and s.parent_id not in by_id]):
        warnings.append(
            (
                orphans[0].place,
                f"{len(orphans)} spans name a parent not in this file (first: "
                f"{orphans[0].named()}): read as the top of their trace",
            )
        )
    reward = first(tops or spans, REWARD)
    attempt = first(spans, ATTEMPT)
    return TraceTrial(
        benchmark=benchmark,
        attempt=int(attempt) if isinstance(attempt, (int, float, str)) and str(attempt).isdigit() else None,
        agent=agent,
        trajectories=trajectories,
        trace_ids=sorted({s.trace_id for s in spans}),
        span_count=len(spans),
        finished=top,  # (an exporter sends a span once it has ended)
        reward=float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None,
        criteria=evaluations(spans),
        lanes={s.span_id: lane if (lane := owner[s.span_id] or "") in sub_ids else "" for s in spans},
        warnings=warnings,
    )


def agent_of(tops: list[Span], model: str) -> dict[str, Any]:
    """The trial's agent, as its top agent spans name it."""
    name = first(tops, "gen_ai.agent.name") or first(tops, "agent.name") or first(tops, "gen_ai.workflow.name")
    return {
        "name": str(name or (tops[0].name if tops else "")),
        "version": str(first(tops, "gen_ai.agent.version") or first(tops, "agent.version") or ""),
        "model_name": str(model),
    }


def _rooted(span: Span, by_id: dict[str, Span]) -> bool:
    """Whether the span's parents, each among these spans, lead up to the trace's root."""
    seen = set()
    while span.parent_id:
        if span.parent_id not in by_id or span.parent_id in seen:
            return False
        seen.add(span.parent_id)
        span = by_id[span.parent_id]
    return True


def is_agent(span: Span) -> bool:
    if span.operation in AGENT_OPERATIONS:
        # an OpenInference AGENT span with no identity of its own is a turn of its parent, not an agent
        return span.attrs.get("gen_ai.operation.name") is not None or any(k in span.attrs for k in AGENT_IDENTITY)
    return False


def _owner(span: Span, by_id: dict[str, Span]) -> str | None:
    """The nearest agent span above this one (None: the trial's top, or a parent not in this body)."""
    seen = set()
    parent = by_id.get(span.parent_id)
    while parent is not None and parent.span_id not in seen:
        if is_agent(parent):
            return parent.span_id
        seen.add(parent.span_id)
        parent = by_id.get(parent.parent_id)
    return None


def document(
    agent_span: Span | None, agent: dict[str, Any], steps: Iterable[dict[str, Any]], tid: str
) -> dict[str, Any]:
    attrs = agent_span.attrs if agent_span else {}
    session = attrs.get("gen_ai.conversation.id") or attrs.get("session.id")
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": str(session or tid),
        "trajectory_id": str(attrs.get("trajectory.id") or tid),
        # ATIF requires both; a trace need not name them (the live path's trajectory says "unknown" too)
        "agent": {k: v for k, v in agent.items() if v}
        | {"name": agent.get("name") or "unknown", "version": agent.get("version") or "unknown"},
        "steps": steps,
    }


# ---------------------------------------------------------------- import


def parse(data: dict[str, Any], rel: str) -> ParsedPack:
    """An OTLP/JSON file: a trial per benchmark trial id (or trace); a bad span is named, the others kept."""
    return pack_of(*read_traces(data, rel), rel)


def pack_of(traces: list[TraceTrial], problems: list[Problem], rel: str) -> ParsedPack:
    if not traces:
        raise PackError(Problem(rel, "no span with a trace in this OTLP file", kept="the raw bytes"))
    jobs: dict[str, ParsedJob] = {}
    trials = []
    for trace in traces:
        trial = imported_trial(trace, rel)
        if trial.job_key and trial.job_key not in jobs:
            ref = trace.benchmark["harborJobRef"]
            jobs[trial.job_key] = ParsedJob(
                key=trial.job_key, name=ref.rstrip("/").rpartition("/")[2] or ref, source_format="otlp"
            )
        trials.append(trial)
    return ParsedPack(
        kind="otlp-traces", jobs=list(jobs.values()), trials=trials, problems=problems, trial_count=len(trials)
    )


def job_key(benchmark: dict[str, Any]) -> str:
    """The job a live trial of the same identity is in (trials.live.service.start_trial keys it so)."""
    ref = str(benchmark.get("harborJobRef") or benchmark.get("configurationId") or "")
    return f"live:{ref}"[:300] if ref else ""


def imported_trial(trace: TraceTrial, rel: str) -> ParsedTrial:
    """The trial as its evidence pack would name it (the live path starts it from the same spine)."""
    trial = parse_evidence_pack({"benchmark": trace.benchmark}, rel)
    trial.source_format = "otlp"
    # a trace is a trial of its own, not an evidence pack of one stored apart; a file may hold several
    trial.joins_stored_trial = trial.files_are_its_own = False
    trial.documents = {}
    trial.present = {"trajectory"}
    trial.refs = {"trajectoryRef": rel}
    trial.attempt = trace.attempt
    trial.job_key = job_key(trace.benchmark)
    agent = trace.agent
    config = trial.configuration or ConfigurationRef(
        key="__".join(x for x in (agent["name"], agent["model_name"]) if x) or "unknown"
    )
    config.agent_name, config.agent_version, config.model_name = agent["name"], agent["version"], agent["model_name"]
    trial.configuration = config
    trial.provenance = {"otel": {"trace_ids": trace.trace_ids}}
    for n, document in enumerate(trace.trajectories):
        header = {k: v for k, v in document.items() if k != "steps"}
        path = rel if n == 0 else f"{rel}#subagent/{document['trajectory_id']}"
        trial.trajectories.append(
            atif.trajectory_from(header, iter(document["steps"]), path, "main" if n == 0 else "subagent")
        )
    top = trace.finished
    trial.started_at = _datetime(top.start) if top else None
    trial.finished_at = _datetime(top.end) if top else None
    trial.reward = trace.reward
    trial.rewards = {"reward": trace.reward} if trace.reward is not None else {}
    trial.status = status_from_reward(trace.reward)
    if top is not None and top.failed:
        trial.status = "errored"
        trial.exception_type = str(top.attrs.get("error.type") or "")
        trial.exception_message = str(top.status.get("message") or "")
    trial.input_tokens, trial.output_tokens, trial.cached_tokens, trial.cost_usd = _totals(trace)
    trial.criteria = trace.criteria
    trial.problems = [
        Problem(rel, what, json_path=place, severity="warning", kept="the trial") for place, what in trace.warnings
    ]
    return trial


def _datetime(nanos: int) -> datetime | None:
    return datetime.fromtimestamp(nanos / 1e9, tz=UTC) if nanos else None


def metric_sums(steps: Iterable[dict[str, Any]]) -> dict[str, float]:
    sums: dict[str, float] = {}
    for step in steps:
        for key, value in as_dict(step.get("metrics")).items():
            sums[key] = sums.get(key, 0) + value
    return sums


def _totals(trace: TraceTrial) -> tuple[int | None, int | None, int | None, float | None]:
    sums = metric_sums(trace.steps) if trace.totals is None else trace.totals
    as_int = {k: int(v) for k, v in sums.items() if k != "cost_usd"}
    return (
        as_int.get("prompt_tokens"),
        as_int.get("completion_tokens"),
        as_int.get("cached_tokens"),
        sums.get("cost_usd"),
    )
