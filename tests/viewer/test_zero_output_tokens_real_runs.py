"""A usage of 0 output tokens is said to be suspect where tokens are shown (issue 39): two SkillsBench trials
(claude-code driving MiniMax-M2.1) record `n_output_tokens: 0` beside hundreds of thousands in, which the
public-runs-1 README calls broken token accounting. Their pages, their rows in the trial list and their
task's row on the job page say so; a trial with output tokens, or with no usage at all, says nothing.
Known answers are read from the trials' own result.json files."""

from __future__ import annotations

import json
import re

import pytest

from tests.builders import REFERENCE, import_path

pytestmark = pytest.mark.django_db

RUNS = REFERENCE / "public-runs-1"
JOBS = [RUNS / "skillsbench-claude-code-minimax" / "no_skills", RUNS / "skillsbench-gemini-cli"]
NOTE = "0 output tokens recorded: the usage may be missing"
TRIAL_LINK = re.compile(r'<a class="trial-link" href="(/trials/\d+/)[^"]*">([^<]+)</a>')


def usages() -> dict[str, int]:
    """{trial name: output tokens} of every trial folder with its own result.json."""
    found = {}
    for result in sorted(RUNS.glob("skillsbench-*/**/result.json")):
        data = json.loads(result.read_text())
        if "trial_name" in data:
            found[data["trial_name"]] = data["agent_result"]["n_output_tokens"]
    return found


def test_zero_output_tokens_are_said_to_be_suspect_only_where_recorded(client_logged_in):
    for job in JOBS:
        import_path(job)
    outputs = usages()
    assert sorted(outputs.values()) == [0, 0, 6770]
    for name, output in outputs.items():
        task = name.rsplit("__", 1)[0]
        rows = client_logged_in.get("/trials/", {"task": task}).content.decode()
        links = {n: href for href, n in TRIAL_LINK.findall(rows)}
        page = client_logged_in.get(links[name]).content.decode()
        assert (NOTE in page) == (output == 0), name
        row = rows[rows.index(f">{name}</a>") :]
        row = row[: row.index("</tr>")]
        assert (f'title="{NOTE}">0 out</span>' in row) == (output == 0), name
        for other in set(links) - set(outputs):  # (known by the job's stats alone: no usage, no note)
            assert f">{other}</a>" in rows and NOTE not in client_logged_in.get(links[other]).content.decode()
    [job] = set(re.findall(r'href="/jobs/(\d+)/">no_skills', client_logged_in.get("/jobs/").content.decode()))
    zero_tasks = {name.rsplit("__", 1)[0] for name, output in outputs.items() if output == 0}
    assert len(zero_tasks) == 2
    for task in zero_tasks:  # (the job's results by task, filtered to the task: its row says so, alone)
        page = client_logged_in.get(f"/jobs/{job}/", {"q": task}).content.decode()
        row = page[page.index(f">{task}</a>") :]
        assert f'title="{NOTE}">1 with 0 output tokens</span>' in row[: row.index("</tr>")], task
        assert page.count(f'title="{NOTE}"') == 1
    others = client_logged_in.get(f"/jobs/{job}/", {"q": "fix-"}).content.decode()  # (no usage recorded)
    assert "fix-build-agentops" in others and NOTE not in others
