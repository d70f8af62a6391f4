"""A trial written while it runs, a batch at a time: every write of a live trial (a runner's commands,
OTLP spans), whose service (trials/live/) decides what to write from what each request parsed.

What a request parsed goes through the import's redaction stage (`redaction.withhold_redacted`)
here, in one call before any of its rows is written (`add_post`, `add_spans`). The rows are an
import's (rows.py `trial_row`, `event_values`, `write_criteria`, `write_permissions`; steps.py
`trajectory_row`, `write_steps`, `write_trajectory`), so a live trial is stored as an imported one
is. An append costs its batch: a POST's steps are a segment blob of their own and the counts move by
what it adds; on completion each trajectory's segments are compacted into its ATIF file. An OTLP
trial's received spans (ReceivedSpan) are kept, laned and emptied here too.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet

from trials.imports.blobs import StepBodies, release_blobs, store_file
from trials.imports.rows import (
    apply_completeness,
    event_values,
    get_configuration,
    get_dataset,
    get_task,
    step_tokens,
    trial_row,
    upsert_job,
    write_criteria,
    write_permissions,
)
from trials.imports.steps import trajectory_row, write_steps, write_trajectory
from trials.ingest.formats.otlp import Span, is_agent
from trials.ingest.jsonio import dumps_bytes
from trials.ingest.records import (
    ParsedCriterion,
    ParsedEvent,
    ParsedJob,
    ParsedPermission,
    ParsedStep,
    ParsedTrajectory,
    ParsedTrial,
)
from trials.ingest.redaction import withhold_redacted
from trials.models import Job, ReceivedSpan, RuntimeEvent, Step, Trajectory, Trial
from trials.storage.bulk_insert import insert_rows, set_integers

REWARD_FIELDS = ["rewards", "reward", "failure_category", "provenance", "status"]


def start_trial(parsed: ParsedTrial, job: ParsedJob, started_by: Any, seen_at: datetime) -> Trial:
    """The running trial's row (its job's found by key, or made), saved in the caller's transaction."""
    job_row, _ = upsert_job(job, None)
    dataset = get_dataset(parsed.dataset)
    task, configuration = get_task(dataset, parsed.task), get_configuration(parsed.configuration)
    trial = trial_row(parsed, None, job_row, dataset, task, configuration)
    trial.started_by, trial.live_seen_at = started_by, seen_at
    apply_completeness(trial)
    trial.save(force_insert=True)
    return trial


def seen(trial: Trial, at: datetime) -> None:
    """The runner was heard from: a live page tells a trial that is silent from one that runs."""
    Trial.objects.filter(pk=trial.pk).update(live_seen_at=at)


def add_post(trial: Trial, post: ParsedTrial, trajectory: Trajectory | None, spool: Path) -> list[ParsedStep]:
    """What one request parsed for a running trial (`post`: its new events, and as its one trajectory the new
    steps of `trajectory`), withheld by the redaction stage, then written; the steps as written.
    `post.redactions`: the trial's before, and after the call those of its events too."""
    withhold_redacted(post)
    add_events(trial, post.events)
    steps = [step for parsed in post.trajectories for step in parsed.steps]
    if trajectory is not None and steps:
        add_steps(trial, trajectory, steps, any(parsed.withheld for parsed in post.trajectories), spool)
    return steps


def add_events(trial: Trial, events: Iterable[ParsedEvent]) -> None:
    insert_rows(RuntimeEvent, [event_values(event, trial.pk, None) for event in events])


def add_trajectory(trial: Trial, parsed: ParsedTrajectory, position: int) -> Trajectory:
    """A trajectory row made before its steps come (they are appended by `add_steps`)."""
    trajectory = trajectory_row(trial, parsed, position, None)
    trajectory.save(force_insert=True)
    return trajectory


def add_steps(trial: Trial, trajectory: Trajectory, steps: list[ParsedStep], withheld: bool, spool: Path) -> None:
    """New steps after those the trajectory holds, their bodies one segment blob; the counts moved by them."""
    segment = StepBodies(spool)
    try:
        for step in steps:
            body = dumps_bytes(step.raw)
            step.span = (segment.add(body), len(body))
        segment_id = segment.store()
    finally:
        segment.discard()
    write_steps([(trajectory, steps, None)], segment=segment_id)
    tokens = max(trajectory.max_step_tokens or 0, *(step_tokens(s) for s in steps)) or None
    Trajectory.objects.filter(pk=trajectory.pk).update(
        step_count=F("step_count") + len(steps), max_step_tokens=tokens, withheld=trajectory.withheld or withheld
    )
    calls = sum(len(s.tool_calls) for s in steps)
    Trial.objects.filter(pk=trial.pk).update(
        step_count=F("step_count") + len(steps), tool_call_count=F("tool_call_count") + calls
    )


def name_agent(trajectory: Trajectory, agent: dict[str, Any]) -> None:
    trajectory.agent = {**trajectory.agent, **agent}
    trajectory.header = {**trajectory.header, "agent": trajectory.agent}
    trajectory.save(update_fields=["agent", "header"])


