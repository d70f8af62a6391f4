"""A Terminal-Bench 1 trial page shows what the agent did: its commands as steps (the harness's own
keystrokes listed apart), its log and panes readable, on the shared real run."""

from __future__ import annotations

import ast
import html
import shutil
from pathlib import Path

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Trial

pytestmark = pytest.mark.django_db

SUBMISSION = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
RUN = next(SUBMISSION.glob("*/run_metadata.json")).parent
FOLDERS = sorted(p.parent for p in RUN.glob("*/*/commands.txt"))
TEXT_LIMIT = 256 * 1024  # (the import's log cap: harbor_sidecars.TEXT_LIMIT)


def raw_lines(commands: Path) -> list[list[str]]:
    return [ast.literal_eval(line) for line in commands.read_text().splitlines() if line.strip()]


def agent_lines(commands: Path) -> list[list[str]]:
    """TB1's harness types: a recording started (and cleared) for each session, the agent's and then the
    tests'; an installed agent's setup; the C-d that ends each recording (the file's last lines). The
    agent's lines are the rest of its own session."""
    lines = raw_lines(commands)
    starts = [i for i, keys in enumerate(lines) if keys[0].startswith("asciinema rec")]
    end = len(lines)
    while end > 0 and lines[end - 1] == ["C-d"] and len(lines) - end < len(starts):
        end -= 1
    session = lines[starts[0] + 1 : starts[1] if len(starts) > 1 else end]
    if session and session[0] == ["clear", "Enter"]:
        session = session[1:]
    return [keys for keys in session if not keys[0].startswith("source /installed-agent/")]


def trial_of(folder: Path) -> Trial:
    return Trial.objects.get(task__name=folder.parent.name)


def page(client, trial: Trial, tab: str = "") -> str:
    response = client.get(f"/trials/{trial.pk}/" + (f"?tab={tab}" if tab else ""))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.parent.name for f in FOLDERS])
def test_the_steps_are_the_agents_commands_and_the_harness_lines_are_listed_apart(client_logged_in, folder):
    import_path(SUBMISSION)
    trial = trial_of(folder)
    expected = agent_lines(folder / "commands.txt")
    total = len(raw_lines(folder / "commands.txt"))
    assert 0 < len(expected) < total
    api = client_logged_in.get(f"/api/trials/{trial.pk}/steps/").json()
    assert api["total"] == len(api["steps"]) == len(expected)
    for step, keys in zip(api["steps"], expected, strict=True):
        assert step["source"] == "agent" and step["message"].startswith(keys[0][:200])
    messages = " ".join(step["message"] for step in api["steps"])
    assert "asciinema rec" not in messages and "/tests/run-tests.sh" not in messages
    trajectory = page(client_logged_in, trial)
    assert f"({len(expected)} of {total})" in trajectory
    start = trajectory.index('id="harness-keys"')
    harness = trajectory[start : trajectory.index("</details>", start)]
    assert f"{total - len(expected)} lines typed by the harness" in harness
    assert "asciinema rec --stdin /logs/agent.cast &lt;Enter&gt;" in harness and "/tests/run-tests.sh" in harness


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.parent.name for f in FOLDERS])
def test_the_agents_log_and_panes_read_on_the_agent_logs_tab_and_the_tests_on_the_logs_tab(client_logged_in, folder):
    import_path(SUBMISSION)
    trial = trial_of(folder)
    agent_tab = page(client_logged_in, trial, "agent-logs")
    for name in ("sessions/agent.log", "panes/pre-agent.txt", "panes/post-agent.txt"):
        assert f"<h3>{name}</h3>" in agent_tab
    for name in ("pre-agent.txt", "post-agent.txt"):
        lines = [line.strip() for line in (folder / "panes" / name).read_text().splitlines() if line.strip()]
        assert html.escape(lines[-1]) in agent_tab  # the pane's last line, escaped
    assert "\x1b" not in agent_tab  # the log's terminal escapes are not shown as text
    # The agent's last words are at the log's end, past the import's cap on a big log: kept.
    log = (folder / "sessions" / "agent.log").read_bytes()
    tail = [line for line in log[-4096:].decode("utf-8", "replace").splitlines() if line.isprintable() and line.strip()]
    assert html.escape(tail[-1].strip()) in agent_tab
    logs_tab = page(client_logged_in, trial, "logs")
    assert "<h3>sessions/tests.log</h3>" in logs_tab and "<h3>panes/post-test.txt</h3>" in logs_tab
    assert "<h3>sessions/agent.log</h3>" not in logs_tab  # (once, on its own tab)
    artifacts_tab = page(client_logged_in, trial, "artifacts")  # the recordings point to their text
    assert 'id="tb1-texts"' in artifacts_tab and f"/trials/{trial.pk}/?tab=agent-logs" in artifacts_tab


