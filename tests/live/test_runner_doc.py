"""docs/reporting-from-a-runner.md followed literally: every `sh` block it shows runs, in order, on a
fresh instance (a gunicorn server of its own), and prints what the `text` block after it shows; its
table of derived steps and its example answer are what trials/live/derive.py does."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import urllib3

from tests.builders import REFERENCE, REPO, free_port
from trials.live import derive

DOC = REPO / "docs" / "reporting-from-a-runner.md"
DOC_URL = "http://127.0.0.1:8000"
END = "@@end-of-block@@"


def blocks(text: str) -> list[tuple[str, str]]:
    """The doc's fenced blocks: (language, body), in order."""
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)]


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql).fetchall()


@pytest.fixture
def fresh_server(tmp_path):
    """A migrated instance on a new SQLite file, served by gunicorn as in docs/deploy.md; (url, env, db)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    bin_dir = str(Path(sys.executable).parent)  # the virtualenv, as if activated
    env |= {"DATA_DIR": str(tmp_path / "data"), "PATH": f"{bin_dir}:{env.get('PATH', '')}", "VIRTUAL_ENV": ""}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    port = free_port()
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - the server owns it until it stops
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "benchviewer.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib3.request("GET", f"{url}/api/", retries=False, timeout=2)
            break
        except urllib3.exceptions.HTTPError:
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.3)
    yield url, env, tmp_path / "data" / "benchviewer.sqlite3"
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=20)


@pytest.mark.sqlite_only("a fresh instance of its own: a server process on a new SQLite file this test reads")
def test_the_runner_doc_followed_literally_reports_a_whole_trial(fresh_server):
    url, env, db = fresh_server
    shown = blocks(DOC.read_text())
    commands = [(n, body) for n, (lang, body) in enumerate(shown) if lang == "sh"]
    assert len(commands) >= 4  # a token two ways, the stream, the reward, the completion
    script = "set -euo pipefail\n" + "".join(f"{body}printf '\\n{END}\\n'\n" for _, body in commands)
    done = subprocess.run(
        ["bash", "-c", script.replace(DOC_URL, url)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = done.stdout.split(f"\n{END}\n")
    for (number, _), output in zip(commands, outputs, strict=False):
        following = shown[number + 1] if number + 1 < len(shown) else ("", "")
        if following[0] == "text":  # what the doc says the block prints
            assert output.strip() == following[1].replace(DOC_URL, url).strip()
    assert "placed in no step" not in done.stderr  # every event of the example file is placed
    assert '"token":' in done.stdout  # the account with a password got its token over HTTP

    [(trial, status, reward)] = rows(db, "select id, status, reward from trials_trial")
    assert (status, reward) == ("passed", 1.0)
    trajectory = rows(db, f"select derived, step_count from trials_trajectory where trial_id = {trial}")
    assert trajectory == [(1, 5)]
    steps = rows(db, f'select source, tool_call_count from trials_step where trial_id = {trial} order by "index"')
    assert steps == [("user", 0), ("agent", 1), ("agent", 1), ("agent", 1), ("agent", 0)]
    calls = rows(db, "select function_name from trials_toolcall order by id")
    assert calls == [("read_file",), ("write_file",), ("bash",)]
    assert rows(db, "select tool_name, decision from trials_permissiondecision") == [("write_file", "approve")]
    assert rows(db, "select name from trials_rewardcriterion order by name") == [("tests-pass",), ("typo-fixed",)]


def table_examples() -> list[tuple[list[str], dict]]:
    """The doc's table of derived steps: each row's event types and its example event."""
    table = section(DOC.read_text(), "Which events become which steps")
    found = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3].startswith("`{"):
            found.append((re.findall(r"`([a-z_.]+)`", cells[0]), orjson.loads(cells[3].strip("`"))))
    return found


def test_the_docs_table_names_every_event_type_a_derived_step_is_made_of():
    examples = table_examples()
    assert {kind for kinds, _ in examples for kind in kinds} == derive.STEP_EVENTS
    assert all(example["type"] in kinds for kinds, example in examples)


def test_each_example_of_the_docs_table_becomes_what_the_table_says():
    for _, example in table_examples():
        payload = example["payload"]
        [step] = derive.derive_trajectory([example])["steps"]
        assert derive.unplaced(example) == "", example
        kind = example["type"]
        if kind in derive.USER_INPUT:
            assert (step["source"], step["message"]) == ("user", payload["text"])
        elif kind in derive.REASONING:
            assert (step["source"], step["reasoning_content"]) == ("agent", payload["text"])
        elif kind in derive.MODEL_OUTPUT:
            assert (step["source"], step["message"], step["model_name"]) == ("agent", payload["text"], payload["model"])
            usage = payload["usage"]
            assert step["metrics"] == {
                "prompt_tokens": usage["inputTokens"],
                "completion_tokens": usage["outputTokens"],
            }
        elif kind in derive.TOOL_START:
            [call] = step["tool_calls"]
            assert (call["tool_call_id"], call["function_name"], call["arguments"]) == (
                example["toolCallId"],
                payload["toolName"],
                payload["args"],
            )
        else:
            [result] = step["observation"]["results"]
            assert (result["source_call_id"], result["content"]) == (example["toolCallId"], payload["result"])


def test_the_docs_unplaced_answer_says_what_the_server_says():
    answers = [orjson.loads(body) for lang, body in blocks(DOC.read_text()) if lang == "json"]
    unplaced = [item for answer in answers for item in answer.get("unplaced", [])]
    assert unplaced
    for item in unplaced:
        assert item["why"] == derive.unplaced({"type": item["type"], "eventId": "e"})


def test_the_example_events_file_is_placed_whole():
    lines = (REPO / "docs" / "examples" / "trial-events.jsonl").read_bytes().splitlines()
    events = [orjson.loads(line) for line in lines]
    assert [derive.unplaced(e) for e in events] == [""] * len(events)
    trajectory = derive.derive_trajectory(events)
    assert [s["source"] for s in trajectory["steps"]] == ["user", "agent", "agent", "agent", "agent"]


def test_the_lime_profile_types_are_the_profile_schemas():
    schema = orjson.loads(
        (REFERENCE / "lime-agentruntime" / "agentruntime-lime-profile-event.schema.json").read_bytes()
    )
    assert derive.PROFILE_TYPES == set(schema["allOf"][1]["properties"]["type"]["enum"])
