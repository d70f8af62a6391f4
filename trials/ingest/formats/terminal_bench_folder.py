"""A Terminal-Bench 1 trial folder (`<task>/<task>.1-of-1.<run_id>/`): its results.json, commands.txt's
agent lines as steps (the harness's own keys kept apart, in the trajectory's header), panes and logs as
texts, asciinema recordings as artifacts. Split from terminal_bench.py, which reads the run."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from trials.ingest.folders import files_under
from trials.ingest.formats.harbor_sidecars import TEXT_LIMIT, read_log_text
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
        elif local.startswith("sessions/") and path.suffix == ".log":
            trial.texts[local] = read_session_log(path, f"{rel}/{local}")
        elif local.startswith(("panes/", "sessions/")) and path.suffix in (".txt", ".log"):
            trial.texts[local] = read_log_text(path, f"{rel}/{local}")
    commands = trial_dir / "commands.txt"
    if commands.is_file():
        trial.trajectories.append(_commands_trajectory(commands, f"{rel}/commands.txt", trial.problems))
        trial.present.add("trajectory")
        trial.refs["trajectoryRef"] = f"{rel}/commands.txt"
    trial.provenance.pop("evidence", None)


def read_session_log(path: Path, rel: str) -> str:
    """A session log (the terminal's output) up to TEXT_LIMIT bytes: past it, its start and its end, as
    the agent's own work follows the harness's install noise and would be cut by keeping the start only."""
    size = path.stat().st_size
    if size <= TEXT_LIMIT:
        return read_log_text(path, rel)
    head_bytes = TEXT_LIMIT // 8
    with open(path, "rb") as f:
        head = f.read(head_bytes)
        f.seek(size - (TEXT_LIMIT - head_bytes))
        tail = f.read()
    cut = size - len(head) - len(tail)
    note = f"\n… [{cut} bytes cut here; download {rel} for the whole log]\n"
    return head.decode("utf-8", "replace") + note + tail.decode("utf-8", "replace")


def _commands_trajectory(path: Path, rel: str, problems: list[Problem]) -> ParsedTrajectory:
    """commands.txt: one Python list of tmux keys a line. The agent's lines are the steps; the harness's
    (recording, agent install, tests: `harness_lines`) are kept in the header, each with what it does."""
    lines: list[tuple[int, list[str]]] = []
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
            lines.append((number, keys))
    problems.extend(own)
    roles = harness_lines([keys for _, keys in lines])
    steps: list[ParsedStep] = []
    harness: list[dict[str, Any]] = []
    for (number, keys), does in zip(lines, roles, strict=True):
        if does:
            harness.append({"line": number, "keys": _keys_text(keys), "does": does})
        else:
            steps.append(_command_step(len(steps), keys, number))
    return ParsedTrajectory(
        path=f"{rel}{KEYSTROKES_MARK}",  # (not the file itself: its steps are made, so no ATIF file to download)
        role="main",
        schema_version="",
        session_id="",
        trajectory_id="",
        agent={"name": "tmux send-keys"},
        final_metrics=None,
        header={"source": "commands.txt", "steps": len(steps), "lines": len(lines), "harness": harness},
        steps=steps,
        problems=own,
    )


# What TB1's harness types itself (terminal_bench/terminal/tmux_session.py, agents/installed_agents/,
# harness.py): it starts each session's recording, clears it, installs an installed agent, runs the
# tests in their own recorded session, and ends each recording with C-d.
_RECORD = re.compile(r"asciinema rec\b.*")
_INSTALL = re.compile(r"source /installed-agent/\S+.*")
_RUN_TESTS = re.compile(r"bash\s+/tests/\S+")


def harness_lines(lines: list[list[str]]) -> list[str]:
    """For each commands.txt line (its keys), what the harness does with it, or "" for an agent's line."""
    typed = [" ".join(k for k in keys if not _KEY_NAME.fullmatch(k)).strip() for keys in lines]
    roles = [""] * len(lines)
    for i, text in enumerate(typed):
        if _RECORD.fullmatch(text):
            roles[i] = "starts a recorded session"
        elif text == "clear" and i and _RECORD.fullmatch(typed[i - 1]):
            roles[i] = "clears the new session's screen"
        elif _INSTALL.fullmatch(text):
            roles[i] = "sets up the installed agent"
    # The tests' session: from the recording started for the test run (never the first, the agent's), every
    # line is the harness's.
    tests = next((i for i in range(len(typed) - 1, -1, -1) if _RUN_TESTS.fullmatch(typed[i])), None)
    if tests is not None:
        starts = [i for i in range(tests) if roles[i] == "starts a recorded session"]
        start = starts[-1] if len(starts) > 1 else tests
        for i in range(start, len(lines)):
            roles[i] = roles[i] or ("runs the tests" if i == tests else "in the tests' session")
    # The closing C-d of each recording: the file's last lines, at most one a recording started.
    closing = sum(1 for r in roles if r == "starts a recorded session")
    for i in range(len(lines) - 1, -1, -1):
        if closing == 0 or lines[i] != ["C-d"]:
            break
        roles[i] = "ends a recording"
        closing -= 1
    return roles


# tmux key names (`send-keys Enter`, `C-d`…): shown as <Enter>, so they read apart from typed text.
_KEY_NAME = re.compile(r"(Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|PPage|NPage|[CMS]-\S|F\d+)")


def _keys_text(keys: list[str]) -> str:
    return " ".join(f"<{key}>" if _KEY_NAME.fullmatch(key) else key for key in keys)


def _command_step(index: int, keys: list[str], line: int) -> ParsedStep:
    text = _keys_text(keys)
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
