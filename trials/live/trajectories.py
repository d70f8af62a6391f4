"""A live trial's trajectories: the main one and subagents', their steps added a POST at a time,
compacted into an ATIF file on completion, or derived from the events of a trial that sent none.
What to write is decided here; trials/imports/appends.py writes it.

Split from service.py (the commands' writes), which calls these; they call nothing of it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.db.models import QuerySet

from trials import search
from trials.imports import appends
from trials.imports.blobs import store_file
from trials.ingest.formats import atif
from trials.ingest.records import ParsedStep, ParsedTrajectory
from trials.ingest.values import as_dict
from trials.live.derive import SCHEMA_VERSION, derive_trajectory
from trials.models import Trajectory, Trial

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
    appends.drop_trajectories(trial, sent_trajectories(trial))


def name_agent(trajectory: Trajectory, agent: dict[str, Any]) -> None:
    """Name the agent of a trajectory started as "unknown" (an OTLP trial's first batches may come
    before its agent span, which names it)."""
    if agent.get("name") in (None, "", "unknown") or trajectory.agent.get("name") != "unknown":
        return
    appends.name_agent(trajectory, agent)


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
        parsed = ParsedTrajectory(
            path, role, SCHEMA_VERSION, session_id, trajectory_id, agent, None, header, steps=[], problems=[]
        )
        trajectory = appends.add_trajectory(trial, parsed, position)
    return trajectory


def new_steps(trajectory: Trajectory, items: list[dict[str, Any]]) -> list[ParsedStep]:
    """The steps the trajectory does not hold yet (by step_id; the first of repeats in one POST), parsed."""
    unique = {item["step_id"]: item for item in reversed(items)}
    known = set(trajectory.steps.filter(index__in=[n - 1 for n in unique]).values_list("index", flat=True))
    return [atif.parse_step(unique[n], n - 1) for n in sorted(unique) if n - 1 not in known]


def index_steps(trial: Trial, trajectory: Trajectory, steps: list[ParsedStep]) -> None:
    """New steps of the trajectory, written (appends.add_post), in the step search index."""
    if not steps:
        return
    written = trajectory.steps.filter(index__in=[s.index for s in steps]).values_list("pk", flat=True)
    search.index_new_steps(trial, list(written))


def compact(trajectory: Trajectory) -> None:
    """The trajectory's ATIF file made of its steps, which are served from it from then on."""
    appends.compact(trajectory, spool())


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
        trajectory = appends.add_derived_trajectory(trial, parsed, blob.pk, folder)
    finally:
        path.unlink(missing_ok=True)
        folder.rmdir()
    return trajectory
