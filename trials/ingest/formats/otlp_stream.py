"""A big OTLP/JSON file as trials, read in passes with ijson: memory stays flat however many spans. No Django.

The first pass keeps a few numbers a span (its trace, ids, start time, kind) and the spans that are
few (agents, those with evaluation events); then the file is read once more for the trials' warnings
and token totals, and once a trajectory as its steps are written: each pass feeds the spans, in time
order, to the step builder a small file's spans go through (otlp_steps.LaneSteps), so the steps are
the ones the whole reading (otlp.py) makes. A span read before its turn waits, so a file that lists
its spans far from time order takes memory for them. A shape this reading does not follow (a span id
twice, a resource after its spans, more trajectories than MAX_LANES passes) is read whole instead.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import ijson

from trials.ingest.formats import otlp
from trials.ingest.formats.atif import STREAM_THRESHOLD
from trials.ingest.formats.otlp import IDENTITY, Span, TraceTrial, each_span, first, is_agent
from trials.ingest.formats.otlp_dialects import (
    LOGS,
    Group,
    Logs,
    Unstreamable,
    log_events,
    provider_disagreement,
    streamed_groups,
)
from trials.ingest.formats.otlp_lanes import LaneStepsOf, LaneView, WrapperIds
from trials.ingest.formats.otlp_steps import LaneSteps, evaluations, is_llm, skill_of
from trials.ingest.jsonio import open_json
from trials.ingest.records import ParsedPack, Problem

AGENT, LLM, PLAN, EVALUATED, SKILL = 1, 2, 4, 8, 16  # a span's kind, as bits
FIRSTS = (
    *IDENTITY,
    otlp.REWARD,
    otlp.ATTEMPT,
    "gen_ai.request.model",
    "llm.model_name",
    "gen_ai.provider.name",
    "gen_ai.system",
)
MAX_LANES = 16  # trajectories (a trial's agent and each subagent) a streamed file may hold: a pass each
_HEAD = re.compile(rb'^\s*\{\s*"(resourceSpans|batches|resourceLogs)"')
NOT_IN_LANE = 0xFFFFFFFF
MAX_GROUPS = 1000  # scopes a file may have and be read again by ijson's C items (each one's resource is kept)
_HEX = frozenset("0123456789abcdef")


def sniff(path: Path) -> bool:
    """An OTLP/JSON file past STREAM_THRESHOLD (its first key a dialect's): streamed, not parsed whole."""
    if path.stat().st_size <= STREAM_THRESHOLD:
        return False
    with open_json(path) as f:
        return bool(_HEAD.match(f.read(4096)))


def parse_path(path: Path, rel: str) -> ParsedPack | None:
    """The file's trials, streamed; None when its shape is not one this reading follows (read it whole)."""
    try:
        index = Index(path, rel)
        traces = index.trials()
    except (Unstreamable, ijson.JSONError, ValueError, OverflowError):  # (a broken file: the whole reading says where)
        return None
    if not traces:  # (not OTLP's spans after all: the whole reading names what it is)
        return None
    pack = otlp.pack_of(traces, index.problems, rel)
    for trial in pack.trials:
        for trajectory in trial.trajectories:
            trajectory.streamed = True
    return pack


def _holds(path: Path, text: bytes) -> bool:
    """Whether the file holds these bytes, read a megabyte at a time (a map of it would count as memory)."""
    with open(path, "rb") as f:
        tail = b""
        while chunk := f.read(1 << 20):
            if text in tail + chunk[: len(text)] or text in chunk:
                return True
            tail = chunk[-len(text) :]
    return False


def _id(text: str) -> int:
    """A span id as its number; 0 for one that is not 16 hex digits (no kept span has it)."""
    return int(text, 16) if len(text) == 16 and _HEX.issuperset(text) else 0


@dataclass
class Trial:
    """One trial's spans, by position in the index."""

    trial_id: str
    traces: list[int]
    seq: array  # its spans' positions in time order (`trace_trial`'s)
    timed: bool
    lanes: list[int] = field(default_factory=list)  # the agent span of each lane (-1: the main lane, its top)
    wrappers: list[set[int]] = field(default_factory=list)  # per lane: model calls around others (kept whole)
    within: dict[int, int] = field(default_factory=dict)  # per such call: the model calls within it


class Index:
    """The first pass: a few numbers a span, and the spans that are few."""

    def __init__(self, path: Path, rel: str) -> None:
        self.path, self.rel = path, rel
        self.problems: list[Problem] = []
        self.logs: Logs = self._logs()
        self.trace, self.order = array("I"), array("I")
        self.span, self.parent, self.start = array("Q"), array("Q"), array("q")
        self.kind = array("B")
        self.odd_parents: dict[int, str] = {}  # parent ids that are no span's (e.g. all zero), as read
        self.trace_ids: dict[str, int] = {}
        self.whole: dict[int, Span] = {}  # agents, skill spans and spans with evaluation events
        # per trace and key of FIRSTS: the first (by file order, by time) span's value
        self.firsts: list[dict[str, tuple[tuple[int, int], Any]]] = []
        self.timed_firsts: list[dict[str, tuple[tuple[int, int], Any]]] = []
        # each scope's (JSON path, resource, span count), when few and all at one place: read again by ijson's C items
        self.groups: list[tuple[str, Any, int]] | None = []
        self.at = ""
        with open_json(self.path) as f:
            groups = self._counted(streamed_groups(ijson.parse(f, use_float=True)))
            for pos, span in enumerate(each_span(groups, self.logs, self.rel, self.problems)):
                self._add(pos, span)
        self.by_id = array("I", sorted(range(len(self.span)), key=self.span.__getitem__))
        ids = [self.span[p] for p in self.by_id]
        if any(a == b for a, b in zip(ids, ids[1:], strict=False)):
            raise Unstreamable("a span id twice")  # (the whole reading keeps the last; this one cannot)
        self.parents = array("q", [-1]) * len(self.span)  # each span's parent's position (-1: none read)
        for pos in range(len(self.span)):
            if self.parent[pos] and (parent := self.find(self.parent_id(pos))) is not None:
                self.parents[pos] = parent
        self.lane = array("I", [NOT_IN_LANE]) * len(self.span)
        self.trial_of = array("I", [0]) * len(self.trace_ids)

    def _logs(self) -> Logs:
        if not _holds(self.path, f'"{LOGS[0]}"'.encode()):
            return {}, []
        with open_json(self.path) as f:
            return log_events({LOGS[0]: next(ijson.items(f, LOGS[0], use_float=True), None)})

    def _counted(self, groups: Iterable[Group]) -> Iterator[Group]:
        for path, resource, raws in groups:
            at = re.sub(r"\[\d+\]", ".item", path) + ".item"
            if self.groups is not None and (len(self.groups) >= MAX_GROUPS or self.at not in ("", at)):
                self.groups = None
            self.at = at
            counted = [0]

            def counting(raws: Iterable[Any] = raws, counted: list[int] = counted) -> Iterator[Any]:
                for raw in raws:
                    counted[0] += 1
                    yield raw

            yield path, resource, counting()
            if self.groups is not None:
                self.groups.append((path, resource, counted[0]))

    def _spans(self, problems: list[Problem]) -> Iterator[Span]:
        """The file's spans, read again: by ijson's C items where the first pass found them all at one place."""
        with open_json(self.path) as f:
            if self.groups is None:
                groups: Iterable[Group] = streamed_groups(ijson.parse(f, use_float=True))
            else:
                items = ijson.items(f, self.at, use_float=True)
                groups = ((path, resource, islice(items, count)) for path, resource, count in self.groups)
            yield from each_span(groups, self.logs, self.rel, problems)

    def _add(self, pos: int, span: Span) -> None:
        trace = self.trace_ids.setdefault(span.trace_id, len(self.trace_ids))
        if trace == len(self.firsts):
            self.firsts.append({})
            self.timed_firsts.append({})
        self.trace.append(trace)
        self.order.append(span.order)
        self.span.append(_id(span.span_id))
        self.parent.append(_id(span.parent_id))
        if span.parent_id and not self.parent[-1]:
            self.odd_parents[pos] = span.parent_id
        self.start.append(span.start)
        kind = (AGENT if is_agent(span) else 0) | (LLM if is_llm(span) else 0) | (PLAN * (span.operation == "plan"))
        if any(e["name"] == "gen_ai.evaluation.result" for e in span.events):
            kind |= EVALUATED
        kind |= SKILL * bool(skill_of(span))
        self.kind.append(kind)
        if kind & (AGENT | EVALUATED | SKILL):
            self.whole[pos] = span
        firsts, timed = self.firsts[trace], self.timed_firsts[trace]
        for key in FIRSTS:
            for source in (span.attrs, span.resource):
                if source.get(key) not in (None, ""):
                    firsts.setdefault(key, ((0, span.order), source[key]))
                    if key not in timed or (span.start, span.order) < timed[key][0]:
                        timed[key] = ((span.start, span.order), source[key])
                    break

    # ---------------------------------------------------------------- spans by id

    def find(self, span_id: str) -> int | None:
        number = _id(span_id)
        at = bisect_left(self.by_id, number, key=self.span.__getitem__)
        return self.by_id[at] if number and at < len(self.by_id) and self.span[self.by_id[at]] == number else None

    def parent_id(self, pos: int) -> str:
        return self.odd_parents.get(pos) or (f"{self.parent[pos]:016x}" if self.parent[pos] else "")

    def parent_of(self, pos: int) -> int | None:
        """The span's parent among its trial's spans."""
        parent = self.parents[pos]
        if parent < 0 or self.trial_of[self.trace[parent]] != self.trial_of[self.trace[pos]]:
            return None
        return parent

    def light(self, pos: int) -> Span:
        """A span that is no model call, as far as a model call's steps look at what is above it (a skill's, whole)."""
        if self.kind[pos] & SKILL:
            return self.whole[pos]
        attrs = {"gen_ai.operation.name": "plan"} if self.kind[pos] & PLAN else {}
        return Span(
            trace_id="",
            span_id=f"{self.span[pos]:016x}",
            parent_id=self.parent_id(pos),
            name="",
            start=self.start[pos],
            end=0,
            attrs=attrs,
            resource={},
            status={},
            place="",
            order=self.order[pos],
        )

    # ---------------------------------------------------------------- trials

    def trials(self) -> list[TraceTrial]:
        """`read_traces`' trials (`spans_by_trial`, `trace_trial`), from the index and two passes more."""
        names = list(self.trace_ids)
        by_trial: dict[str, list[int]] = {}
        for trace, name in enumerate(names):
            found = self.firsts[trace].get("benchmark.trial.id")
            by_trial.setdefault(str(found[1]) if found else name, []).append(trace)
        members: list[list[int]] = [[] for _ in by_trial]
        for n, traces in enumerate(by_trial.values()):
            for trace in traces:
                self.trial_of[trace] = n
        for pos in range(len(self.span)):
            members[self.trial_of[self.trace[pos]]].append(pos)
        self.built: list[Trial] = []
        for (trial_id, traces), positions in zip(by_trial.items(), members, strict=True):
            timed = all(self.start[p] for p in positions)
            seq = array("I", sorted(positions, key=self.start.__getitem__) if timed else positions)
            self.built.append(Trial(trial_id, traces, seq, timed))
        del members
        for trial in self.built:
            self._lanes(trial)
        if sum(len(t.lanes) for t in self.built) > MAX_LANES:
            raise Unstreamable(f"more than {MAX_LANES} trajectories")
        return [self._trace_trial(t, *found) for t, found in enumerate(self._survey())]

    def _trace_trial(self, t: int, warnings: list[tuple[str, str]], totals: dict[str, float]) -> TraceTrial:
        trial = self.built[t]
        subs = [self.whole[p] for p in trial.lanes[1:]]
        tops = [self.whole[p] for p in trial.seq if self.kind[p] & AGENT and p not in trial.lanes]
        model = str(self.first(trial, "gen_ai.request.model") or self.first(trial, "llm.model_name") or "")
        agent = otlp.agent_of(tops, model)
        trajectories = [otlp.document(tops[0] if tops else None, agent, LaneStepsOf(self, t, 0), trial.trial_id)]
        for lane, sub in enumerate(subs, start=1):
            sub_agent = {"name": str(sub.attrs.get("gen_ai.agent.name") or sub.attrs.get("agent.name") or sub.name)}
            steps = LaneStepsOf(self, t, lane)
            trajectories.append(otlp.document(sub, {**sub_agent, "version": "", "model_name": ""}, steps, sub.span_id))
        system = self.first(trial, "gen_ai.provider.name") or self.first(trial, "gen_ai.system")
        if why := provider_disagreement(system, model):
            warnings.append(("", why))
        orphans = [p for p in trial.seq if self.parent_id(p) and self.parent_of(p) is None]
        if orphans:
            orphan = next(s for p, s in enumerate(self._spans([])) if p == orphans[0])
            warnings.append(
                (
                    orphan.place,
                    f"{len(orphans)} spans name a parent not in this file (first: "
                    f"{orphan.named()}): read as the top of their trace",
                )
            )
        reward = first(tops, otlp.REWARD) if tops else self.first(trial, otlp.REWARD)
        attempt = self.first(trial, otlp.ATTEMPT)
        identity = {name: str(v) for key, name in IDENTITY.items() if (v := self.first(trial, key)) is not None}
        names = list(self.trace_ids)
        return TraceTrial(
            benchmark={**identity, "trialId": trial.trial_id},
            attempt=int(attempt) if isinstance(attempt, (int, float, str)) and str(attempt).isdigit() else None,
            agent=agent,
            trajectories=trajectories,
            trace_ids=sorted(names[n] for n in trial.traces),
            span_count=len(trial.seq),
            finished=tops[0] if tops else None,
            reward=float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None,
            criteria=evaluations([self.whole[p] for p in trial.seq if self.kind[p] & EVALUATED]),
            warnings=warnings,
            totals=totals,
        )

    def _lanes(self, trial: Trial) -> None:
        """Each span's lane (`trace_trial`'s owner): the main agent's, or the subagent's it is under."""
        agents = [p for p in trial.seq if self.kind[p] & AGENT]
        owner = {a: self._owner(a) for a in agents}
        tops = [a for a in agents if owner[a] is None]
        trial.lanes = [-1] + [a for a in agents if a not in tops]
        lane_of = {agent: n for n, agent in enumerate(trial.lanes) if n}
        for pos in trial.seq:
            if not self.kind[pos] & AGENT:
                self.lane[pos] = lane_of.get(self._owner(pos), 0)  # type: ignore[arg-type]
        trial.wrappers = [set() for _ in trial.lanes]
        for pos in trial.seq:
            if self.kind[pos] & LLM and self.lane[pos] != NOT_IN_LANE:
                for outer in self._llm_ancestors(pos):
                    trial.wrappers[self.lane[pos]].add(outer)
                    trial.within[outer] = trial.within.get(outer, 0) + 1

    def _owner(self, pos: int) -> int | None:
        seen = set()
        parent = self.parent_of(pos)
        while parent is not None and parent not in seen:
            if self.kind[parent] & AGENT:
                return parent
            seen.add(parent)
            parent = self.parent_of(parent)
        return None

    def _llm_ancestors(self, pos: int) -> list[int]:
        """The model calls above this span in its lane (`otlp_steps._llm_ancestors`)."""
        found, seen, lane = [], {pos}, self.lane[pos]
        parent = self.parent_of(pos)
        while parent is not None and parent not in seen and self.lane[parent] == lane:
            seen.add(parent)
            if self.kind[parent] & LLM:
                found.append(parent)
            parent = self.parent_of(parent)
        return found

    def first(self, trial: Trial, key: str) -> Any:
        """`otlp.first` over the trial's spans in time order."""
        table = self.timed_firsts if trial.timed else self.firsts
        found = [table[t][key] for t in trial.traces if key in table[t]]
        return min(found, key=lambda pair: pair[0])[1] if found else None

    # ---------------------------------------------------------------- passes

    def walk(
        self, wanted: dict[int, set[int]], builders: dict[tuple[int, int], LaneSteps] | None = None
    ) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
        """(trial, lane, steps) of these trials' lanes, from a pass over the file: each lane's spans fed to
        its builder in time order, each once it and the model calls around it have been read."""
        held: dict[int, Span] = {}  # read, not fed yet
        kept: dict[int, Span] = {}  # model calls around others: looked at again
        builders = {} if builders is None else builders
        for t, lanes in wanted.items():
            for lane in lanes:
                wrappers = WrapperIds(self, self.built[t].wrappers[lane])
                builders[t, lane] = LaneSteps(LaneView(self, t, lane, kept), wrappers, unique=True)
        due = dict.fromkeys(wanted, 0)
        within = {t: dict(self.built[t].within) for t in wanted}  # per outer call: the calls within not fed yet

        def fed(t: int, pos: int, builder: LaneSteps) -> None:
            """Let go of the outer calls whose every call within is fed (and they themselves)."""
            for outer in [*self._llm_ancestors(pos), pos] if self.kind[pos] & LLM else []:
                if outer != pos:
                    within[t][outer] -= 1
                if not within[t].get(outer, 1) and outer not in held and outer in kept:
                    builder.settle(f"{self.span[outer]:016x}")
                    del kept[outer]

        def wants(pos: int) -> bool:
            return self.lane[pos] in wanted.get(self.trial_of[self.trace[pos]], ())

        def ready(t: int) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
            seq = self.built[t].seq
            while due[t] < len(seq):
                pos = seq[due[t]]
                if wants(pos):
                    if pos not in held or (
                        self.kind[pos] & LLM and any(a not in kept for a in self._llm_ancestors(pos))
                    ):
                        return
                    builder = builders[t, self.lane[pos]]
                    yield t, self.lane[pos], builder.feed(held.pop(pos))
                    fed(t, pos, builder)
                due[t] += 1

        for pos, span in enumerate(self._spans([])):
            if wants(pos):
                t = self.trial_of[self.trace[pos]]
                held[pos] = span
                if pos in self.built[t].wrappers[self.lane[pos]]:
                    kept[pos] = span
                yield from ready(t)
        for (t, lane), builder in builders.items():
            yield t, lane, builder.close()

    def _survey(self) -> list[tuple[list[tuple[str, str]], dict[str, float]]]:
        """A pass for every trajectory's warnings, and each trial's token totals (its main lane's)."""
        builders: dict[tuple[int, int], LaneSteps] = {}
        sums: list[dict[str, float]] = [{} for _ in self.built]
        for t, lane, steps in self.walk(
            {t: set(range(len(trial.lanes))) for t, trial in enumerate(self.built)}, builders
        ):
            if lane == 0:
                for key, value in otlp.metric_sums(steps).items():
                    sums[t][key] = sums[t].get(key, 0) + value
        return [
            ([w for lane in range(len(trial.lanes)) for w in builders[t, lane].warnings()], sums[t])
            for t, trial in enumerate(self.built)
        ]
