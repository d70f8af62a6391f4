"""A live trial's trajectories: the main one and subagents', their steps written a POST at a time,
compacted into an ATIF file on completion, or derived from the events of a trial that sent none.

Split from service.py (the commands' writes), which calls these; they call nothing of it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.db.models import F, QuerySet

from trials import search
from trials.imports.blobs import StepBodies, release_blobs, store_file
from trials.imports.rows import step_tokens
from trials.imports.steps import write_steps, write_trajectory
from trials.ingest import redaction
from trials.ingest.formats import atif
from trials.ingest.jsonio import dumps_bytes
from trials.ingest.values import as_dict
from trials.live.derive import SCHEMA_VERSION, derive_trajectory
from trials.models import Step, Trajectory, Trial
from trials.storage.bulk_insert import set_integers

TRAJECTORY_PATH = "agent/trajectory.json"
DERIVED_PATH = "agent/trajectory.derived.json"


def spool() -> Path:
    return Path(settings.IMPORT_SPOOL_DIR) / "live"


def subagent_trajectory(trial: Trial, trajectory_id: str, agent: dict[str, Any]) -> Trajectory:
    """A subagent's trajectory of the trial (an OTLP agent span under the top one), made on its first steps."""
    path = f"{TRAJECTORY_PATH}#subagent/{trajectory_id}"[:1000]
    return _trajectory_at(trial, path, "subagent", trajectory_id, agent, trajectory_id, trial.trajectories.count())


def sent_trajectories(trial: Trial) -> QuerySet[Trajectory]:
    """The trajectories a live trial's POSTs wrote: its main one and its subagents'."""
    return trial.trajectories.filter(path__startswith=TRAJECTORY_PATH)


def drop_sent_steps(trial: Trial) -> None:
    """Take away every step a running trial's POSTs wrote (main and subagents), to write them again whole."""
    search.unindex(trial)
    sent = sent_trajectories(trial)
    segments = set(Step.objects.filter(trajectory__in=sent).values_list("segment_id", flat=True))
    sent.delete()
    Trial.objects.filter(pk=trial.pk).update(step_count=0, tool_call_count=0)
    release_blobs(segments)


def name_agent(trajectory: Trajectory, agent: dict[str, Any]) -> None:
    """Name the agent of a trajectory started as "unknown" (an OTLP trial's first batches may come
    before its agent span, which names it)."""
    if agent.get("name") in (None, "", "unknown") or trajectory.agent.get("name") != "unknown":
        return
    trajectory.agent = {**trajectory.agent, **agent}
    trajectory.header = {**trajectory.header, "agent": trajectory.agent}
    trajectory.save(update_fields=["agent", "header"])


def live_trajectory(trial: Trial) -> Trajectory:
    """The trial's main trajectory, made on the first steps sent."""
    live = as_dict(trial.provenance.get("live", {}).get("agent"))
    config = trial.configuration
    agent = {
        "name": str(live.get("name") or (config.agent_name if config else "") or "unknown"),
        "version": str(live.get("version") or (config.agent_version if config else "") or "unknown"),
        **({"model_name": str(live["model_name"])} if live.get("model_name") else {}),
    }
    return _trajectory_at(trial, TRAJECTORY_PATH, "main", trial.session_id or f"benchviewer-trial-{trial.pk}", agent)


def _trajectory_at(
    trial: Trial,
    path: str,
    role: str,
    session_id: str,
    agent: dict[str, Any],
    trajectory_id: str = "",
    position: int = 0,
) -> Trajectory:
    """The trial's trajectory at `path`, or a new one with this ATIF header."""
    trajectory = trial.trajectories.filter(path=path).first()
    if trajectory is None:
        header = {"schema_version": SCHEMA_VERSION, "session_id": session_id, "agent": agent}
        trajectory = Trajectory.objects.create(
            trial=trial,
            path=path,
            role=role,
            position=position,
            schema_version=SCHEMA_VERSION,
            session_id=session_id,
            trajectory_id=trajectory_id,
            agent=agent,
            header=header,
        )
    return trajectory


def store_steps(
    trial: Trial, trajectory: Trajectory, items: list[dict[str, Any]], named: dict[str, dict[str, Any]]
) -> tuple[int, int]:
    """The new steps, parsed, scrubbed, their bodies one segment blob, written and indexed; (new, duplicates)."""
    unique = {item["step_id"]: item for item in reversed(items)}
    known = set(trajectory.steps.filter(index__in=[n - 1 for n in unique]).values_list("index", flat=True))
    parsed = [atif.parse_step(unique[n], n - 1) for n in sorted(unique) if n - 1 not in known]
    if not parsed:
        return 0, len(items)
    new = [redaction.scrub_step(step, named) for step in parsed] if named else parsed
    segment = StepBodies(spool())
    try:
        for step in new:
            body = dumps_bytes(step.raw)
            step.span = (segment.add(body), len(body))
        segment_id = segment.store()
    finally:
        segment.discard()
    write_steps([(trajectory, new, None)], segment=segment_id)
    withheld = trajectory.withheld or any(a is not b for a, b in zip(new, parsed, strict=True))
    tokens = max(trajectory.max_step_tokens or 0, *(step_tokens(s) for s in new)) or None
    calls = sum(len(s.tool_calls) for s in new)
    Trajectory.objects.filter(pk=trajectory.pk).update(
        step_count=F("step_count") + len(new), max_step_tokens=tokens, withheld=withheld
    )
    Trial.objects.filter(pk=trial.pk).update(
        step_count=F("step_count") + len(new), tool_call_count=F("tool_call_count") + calls
    )
    written = trajectory.steps.filter(index__in=[s.index for s in new]).values_list("pk", flat=True)
    search.index_new_steps(trial, list(written))
    return len(new), len(items) - len(new)


def compact(trajectory: Trajectory) -> None:
    """The trajectory's ATIF file, stored as a blob like an imported file's bytes, its steps then served
    from their places in it: the segments its POSTs wrote (and an earlier file) go, so one copy stays."""
    places: dict[int, int] = {}
    with tempfile.NamedTemporaryFile(dir=_spool_dir(), suffix=".json", delete=False) as f:
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


def _spool_dir() -> Path:
    spool().mkdir(parents=True, exist_ok=True)
    return spool()


def derive_from_events(trial: Trial) -> Trajectory | None:
    """A trajectory made from the trial's runtime events, stored as an imported ATIF file would be."""
    raws = list(trial.events.values_list("raw", flat=True))
    if not raws:
        return None
    agent = as_dict(trial.provenance.get("live", {}).get("agent"))
    data = derive_trajectory(raws, session_id=trial.session_id, agent_name=str(agent.get("name") or ""))
    folder = Path(tempfile.mkdtemp(dir=_spool_dir()))
    path = folder / "trajectory.json"
    path.write_bytes(orjson.dumps(data))
    try:
        blob = store_file(path)
        parsed = atif.read_trajectory(path, DERIVED_PATH)
        position = trial.trajectories.count()
        written = write_trajectory(trial, parsed, position, {DERIVED_PATH: blob.pk}, folder)
    finally:
        path.unlink(missing_ok=True)
        folder.rmdir()
    trajectory = trial.trajectories.get(path=DERIVED_PATH)
    trajectory.derived = True
    trajectory.save(update_fields=["derived"])
    Trial.objects.filter(pk=trial.pk).update(step_count=written.steps, tool_call_count=written.tool_calls)
    return trajectory