def test_a_big_agent_log_keeps_its_end(client_logged_in):
    folder = max(FOLDERS, key=lambda f: (f / "sessions" / "agent.log").stat().st_size)
    log = (folder / "sessions" / "agent.log").read_bytes()
    assert len(log) > TEXT_LIMIT  # (the shared run's heterogeneous-dates log is 300 KB)
    import_path(SUBMISSION)
    text = trial_of(folder).texts["sessions/agent.log"]
    assert "bytes cut here" in text and text.endswith(log[-2000:].decode("utf-8", "replace"))


def test_a_pane_is_escaped(client_logged_in, tmp_path):
    run = tmp_path / SUBMISSION.name / RUN.name
    shutil.copytree(RUN, run)
    pane = next(run.glob("*/*/panes/post-agent.txt"))
    pane.chmod(0o644)
    pane.write_text("root@box:/app# echo '<script>alert(1)</script>'\n<script>alert(1)</script>\n")
    import_path(tmp_path / SUBMISSION.name)
    agent_tab = page(client_logged_in, Trial.objects.get(task__name=pane.parents[2].name), "agent-logs")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in agent_tab and "<script>alert(1)" not in agent_tab


def test_an_agent_typing_into_the_terminal_keeps_every_line_it_typed_even_its_own_ctrl_d(client_logged_in, tmp_path):
    """A Terminus-style agent sends its own keys: each is a step; the harness's lines around them are not."""
    run = tmp_path / SUBMISSION.name / RUN.name
    shutil.copytree(RUN, run)
    commands = run / FOLDERS[0].relative_to(RUN) / "commands.txt"
    commands.chmod(0o644)
    agent = [
        ["ls -la", "Enter"],
        ["python3", "Enter"],
        ["print(2 + 2)", "Enter"],
        ["C-d"],
        ["bash /tests/run-tests.sh", "Enter"],  # (an agent may run a test script itself: still its line)
        ["cat answer.txt\n"],
    ]
    harness_before = [["asciinema rec --stdin /logs/agent.cast", "Enter"], ["clear", "Enter"]]
    harness_after = [
        ["asciinema rec --stdin /logs/tests.cast", "Enter"],
        ["clear", "Enter"],
        ["bash ", "/tests/run-tests.sh", "Enter"],
        ["C-d"],
        ["C-d"],
    ]
    commands.write_text("".join(f"{keys!r}\n" for keys in harness_before + agent + harness_after))
    assert agent_lines(commands) == agent
    import_path(tmp_path / SUBMISSION.name)
    trial = Trial.objects.get(task__name=FOLDERS[0].parent.name)
    api = client_logged_in.get(f"/api/trials/{trial.pk}/steps/").json()
    assert [s["message"] for s in api["steps"]] == [
        "ls -la <Enter>",
        "python3 <Enter>",
        "print(2 + 2) <Enter>",
        "<C-d>",
        "bash /tests/run-tests.sh <Enter>",
        "cat answer.txt\n",
    ]
