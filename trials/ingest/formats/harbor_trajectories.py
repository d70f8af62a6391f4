"""ATIF trajectory files that come without a trial folder (alone, or with their
continuations and subagents), a Harbor traces export, a task.toml; and the check that a
trial's continuations are all there (its subagents': trials.ingest.atif_steps).
"""

from __future__ import annotations

import glob
import re
import tomllib
from pathlib import Path
from typing import Any

from trials.ingest.formats.atif import (
    EMBEDDED_MARK,
    embedded_subagents,
    final_totals,
    read_trajectory,
)
from trials.ingest.records import (
    ConfigurationRef,
    PackError,
    ParsedDocument,
    ParsedPack,
    ParsedTrajectory,
    ParsedTrial,
    Problem,
)


def parse_task_toml(path: Path, rel: str) -> ParsedPack:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PackError(Problem(rel, f"malformed TOML: {exc}", kept="the raw bytes")) from exc
    task = data.get("task") or {}
    kind = (
        "harbor-task"
        if (
            "task" in data
            or "verifier" in data
            or "environment" in data
            or "schema_version" in data
            or "version" in data
        )
        else "toml"
    )
    if "scoring" in data or "dimensions" in data or "criteria" in data or "judge" in data:
        kind = "rewardkit-config"
    return ParsedPack(
        kind=kind,
        documents=[
            ParsedDocument(
                kind=kind,
                path=rel,
                title=str(task.get("name") or path.parent.name),
                data=data,
                counts={"steps": len(data.get("steps") or [])},
            )
        ],
    )


def is_traces_export(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(row, dict) and "conversations" in row for row in data[:5])
    )


def parse_traces_export(data: list, rel: str) -> ParsedPack:
    conversations = sum(len(row.get("conversations") or []) for row in data)
    return ParsedPack(
        kind="harbor-traces",
        documents=[
            ParsedDocument(
                kind="harbor-traces",
                path=rel,
                title=str(data[0].get("task") or rel),
                data=data,
                counts={"rows": len(data), "messages": conversations},
            )
        ],
    )


def parse_lone_trajectory(path: Path, rel: str) -> ParsedPack:
    """A trajectory uploaded on its own: a trial with only a trajectory (incomplete, but evidence)."""
    pack = _trial_of_one_file(path, rel)
    [trial] = pack.trials  # (_trial_of_one_file's one)
    flag_missing_continuations(trial)
    return pack


KEY_PREFIX = "atif:"  # of a trial made of trajectory files alone


def _trial_of_one_file(path: Path, rel: str) -> ParsedPack:
    trajectory = read_trajectory(path, rel)
    agent = trajectory.agent
    name = trajectory.session_id or trajectory.trajectory_id or Path(rel).stem
    trial = ParsedTrial(
        key=f"{KEY_PREFIX}{trajectory.session_id or ''}:{trajectory.trajectory_id or ''}:{rel}",
        source_format="harbor",
        files_are_its_own=True,
        trajectory_files_alone=True,
        name=name,
        configuration=ConfigurationRef(
            key="__".join(str(x) for x in (agent.get("name"), agent.get("model_name")) if x) or "unknown",
            agent_name=str(agent.get("name") or ""),
            agent_version=str(agent.get("version") or ""),
            model_name=str(agent.get("model_name") or ""),
        ),
        trajectories=[trajectory, *embedded_subagents(trajectory)],
        files=[rel],
        present={"trajectory"},
        refs={"trajectoryRef": rel},  # the joinability checks look for it: the trajectory is here
        status="unknown",
    )
    _apply_final_totals(trial, [trajectory])
    return ParsedPack(kind="atif-trajectory", trials=[trial], trial_count=1)


