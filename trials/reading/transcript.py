"""One transcript: a window's steps with the runtime events and permission decisions of its time,
and the timeline strip (a lane per trajectory and Harbor's phases) that leads to each step."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from django.db.models import Q

from trials.ingest.values import parse_iso
from trials.models import PermissionDecision, RuntimeEvent, Step, Trajectory, Trial, step_url
from trials.reading.steps import StepWindow, main_trajectory
from trials.reading.tabs import PHASES
from trials.reading.text import scrub

RECORDS_PER_WINDOW = 200  # timed records shown between a window's steps; the tabs list them all
SEGMENTS_PER_LANE = 60  # a lane samples this many steps, whatever the trajectory's length
LANES = 12  # trajectories drawn; a trial with more subagents says how many are left out


@dataclass
class TimedRecord:
    """A runtime event or a permission decision placed among the steps by its time."""

    kind: str  # "runtime" or "permission"
    at: datetime
    event: RuntimeEvent | None = None
    permission: PermissionDecision | None = None

    @property
    def correlation(self) -> str:
        ids = self.event.correlation if self.event else {}
        return " ".join(f"{k}={scrub(v)}" for k, v in (ids or {}).items())


def interleave(trial: Trial, window: StepWindow) -> list[TimedRecord]:
    """Put the records timed within the window on its steps (`records_before`); returns those after its last step.

    The window's time runs from its first step (from the trial's start on the first window) to
    the first step of the next window (to the end on the last): every record shows in exactly
    one window, and a window reads at most RECORDS_PER_WINDOW of them.
    """
    stamped = [v for v in window.steps if v.step.timestamp]
    if not stamped:
        return []
    lower = None if window.start == 0 else stamped[0].step.timestamp
    following = (
        Step.objects.filter(trajectory=window.trajectory, index=window.end).values_list("timestamp", flat=True).first()
        if window.end < window.total
        else None
    )
    inline = {p.pk for v in window.steps for p in v.all_permissions}  # already shown on their step or call
    events = RuntimeEvent.objects.filter(trial=trial, timestamp__isnull=False)
    permissions = PermissionDecision.objects.filter(trial=trial, requested_at__isnull=False).exclude(pk__in=inline)
    if lower is not None:
        events, permissions = events.filter(timestamp__gte=lower), permissions.filter(requested_at__gte=lower)
    if following is not None:
        events, permissions = events.filter(timestamp__lt=following), permissions.filter(requested_at__lt=following)
    events = events.order_by("timestamp", "pk")[:RECORDS_PER_WINDOW]
    records = [TimedRecord("runtime", e.timestamp, event=e) for e in events if e.timestamp]
    records += [
        TimedRecord("permission", p.requested_at, permission=p)
        for p in permissions.order_by("requested_at", "pk")[:RECORDS_PER_WINDOW]
        if p.requested_at
    ]
    records.sort(key=lambda r: r.at)
    times: list[datetime] = [ts for v in stamped if (ts := v.step.timestamp)]
    after = []
    for record in records[:RECORDS_PER_WINDOW]:
        i = bisect.bisect_right(times, record.at)  # the first step later than the record
        if i < len(stamped):
            stamped[i].records_before.append(record)
        else:
            after.append(record)
    return after


@dataclass
class Segment:
    number: int  # 1-based step the segment starts at
    last: int
    left: float  # percent of the strip
    width: float
    url: str = ""


@dataclass
class Lane:
    label: str
    kind: str  # "main", "subagent", "continuation", "phases"
    trajectory_pk: int | None = None
    segments: list[Segment] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    timed: bool = True  # False: placed by step position (its steps carry no times)
    title: str = ""


def timeline(trial: Trial, trajectories: list[Trajectory]) -> dict[str, Any] | None:
    """The strip above the steps: a lane per trajectory (sampled, so O(lanes)) and the phases."""
    drawn = [t for t in trajectories if t.step_count][:LANES]
    if not drawn:
        return None
    samples = _samples(drawn)
    phases = _phase_spans(trial)
    moments = [ts for rows in samples.values() for _, ts in rows if ts] + [t for p in phases for t in p[1:]]
    start, end = (min(moments), max(moments)) if moments else (None, None)
    span = (end - start).total_seconds() if start and end and end > start else 0.0

    def place(moment: datetime | None) -> float:
        """Where a moment falls on the strip, from 0 to 1."""
        return (moment - start).total_seconds() / span if moment and start and span else 0.0

    main = main_trajectory(trial, trajectories)
    lanes = []
    for t in drawn:
        kind = "main" if t == main else "continuation" if t.role == "continuation" else "subagent"
        name = t.step_name or PurePosixPath(t.path).name.removesuffix(".json")  # which subagent, not only its role
        name = name if len(name) <= 28 else "…" + name[-27:]  # subagents' files differ at the end
        lane = Lane(" ".join(filter(None, (t.role or kind, name if kind != "main" else t.step_name))), kind, t.pk)
        lane.title = t.path
        rows = samples.get(t.pk, [])
        lane.timed = bool(span) and all(ts for _, ts in rows)
        off_main = None if t == main else t.pk
        for i, (index, ts) in enumerate(rows):
            last = rows[i + 1][0] - 1 if i + 1 < len(rows) else t.step_count - 1
            if lane.timed:
                left = place(ts)
                right = place(rows[i + 1][1]) if i + 1 < len(rows) else left
            else:
                left, right = index / t.step_count, (last + 1) / t.step_count
            segment = Segment(index + 1, last + 1, round(100 * left, 2), round(max(100 * (right - left), 0.4), 2))
            segment.url = step_url(trial.pk, segment.number, off_main)
            lane.segments.append(segment)
        lanes.append(lane)
    if phases and span:
        phase_lane = Lane("phases", "phases")
        for name, began, ended in phases:
            left, width = place(began), place(ended) - place(began)
            phase_lane.phases.append(
                {
                    "name": name,
                    "label": name.replace("_", " "),
                    "left": round(100 * left, 2),
                    "width": round(100 * width, 2),
                }
            )
        lanes.append(phase_lane)
    return {
        "lanes": lanes,
        "start": start,
        "end": end,
        "left_out": len([t for t in trajectories if t.step_count]) - len(drawn),
    }


def _samples(trajectories: list[Trajectory]) -> dict[int, list[tuple[int, datetime | None]]]:
    """Every lane's sampled steps (index, time) in one indexed query."""
    wanted = Q()
    for t in trajectories:
        every = max(1, -(-t.step_count // SEGMENTS_PER_LANE))
        wanted |= Q(trajectory_id=t.pk, index__in=sorted({*range(0, t.step_count, every), t.step_count - 1}))
    out: dict[int, list[tuple[int, datetime | None]]] = {}
    for pk, index, ts in (
        Step.objects.filter(wanted)
        .order_by("trajectory_id", "index")
        .values_list("trajectory_id", "index", "timestamp")
    ):
        out.setdefault(pk, []).append((index, ts))
    return out


def _phase_spans(trial: Trial) -> list[tuple[str, datetime, datetime]]:
    phases = trial.phases or {}
    spans = []
    for name in PHASES:
        timing = phases.get(name) or {}
        began, ended = parse_iso(timing.get("started_at")), parse_iso(timing.get("finished_at"))
        if began and ended and began.tzinfo and ended.tzinfo and ended >= began:  # (steps' times are aware)
            spans.append((name, began, ended))
    return spans