def drop_trajectories(trial: Trial, trajectories: QuerySet[Trajectory]) -> None:
    """These trajectories of a running trial gone with their steps, to be written again whole."""
    segments = set(Step.objects.filter(trajectory__in=trajectories).values_list("segment_id", flat=True))
    trajectories.delete()
    Trial.objects.filter(pk=trial.pk).update(step_count=0, tool_call_count=0)
    release_blobs(segments)


def record_reward(trial: Trial, criteria: list[ParsedCriterion] | None) -> None:
    """The trial's reward fields as set on it; its criteria replaced by these, when the reward names some."""
    trial.save(update_fields=REWARD_FIELDS)
    if criteria is not None:
        trial.criteria.all().delete()
        write_criteria(trial, criteria)


def add_criteria(trial: Trial, criteria: list[ParsedCriterion]) -> None:
    """Criteria the trial's own records name (a trace's evaluations), beside those its reward named."""
    write_criteria(trial, criteria)


def add_spans(trial: Trial, post: ParsedTrial, lane: str) -> None:
    """OTLP spans received for a live trial (`post.received_spans`, new ones), withheld by the redaction stage
    and kept in `lane`, each once."""
    withhold_redacted(post)
    rows = [
        {
            "trial_id": trial.pk,
            "trace_id": span["trace_id"],
            "span_id": span["span_id"],
            "span": span,
            "lane": lane,
            "agent": is_agent(Span(**span)),
        }
        for span in post.received_spans
    ]
    try:
        with transaction.atomic():  # (COPY on PostgreSQL: a thousand spans in one round trip)
            insert_rows(ReceivedSpan, rows)
    except IntegrityError:  # another worker read the same batch a moment ago: its spans are no news
        ReceivedSpan.objects.bulk_create((ReceivedSpan(**row) for row in rows), ignore_conflicts=True)


def set_lanes(lanes: dict[str, list[int]]) -> None:
    """Each received span (by pk) in the lane, the trajectory, its steps are written under."""
    for lane, pks in lanes.items():
        for start in range(0, len(pks), 1000):
            ReceivedSpan.objects.filter(pk__in=pks[start : start + 1000]).update(lane=lane)


def empty_spans(spans: QuerySet[ReceivedSpan]) -> None:
    """Received spans emptied of their bodies and lanes (their ids kept, against a retry)."""
    spans.update(span={}, lane="")


def finish(trial: Trial, permissions: Iterable[ParsedPermission], at: datetime) -> None:
    """The trial's completion as set on it; the spans it received emptied (their ids kept, against a
    retry), its permission decisions written from its events, and its job finished once none of its
    trials runs."""
    trial.save()
    ReceivedSpan.objects.filter(trial=trial).update(span={})
    trial.permissions.all().delete()
    write_permissions(trial, permissions)
    if trial.job_id is not None:
        running = Trial.objects.filter(job_id=trial.job_id, status=Trial.Status.RUNNING)
        unfinished = Job.objects.filter(pk=trial.job_id, finished_at__isnull=True)
        unfinished.exclude(pk__in=running.values("job_id")).update(finished_at=at)


def compact(trajectory: Trajectory, spool: Path) -> None:
    """The trajectory's ATIF file, stored as a blob like an imported file's bytes, its steps then served
    from their places in it: the segments its POSTs wrote (and an earlier file) go, so one copy stays."""
    places: dict[int, int] = {}
    spool.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=spool, suffix=".json", delete=False) as f:
        for index, piece in trajectory.atif_pieces():  # (its header and step bodies, in order)
            if index is not None:
                places[index] = f.tell()
            f.write(piece)
    path = Path(f.name)
    try:
        blob = store_file(path)
    finally:
        path.unlink(missing_ok=True)
    steps = list(trajectory.steps.values_list("pk", "index", "segment_id"))
    before = {trajectory.blob_id, trajectory.step_bodies_id, *(segment for _, _, segment in steps)}
    set_integers(Step, "body_offset", {pk: places[index] for pk, index, _ in steps})
    trajectory.steps.update(segment=None)
    trajectory.blob = trajectory.step_bodies = blob
    trajectory.save(update_fields=["blob", "step_bodies"])
    release_blobs(before - {blob.pk})


def add_derived_trajectory(trial: Trial, parsed: ParsedTrajectory, blob_id: int, folder: Path) -> Trajectory:
    """A trajectory Benchviewer made from the trial's events, written as an imported file's is."""
    written = write_trajectory(trial, parsed, trial.trajectories.count(), {parsed.path: blob_id}, folder)
    trajectory = trial.trajectories.get(path=parsed.path)
    trajectory.derived = True
    trajectory.save(update_fields=["derived"])
    Trial.objects.filter(pk=trial.pk).update(step_count=written.steps, tool_call_count=written.tool_calls)
    return trajectory


def note_problem(trial_key: str, problem: dict[str, Any]) -> None:
    """A problem kept on the trial (once), under its row lock (the caller's transaction)."""
    trial = Trial.objects.select_for_update(no_key=True).filter(key=trial_key).first()
    if trial is not None and problem not in trial.problems:
        trial.problems = [*trial.problems, problem]
        trial.save(update_fields=["problems"])