def flag_missing_continuations(trial: ParsedTrial) -> None:
    """A file whose `continued_trajectory_ref` names a file the trial lacks: the run's later steps are missing."""
    have = set(trial.files)
    for trajectory in trial.trajectories:
        ref = trajectory.header.get("continued_trajectory_ref")
        if not isinstance(ref, str) or not ref or EMBEDDED_MARK in trajectory.path:
            continue
        folder = trajectory.path.rpartition("/")[0]
        name = ref.replace("\\", "/").rpartition("/")[2]
        if (f"{folder}/{name}" if folder else name) not in have:
            message = f"continued_trajectory_ref names {ref!r}, which is not in this pack: the later steps are missing"
            trial.problems.append(
                Problem(
                    trajectory.path,
                    message,
                    json_path="continued_trajectory_ref",
                    severity="warning",
                    kept="the steps of the files that are here",
                )
            )


def _apply_final_totals(trial: ParsedTrial, trajectories: list[ParsedTrajectory]) -> None:
    """A trial made of trajectory files alone: its tokens and cost are what the files' final_metrics say."""
    totals = final_totals(trajectories)
    trial.input_tokens = totals.get("total_prompt_tokens")
    trial.output_tokens = totals.get("total_completion_tokens")
    trial.cached_tokens = totals.get("total_cached_tokens")
    trial.cost_usd = totals.get("total_cost_usd")


MAIN_TRAJECTORY = "trajectory.json"


def trajectory_groups(folder: Path) -> list[list[Path]]:
    """Loose trajectory files of runs, named as Harbor names them: trajectory.json with its
    trajectory.cont-N.json continuations and trajectory.<name>.json subagents, each name
    maybe after a run's prefix (`<run>.trajectory.json`, as Harbor's test fixtures name
    them). Only runs of more than one file, main file first."""
    groups = []
    for main in sorted(folder.glob(f"*{MAIN_TRAJECTORY}")):
        prefix = main.name.removesuffix(MAIN_TRAJECTORY)
        if (prefix and not prefix.endswith(".")) or not is_trajectory_file(main):
            continue
        others = sorted(
            (p for p in folder.glob(f"{glob.escape(prefix)}trajectory.*.json") if is_trajectory_file(p)),
            key=lambda p: (trajectory_role(p.name.removeprefix(prefix))[0], p.name),
        )
        if others:
            groups.append([main, *others])
    return groups


def is_trajectory_file(path: Path) -> bool:
    """A regular file (no link) that starts like an ATIF trajectory."""
    return path.is_file() and not path.is_symlink() and sniff_trajectory(path)


def parse_trajectory_group(members: list[Path], rel: str) -> ParsedPack:
    """A trajectory.json with its continuations and subagent files: one trial, as in a Harbor trial folder."""
    main, *others = members
    prefix = main.name.removesuffix(MAIN_TRAJECTORY)
    pack = _trial_of_one_file(main, f"{rel}/{main.name}")
    [trial] = pack.trials  # (_trial_of_one_file's one)
    for path in others:
        path_rel = f"{rel}/{path.name}"
        trial.files.append(path_rel)
        try:
            trajectory = read_trajectory(path, path_rel, role=trajectory_role(path.name.removeprefix(prefix))[1])
        except PackError as exc:  # the trial keeps its other files
            trial.problems.append(exc.problem)
            continue
        trial.trajectories += [trajectory, *embedded_subagents(trajectory)]
    _apply_final_totals(trial, [t for t in trial.trajectories if t.role in ("main", "continuation")])
    flag_missing_continuations(trial)
    pack.kind = "atif-trajectory-group"
    return pack


def sniff_trajectory(path: Path) -> bool:
    """A cheap look at the first bytes: does this JSON file start like an ATIF trajectory?"""
    with open(path, "rb") as f:
        head = f.read(4096)
    return ATIF_VERSION_RE.search(head) is not None


ATIF_VERSION_RE = re.compile(rb'"schema_version"\s*:\s*"ATIF-')


def trajectory_role(name: str) -> tuple[int, str]:
    if name == "trajectory.json":
        return 0, "main"
    match = CONT_RE.match(name)
    if match:
        return int(match.group(1)), "continuation"
    return 1000, "subagent"


CONT_RE = re.compile(r"^trajectory\.cont-(\d+)\.json$")
