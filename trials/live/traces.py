"""A live trial's OpenTelemetry spans (`POST /v1/traces`, trials/live/otlp.py) written through the live
service, and the spans it has received (ReceivedSpan): this module stores them (the re-scrub and the
completion only blank their bodies).

A span is sent once it has ended, so a trace arrives leaves first and its root span last. A batch
is read as part of a trace (`trace_trial(..., partial=True)`): an agent span whose parent has not
come is read as a subagent; a span whose agent span has not come, as the main agent's. When the
root span arrives above an agent span the run is over: the trial is read again from all its
spans, its steps written again if any span's agent has changed, and the trial completed.

A span is stored scrubbed by the redactions its trial has (`Trial.redactions`); a later redaction
scrubs it again (imports/rescrub.py), and the trial's completion, by whatever path, empties the
bodies (live/service.py): no stored span keeps a redacted value. A trial that has ended takes no
new span: the body is refused whole (`ended`), nothing of it stored.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import transaction

from trials.ingest import redaction
from trials.ingest.formats import otlp
from trials.live import service
from trials.models import ReceivedSpan, Trial

Refusals = list[tuple[str, str]]  # (span id, why)


def ended(by_trial: dict[str, list[otlp.Span]], user: Any) -> list[str]:
    """Why the body is refused whole: each of its trials that has ended, named with its state, for which
    a span is new (a retry of spans it stored before is no news). Nothing is written here. (A trial
    another account started refuses `user` its spans in `record`, whatever its state.)"""
    why = []
    for trial_id, spans in by_trial.items():
        trial = Trial.objects.filter(key=f"lime:{trial_id}"[:500]).first()  # (as service.start_trial keys it)
        if trial is None or trial.status == Trial.Status.RUNNING or not trial.writable_by(user):
            continue
        if _not_received(trial, spans):
            why.append(_has_ended(trial_id, trial))
    return why


def _has_ended(trial_id: str, trial: Trial) -> str:
    return f"trial {trial_id!r} (Benchviewer trial {trial.pk}) is {trial.status}: it has ended and takes no new span"


def record(trial_id: str, spans: list[otlp.Span], user: Any) -> Refusals:
    """One trial's spans into its live trial; the spans refused, each with why.

    A span stored before (the exporter sent its batch again, not having heard back) is skipped.
    """
    trace = otlp.trace_trial(trial_id, spans, partial=True)
    spine: dict[str, Any] = {"benchmark": trace.benchmark, "agent": trace.agent}
    if trace.attempt is not None:
        spine["attempt"] = trace.attempt
    trial, _ = service.start_trial(spine, started_by=user)
    if not trial.writable_by(user):
        return [(s.span_id, f"trial {trial_id!r} was started by another account") for s in spans]
    try:
        with transaction.atomic():
            trial = Trial.objects.select_for_update().get(pk=trial.pk)  # (a retry may come while the first is written)
            new = _not_received(trial, spans)
            if not new:
                return []
            if trial.status != Trial.Status.RUNNING:  # (it ended since `ended` looked)
                raise service.Refused(409, [{"path": "spans", "error": _has_ended(trial_id, trial)}])
            named = trial.redactions()
            if len(new) < len(spans):  # (some came before: the trial is what the new ones make)
                trace = otlp.trace_trial(trial_id, new, partial=True)
            ReceivedSpan.objects.bulk_create(
                ReceivedSpan(
                    trial=trial,
                    trace_id=s.trace_id,
                    span_id=s.span_id,
                    span=redaction.scrub_tree(vars(s), named) if named else vars(s),
                    lane=trace.lanes[s.span_id],
                    agent=otlp.is_agent(s),
                )
                for s in new
            )
            refused = _write_steps(trial, trace)
            # A root span ends last: with an agent among the trial's spans, the run is over.
            if any(not s.parent_id for s in new) and ReceivedSpan.objects.filter(trial=trial, agent=True).exists():
                sent = {s.span_id for s in new}
                refused += [r for r in _finish(trial, trial_id) if r[0] in sent]
    except service.Refused as refusal:  # (the trial finished before: nothing of this body is stored)
        why = "; ".join(e["error"] for e in refusal.errors)
        return [(s.span_id, why) for s in spans]
    return refused


def _not_received(trial: Trial, spans: list[otlp.Span]) -> list[otlp.Span]:
    """The spans this trial has not stored before (and a span twice in one body, once)."""
    held = ReceivedSpan.objects.filter(trial=trial, span_id__in=list({s.span_id for s in spans}))
    seen = set(held.values_list("trace_id", "span_id"))
    new = []
    for span in spans:
        if (span.trace_id, span.span_id) not in seen:
            seen.add((span.trace_id, span.span_id))
            new.append(span)
    return new


def _write_steps(trial: Trial, trace: otlp.TraceTrial) -> Refusals:
    """The trace's steps after those each trajectory holds (batches arrive in order)."""
    refused: Refusals = []
    for n, document in enumerate(trace.trajectories):
        steps = document["steps"]
        if not steps:  # (no trajectory is made without steps; the main agent is named at the end too)
            continue
        if n == 0:
            trajectory = service.live_trajectory(trial)
        else:
            trajectory = service.subagent_trajectory(trial, document["trajectory_id"], document["agent"])
        service.name_agent(trajectory, document["agent"])
        for number, step in enumerate(steps, start=trajectory.step_count + 1):
            step["step_id"] = number
        accepted = service.add_items(trial, [], steps, trajectory=trajectory)
        refused += [_span_of(steps, error) for error in accepted.errors]
    return refused


