"""A live trial's OpenTelemetry spans (`POST /v1/traces`, trials/live/otlp.py) written through the live
service, and the spans it has received (ReceivedSpan): this module decides what of them is kept and
in which lane, and trials/imports/appends.py writes it (the re-scrub and the completion only blank
their bodies).

The request keeps the body whole (trials/live/batches.py); off the request (a Celery task with a
broker, the embedded worker's thread without) its new spans are kept (`record`: ReceivedSpan rows,
lane PENDING) and their steps written (`process`), in the order they arrived, so an exporter's answer
waits neither for the spans nor for a trace's end, which reads every span of the trial (O(trial)).
What `process` could not write is a problem on the trial (`note_problem`), not only a log line.

A span is sent once it has ended, so a trace arrives leaves first and its root span last. Pending
spans are read as part of a trace (`trace_trial(..., partial=True)`): an agent span whose parent has
not come is read as a subagent; a span whose agent span has not come, as the main agent's. When the
root span has come above an agent span the run is over: the trial is read again from all its
spans, its steps written again if any span's agent has changed, and the trial completed.

A span is stored withheld by the redactions its trial has (`Trial.redactions`), by the importer's
redaction stage as the trial's steps are (imports/appends.py `add_spans`); a later redaction scrubs
it again (imports/rescrub.py), and the trial's completion, by whatever path, empties the bodies
(live/service.py): no stored span keeps a redacted value. A trial that has ended takes no
new span: the body is refused whole (`screened`), nothing of it stored.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from django.db import transaction

from trials.imports import appends
from trials.ingest.formats import otlp
from trials.ingest.records import ParsedTrial, Problem
from trials.live import service, trajectories
from trials.models import ReceivedSpan, Trial

log = logging.getLogger(__name__)

Refusals = list[tuple[str, str]]  # (span id, why)
PROCESS_AT_ONCE = 500  # pending spans written in one transaction of `process`
WHERE = "POST /v1/traces"
PROBLEM_CHARS = 1000  # a problem's message, cut here
PENDING = "pending"  # a ReceivedSpan's lane until its steps are written (no span id: those are 16 hex digits)


def screened(by_trial: dict[str, list[otlp.Span]], user: Any) -> tuple[list[str], Refusals]:
    """What the request answers before the body is read (one query): why it is refused whole, each of
    its trials that has ended, named with its state, for which a span is new (a retry of spans it stored
    before is no news); and the spans of a trial another account started, each with why. Nothing is
    written here; the task (`record`) looks again."""
    keys = {f"lime:{trial_id}"[:500]: trial_id for trial_id in by_trial}  # (as service.start_trial keys it)
    ended, refused = [], []
    for trial in Trial.objects.filter(key__in=keys).only("pk", "key", "status", "started_by_id"):
        trial_id = keys[trial.key]
        if not trial.writable_by(user):
            refused += [(s.span_id, f"trial {trial_id!r} was started by another account") for s in by_trial[trial_id]]
        elif trial.status != Trial.Status.RUNNING and _not_received(trial, by_trial[trial_id]):
            ended.append(_has_ended(trial_id, trial))
    return ended, refused


def _has_ended(trial_id: str, trial: Trial) -> str:
    return f"trial {trial_id!r} (Benchviewer trial {trial.pk}) is {trial.status}: it has ended and takes no new span"


def record(trial_id: str, spans: list[otlp.Span], user: Any) -> tuple[Refusals, Trial | None]:
    """One trial's spans into its live trial: the spans refused, each with why; and the trial, if its
    pending spans are to be written now (`process`; trials/live/batches.py calls both).

    A span stored before (the exporter sent its batch again, not having heard back) is skipped.
    """
    trace = otlp.trace_trial(trial_id, spans, partial=True)
    spine: dict[str, Any] = {"benchmark": trace.benchmark, "agent": trace.agent}
    if trace.attempt is not None:
        spine["attempt"] = trace.attempt
    trial, _ = service.start_trial(spine, started_by=user)
    if not trial.writable_by(user):
        return [(s.span_id, f"trial {trial_id!r} was started by another account") for s in spans], None
    # No row lock here: the trial's (held by `process` while it writes steps) would make the exporter wait.
    # A retry racing the first is stored once by the table's unique (trial, trace, span).
    new = _not_received(trial, spans)
    trial.refresh_from_db(fields=["status"])
    if new and trial.status != Trial.Status.RUNNING:  # (it ended since the request looked: `screened`)
        note_problem(trial_id, f"{len(new)} spans received as it ended were not written: {_has_ended(trial_id, trial)}")
        return [(s.span_id, _has_ended(trial_id, trial)) for s in spans], None
    _store(trial, new)
    # (a retry asks again: the first task may have been lost)
    return [], trial if trial.status == Trial.Status.RUNNING else None


def _store(trial: Trial, new: list[otlp.Span]) -> None:
    """The new spans kept as received, withheld by the trial's redactions, their steps to be written (PENDING)."""
    named = trial.redactions() if new else {}
    spans = [vars(s) for s in new]
    received = ParsedTrial(trial.key, trial.source_format, trial.name, received_spans=spans, redactions=named)
    appends.add_spans(trial, received, PENDING)


