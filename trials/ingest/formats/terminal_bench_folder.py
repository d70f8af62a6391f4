"""A Terminal-Bench 1 trial folder (`<task>/<task>.1-of-1.<run_id>/`): its results.json, commands.txt as
steps (the keys the harness typed), panes and logs as texts, asciinema recordings as artifacts.
Split from terminal_bench.py, which reads the run."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from trials.ingest.folders import files_under
from trials.ingest.formats.harbor_sidecars import read_log_text
from trials.ingest.jsonio import load_json
from trials.ingest.records import PackError, ParsedArtifact, ParsedStep, ParsedTrajectory, ParsedTrial, Problem
from trials.ingest.values import as_dict

KEYSTROKES_MARK = "#keystrokes"  # a trajectory made of commands.txt: <path>#keystrokes
RECORDING_KIND = "asciicast"  # an artifact the trial page plays with asciinema's player


def safe_json(path: Path, rel: str, problems: list[Problem]) -> Any:
    if not path.is_file():
        return None
    try:
        return load_json(path, rel, problems)
    except PackError as exc:
        problems.append(exc.problem)
        return None


def read_trial_dir(trial: ParsedTrial, trial_dir: Path, rel: str) -> None:
    listing = files_under(trial_dir)
    trial.files = sorted(f"{rel}/{p.relative_to(trial_dir).as_posix()}" for p in listing)
    own = as_dict(safe_json(trial_dir / "results.json", f"{rel}/results.json", trial.problems))
    if own and own != trial.documents.get("result"):
        trial.documents["trial_results"] = own  # (the folder's copy differs from the run's row: both kept)
    for path in listing:
        local = path.relative_to(trial_dir).as_posix()
        if path.suffix == ".cast":
            trial.artifacts.append(
                ParsedArtifact(source=local, destination=local, kind=RECORDING_KIND, path=f"{rel}/{local}")
            )
            trial.present.add("recording")
        elif local.startswith(("panes/", "sessions/")) and path.suffix in (".txt", ".log"):
            trial.texts[local] = read_log_text(path, f"{rel}/{local}")
    commands = trial_dir / "commands.txt"
    if commands.is_file():
        trial.trajectories.append(_commands_trajectory(commands, f"{rel}/commands.txt", trial.problems))
        trial.present.add("trajectory")
        trial.refs["trajectoryRef"] = f"{rel}/commands.txt"
    trial.provenance.pop("evidence", None)


def _commands_trajectory(path: Path, rel: str, problems: list[Problem]) -> ParsedTrajectory:
    """commands.txt: one Python list of tmux keys a line (what the harness typed), each a step."""
    steps: list[ParsedStep] = []
    own: list[Problem] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            try:
                keys = ast.literal_eval(line)  # (a literal only: never runs anything)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                keys = None
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                own.append(Problem(rel, "not a list of keys", line=number, kept="the line as the step's text"))
                keys = [line]
            steps.append(_command_step(len(steps), keys, number))
    problems.extend(own)
    return ParsedTrajectory(
        path=f"{rel}{KEYSTROKES_MARK}",  # (not the file itself: its steps are made, so no ATIF file to download)
        role="main",
        schema_version="",
        session_id="",
        trajectory_id="",
        agent={"name": "tmux send-keys"},
        final_metrics=None,
        header={"source": "commands.txt", "steps": len(steps)},
        steps=steps,
        problems=own,
    )


# tmux key names (`send-keys Enter`, `C-d`…): shown as <Enter>, so they read apart from typed text.
_KEY_NAME = re.compile(r"(Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|PPage|NPage|[CMS]-\S|F\d+)")


def _command_step(index: int, keys: list[str], line: int) -> ParsedStep:
    text = " ".join(f"<{key}>" if _KEY_NAME.fullmatch(key) else key for key in keys)
    return ParsedStep(
        index=index,
        step_id=index + 1,
        source="agent",
        timestamp=None,
        model_name="",
        message_text=text,
        reasoning="",
        prompt_tokens=None,
        completion_tokens=None,
        cached_tokens=None,
        cost_usd=None,
        is_copied_context=False,
        llm_call_count=None,
        context_management="",
        tool_calls=[],  # (keys typed into the terminal: what they printed is in the recording and panes)
        observations=[],
        raw={"step_id": index + 1, "source": "agent", "message": text, "extra": {"keys": keys, "line": line}},
    )