def _finish(trial: Trial, trial_id: str) -> Refusals:
    """The trial read again from every span it received. With a top agent span under the root, its
    steps are written again if a span's agent differs from the one it was written under (as an
    import of the whole trace writes them), its main agent named, its reward recorded and the trial
    completed (failed when that span failed), which empties the spans' bodies: their ids stay, against a retry."""
    rows = list(ReceivedSpan.objects.filter(trial=trial).order_by("pk").values_list("pk", "span", "lane"))
    # (in the order they arrived: spans without times keep it; `order` counts within one body)
    whole = otlp.trace_trial(trial_id, [otlp.Span(**{**span, "order": pk}) for pk, span, _ in rows], partial=True)
    if whole.finished is None:  # (the root above no agent: a trace of its own, not the run's)
        return []
    moved: dict[str, list[int]] = defaultdict(list)
    for pk, span, lane in rows:
        if whole.lanes[span["span_id"]] != lane:
            moved[whole.lanes[span["span_id"]]].append(pk)
    refused: Refusals = []
    if moved:
        service.drop_sent_steps(trial)
        for lane, pks in moved.items():
            for start in range(0, len(pks), 1000):
                ReceivedSpan.objects.filter(pk__in=pks[start : start + 1000]).update(lane=lane)
        refused = _write_steps(trial, whole)
    if main := trial.trajectories.filter(path=service.TRAJECTORY_PATH).first():
        service.name_agent(main, whole.trajectories[0]["agent"])
    trial.refresh_from_db()
    events = []
    if whole.reward is not None:
        events.append(service.reward_event(trial, {"reward": whole.reward}))
    ended = whole.finished
    reason = {"reason": str(ended.status.get("message") or "")} if ended.failed else {}
    events.append(service.completion_event(trial, {"status": "failed" if ended.failed else "completed", **reason}))
    service.add_items(trial, events, [])
    return refused


def _span_of(steps: list[dict[str, Any]], error: dict[str, str]) -> tuple[str, str]:
    index = int(error["path"].removeprefix("steps[").rstrip("]"))
    otel = steps[index].get("extra", {}).get("otel", {})
    return str(otel.get("span_id", "?")), f"span {otel.get('span_id', '?')} {otel.get('name', '')!r}: {error['error']}"