def process(trial_pk: int) -> None:
    """The steps of the trial's pending spans written, in the order they arrived, `PROCESS_AT_ONCE` a
    transaction under its row lock (so a request of the trial's waits one such at most); then, if the
    trace's root span has come above an agent span, the run's end (`_finish`). Idempotent: a span written
    before is not pending; a trial that is no longer running is left as it is, its pending spans emptied
    as its completion empties all (a body that raced its end). Steps the live service refuses are logged."""
    more, rooted = True, False
    while more:
        more, rooted = _process_some(trial_pk, rooted)


def _process_some(trial_pk: int, rooted: bool) -> tuple[bool, bool]:
    """Up to PROCESS_AT_ONCE pending spans written; whether more are pending, and whether a root span was
    among the spans written (`rooted`: among those of the calls before)."""
    with transaction.atomic():
        # (NO KEY UPDATE: a request's INSERT of a span, whose foreign key takes KEY SHARE on the trial, goes on)
        trial = Trial.objects.select_for_update(no_key=True).filter(pk=trial_pk).first()
        if trial is None:
            return False, rooted
        pending = ReceivedSpan.objects.filter(trial=trial, lane=PENDING)
        if trial.status != Trial.Status.RUNNING:
            appends.empty_spans(pending)  # (no step of it is written: it came as the trial ended)
            return False, rooted
        trial_id = str((trial.benchmark or {}).get("trialId") or trial.key.removeprefix("lime:"))
        rows = list(pending.order_by("pk").values_list("pk", "span")[: PROCESS_AT_ONCE + 1])
        more, rows = len(rows) > PROCESS_AT_ONCE, rows[:PROCESS_AT_ONCE]
        spans = [otlp.Span(**{**span, "order": pk}) for pk, span in rows]
        refused: Refusals = []
        if spans:
            trace = otlp.trace_trial(trial_id, spans, partial=True)
            lanes: dict[str, list[int]] = defaultdict(list)
            for (pk, _), span in zip(rows, spans, strict=True):
                lanes[trace.lanes[span.span_id]].append(pk)
            appends.set_lanes(lanes)
            refused = _write_steps(trial, trace)
        # A root span ends last: with an agent among the trial's spans, the run is over.
        rooted = rooted or any(not s.parent_id for s in spans)
        # (nothing pending: a retry of the root's batch, its first task maybe lost; its body still has it)
        root = rooted or (not spans and ReceivedSpan.objects.filter(trial=trial, span__parent_id="").exists())
        if root and not more and ReceivedSpan.objects.filter(trial=trial, agent=True).exists():
            refused += _finish(trial, trial_id)
    if refused:
        note_problem(trial_id, f"{len(refused)} spans' steps refused: {'; '.join(why for _, why in refused[:3])}")
    return more, rooted


def note_problem(trial_id: str, message: str) -> None:
    """A failure of the spans' path off the request kept on the trial's problems (its page lists them),
    not only logged; the same one once."""
    log.warning("trial %r: %s", trial_id, message[:300])
    problem = Problem(WHERE, message[:PROBLEM_CHARS], severity="error", kept="the trial's other steps").as_dict()
    with transaction.atomic():
        appends.note_problem(f"lime:{trial_id}"[:500], problem)


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
            trajectory = trajectories.live_trajectory(trial)
        else:
            trajectory = trajectories.subagent_trajectory(trial, document["trajectory_id"], document["agent"])
        trajectories.name_agent(trajectory, document["agent"])
        for number, step in enumerate(steps, start=trajectory.step_count + 1):
            step["step_id"] = number
        accepted = service.add_items(trial, [], steps, trajectory=trajectory)
        refused += [_span_of(steps, error) for error in accepted.errors]
    return refused


def _finish(trial: Trial, trial_id: str) -> Refusals:
    """The trial read again from every span it received. With a top agent span under the root, its
    steps are written again if a span's agent differs from the one it was written under (as an
    import of the whole trace writes them), its main agent named, its reward and its evaluations' criteria
    recorded and the trial completed (failed when that span failed), which empties the spans' bodies: their
    ids stay, against a retry."""
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
        trajectories.drop_sent_steps(trial)
        appends.set_lanes(moved)
        refused = _write_steps(trial, whole)
    if main := trial.trajectories.filter(path=trajectories.TRAJECTORY_PATH).first():
        trajectories.name_agent(main, whole.trajectories[0]["agent"])
    trial.refresh_from_db()
    events = []
    if whole.reward is not None:
        events.append(service.reward_event(trial, {"reward": whole.reward}))
    ended = whole.finished
    reason = {"reason": str(ended.status.get("message") or "")} if ended.failed else {}
    events.append(service.completion_event(trial, {"status": "failed" if ended.failed else "completed", **reason}))
    service.add_items(trial, events, [])
    if whole.criteria:  # (its `gen_ai.evaluation.result` events: the criteria an import of the trace reads)
        appends.add_criteria(trial, whole.criteria)
    return refused


def _span_of(steps: list[dict[str, Any]], error: dict[str, str]) -> tuple[str, str]:
    index = int(error["path"].removeprefix("steps[").rstrip("]"))
    otel = steps[index].get("extra", {}).get("otel", {})
    return str(otel.get("span_id", "?")), f"span {otel.get('span_id', '?')} {otel.get('name', '')!r}: {error['error']}"
