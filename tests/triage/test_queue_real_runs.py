"""The triage queue on a real Terminal-Bench 1 run (issue 39): where the source names no failure category,
the category column shows the automatic failure class, marked as automatic, never "unclassified". Known
answers are read from the run's results.json: its failed rows (`is_resolved: false`; the unscored ones,
in the queue too, are test_tb1_failures_real_runs') either timed out (`agent_timeout`, the agent's) or
failed their tests: capability."""

from __future__ import annotations

import json
import re

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Trial

RUN = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
ROW = re.compile(r'<tr data-trial="(\d+)"[^>]*>(.*?)</tr>', re.S)


@pytest.fixture
def mini(db):
    import_path(RUN)


def queue_cells(client) -> dict[int, str]:
    """{trial pk: its row's html} over every page of the queue."""
    rows: dict[int, str] = {}
    page = 1
    while True:
        body = client.get("/triage/", {"page": page}).content.decode()
        found = {int(pk): row for pk, row in ROW.findall(body)}
        if not found or set(found) <= set(rows):
            return rows
        rows |= found
        page += 1


def test_rows_without_a_named_category_show_the_automatic_class(client, triager, mini):
    client.force_login(triager)
    [results] = RUN.glob("*/results.json")
    failed = [r for r in json.loads(results.read_text())["results"] if r["is_resolved"] is False]
    assert {r["failure_mode"] for r in failed} == {"agent_timeout", "unset"}
    rows = queue_cells(client)
    assert "unclassified" not in "".join(rows.values())
    for row in failed:
        trial = Trial.objects.get(key=f"tb1:{row['id']}")
        assert trial.pk in rows, row["trial_name"]
        assert "auto: capability</span>" in rows[trial.pk], (row["failure_mode"], rows[trial.pk])
        if row["failure_mode"] == "agent_timeout":  # the cause beside it, in words
            assert "timed out" in rows[trial.pk]


def test_a_triagers_class_reads_as_theirs_not_the_rules(client, triager, mini):
    client.force_login(triager)
    trial = Trial.objects.filter(status="failed").order_by("pk").first()
    response = client.post(
        f"/trials/{trial.pk}/failure-class/", {"failure_class": "infrastructure", "reason": "the sandbox hung"}
    )
    assert response.status_code in (200, 302)
    row = queue_cells(client)[trial.pk]
    assert "triager: infrastructure</span>" in row and "auto:" not in row


def test_a_tb1_rows_name_shows_the_part_its_task_and_job_cells_do_not(client, triager, mini):
    """TB1 names a trial `<task>.<k>-of-<n>.<run folder>`: the name cell shows the attempt, the task and job
    beside it, the whole name in its title."""
    client.force_login(triager)
    [results] = RUN.glob("*/results.json")
    rows = queue_cells(client)
    for row in json.loads(results.read_text())["results"]:
        trial = Trial.objects.get(key=f"tb1:{row['id']}")
        if trial.pk not in rows:
            continue  # (a resolved trial is no failure)
        attempt = row["trial_name"].removeprefix(row["task_id"]).removesuffix(results.parent.name).strip(".")
        name_cell = re.search(r'<td class="name-cut" title="([^"]*)"><a [^>]*>(.*?)</a>', rows[trial.pk])
        assert name_cell is not None and name_cell.group(1) == row["trial_name"]
        assert re.sub(r"<wbr>", "", name_cell.group(2)) == f"…{attempt}", rows[trial.pk]
