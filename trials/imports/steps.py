"""Writing a trajectory's steps, tool calls and observations: one insert per table per batch.
Each step's JSON is served from its place in the stored file, or from a copy in a blob.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from django.db import transaction

from trials.imports.blobs import StepBodies
from trials.imports.rows import column_count, sign_step, step_row, step_tokens
from trials.ingest.formats.atif import EMBEDDED_MARK
from trials.ingest.jsonio import dumps_bytes
from trials.ingest.records import (
    PackError,
    ParsedStep,
    ParsedTrajectory,
)
from trials.models import (
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
    Trial,
)
from trials.storage.bulk_insert import insert_rows

STEP_BATCH = 500


PREVIEW_CHARS = 2000


class Written(NamedTuple):
    steps: int
    tool_calls: int


def write_trajectory(
    trial: Trial, parsed: ParsedTrajectory, position: int, blobs: dict[str, int], spool: Path
) -> Written:
    """Steps go in batches from a (possibly streaming) parser; a broken file rolls back alone.

    A step is served from its place in the stored file when the parser found it (ATIF's
    `step_spans`); otherwise from a copy of its JSON in a blob of the trajectory's own.
    """
    blob_id = file_blob(parsed, blobs)
    bodies = None if parsed.steps_in_file and blob_id is not None else StepBodies(spool)
    try:
        with transaction.atomic():
            trajectory = trajectory_row(trial, parsed, position, blob_id)
            trajectory.save(force_insert=True)
            count = calls = max_tokens = 0
            batch = []
            for step in parsed.steps:
                batch.append(step)
                calls += len(step.tool_calls)
                max_tokens = max(max_tokens, step_tokens(step))
                if len(batch) >= STEP_BATCH:
                    write_steps([(trajectory, batch, bodies)])
                    count += len(batch)
                    batch = []
            write_steps([(trajectory, batch, bodies)])
            count += len(batch)
            trajectory.step_bodies_id = bodies.store() if bodies is not None else blob_id
            trajectory.step_count = count
            trajectory.max_step_tokens = column_count(max_tokens)
            trajectory.problems = [p.as_dict() for p in parsed.problems]
            trajectory.withheld = parsed.withheld  # (known once its steps are read)
            trajectory.save(update_fields=["step_bodies", "step_count", "max_step_tokens", "problems", "withheld"])
            return Written(count, calls)
    except PackError as exc:  # a streamed file that turns out to be broken half-way
        exc.problem.kept = "the raw bytes; no steps of this file"
        parsed.problems.append(exc.problem)  # for the import's report
        trial.problems.append(exc.problem.as_dict())
        return Written(0, 0)
    finally:
        if bodies is not None:
            bodies.discard()


def previous_chain(trajectory: Trajectory, index: int) -> str:
    """The prefix signature a run of steps from `index` continues (a batch after the first reads it back)."""
    if index == 0:
        return ""
    return trajectory.steps.filter(index=index - 1).values_list("chain", flat=True).first() or ""


def file_blob(parsed: ParsedTrajectory, blobs: dict[str, int]) -> int | None:
    """The blob of the trajectory's file (an embedded subagent's: its parent's file)."""
    return blobs.get(parsed.path.partition(EMBEDDED_MARK)[0])


def trajectory_row(trial: Trial, parsed: ParsedTrajectory, position: int, blob_id: int | None) -> Trajectory:
    """The trajectory's row, not saved yet."""
    return Trajectory(
        trial=trial,
        path=parsed.path[:1000],
        role=parsed.role,
        step_name=parsed.step_name[:200],
        position=position,
        blob_id=blob_id,
        withheld=parsed.withheld,
        schema_version=parsed.schema_version[:40],
        session_id=parsed.session_id[:200],
        trajectory_id=parsed.trajectory_id[:200],
        agent=parsed.agent,
        final_metrics=parsed.final_metrics,
        header=parsed.header,
    )


StepChunk = tuple[Trajectory, list[ParsedStep], StepBodies | None]


def write_steps(chunks: list[StepChunk], segment: int | None = None) -> None:
    """Steps of one or more trajectories, with their tool calls and observations: one insert per table.

    A chunk is a run of one trajectory's steps in order; several chunks are whole
    trajectories each. `bodies`: where the steps' JSON is copied to; None when each is
    served from its span in the file (or, given `segment`, in that blob: a live POST's steps).
    """
    chunks = [chunk for chunk in chunks if chunk[1]]
    if not chunks:
        return
    rows = []
    for trajectory, parsed_steps, bodies in chunks:
        chain = previous_chain(trajectory, parsed_steps[0].index)
        for step in parsed_steps:
            if bodies is None:
                assert step.span is not None  # (no bodies: every step's span in the file is known)
                offset, size = step.span
            else:
                body = dumps_bytes(step.raw)
                offset, size = bodies.add(body), len(body)
            signed = sign_step(step, chain)
            chain = signed.chain
            rows.append({**step_row(trajectory, step, offset, size, signed), "segment_id": segment})
    insert_rows(Step, rows)
    step_pks = {
        (trajectory_id, index): pk
        for trajectory_id, index, pk in Step.objects.filter(
            trajectory_id__in=[trajectory.pk for trajectory, _, _ in chunks],
            index__gte=min(steps[0].index for _, steps, _ in chunks),
            index__lte=max(steps[-1].index for _, steps, _ in chunks),
        ).values_list("trajectory_id", "index", "pk")
    }
    calls, observations = [], []
    for trajectory, parsed_steps, _ in chunks:
        for step in parsed_steps:
            step_pk = step_pks[trajectory.pk, step.index]
            for call in step.tool_calls:
                calls.append(
                    {
                        "step_id": step_pk,
                        "trial_id": trajectory.trial_id,
                        "tool_call_id": call.tool_call_id[:200],
                        "function_name": call.function_name[:200],
                        "arguments": call.arguments,
                        "skill": call.skill,
                    }
                )
            for obs in step.observations:
                observations.append(
                    {
                        "step_id": step_pk,
                        "source_call_id": str(obs.source_call_id or "")[:200],
                        "content_size": obs.content_size,
                        "preview": obs.content_text[:PREVIEW_CHARS],
                        "subagent_refs": obs.subagent_refs,
                    }
                )
    insert_rows(ToolCall, calls)
    insert_rows(ObservationResult, observations)
