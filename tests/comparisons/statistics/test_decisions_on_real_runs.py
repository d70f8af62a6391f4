"""Decisions on real Terminal-Bench runs: reachable, explained, and counting what the rows say."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Configuration, Dataset, Task, Trial

pytestmark = pytest.mark.django_db

MINI = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
OPUS = REFERENCE / "public-runs-2" / "tb1-droid-5x2" / "20250923_droid_claude-4-1-opus"


def _rows(folder):
    return [row for path in folder.glob("*/results.json") for row in orjson.loads(path.read_bytes())["results"]]


def _compare(client):
    import_path(MINI)
    [base] = Configuration.objects.values_list("pk", flat=True)  # each run folder is one configuration
    import_path(OPUS)
    [cand] = Configuration.objects.exclude(pk=base).values_list("pk", flat=True)
    return client.get(f"/api/comparisons/?baseline={base}&candidate={cand}").json()


def _task_means(rows):
    """Each task's mean over its scored attempts (is_resolved null: unscored, left out)."""
    by_task: dict[str, list[float]] = {}
    for row in rows:
        if row["is_resolved"] is not None:
            by_task.setdefault(row["task_id"], []).append(float(row["is_resolved"]))
    return {task: sum(v) / len(v) for task, v in by_task.items()}


def test_a_large_significant_effect_on_tb1_runs_reads_promote_with_the_evidence_gate_not_applicable(client_logged_in):
    body = _compare(client_logged_in)
    c = body["comparison"]
    base, cand = _task_means(_rows(MINI)), _task_means(_rows(OPUS))
    paired = sorted(set(base) & set(cand))
    expected = sum(cand[t] - base[t] for t in paired) / len(paired)
    assert c["pairedTasks"] == len(paired)
    assert c["meanRewardDelta"] == pytest.approx(expected)
    assert c["meanRewardDeltaCi95"][0] > 0  # significant
    assert c["decision"] == "promote", c["missingConditions"]
    evidence = next(g for g in c["guard"] if "evidence" in g["check"].lower())
    assert evidence["applicable"] is False and "not applicable to terminal-bench" in evidence["note"]
    assert c["decisionReason"].startswith("Promote: the candidate scores")
    page = client_logged_in.get(
        f"/comparisons/?baseline={body['baseline']['id']}&candidate={body['candidate']['id']}"
    ).content.decode()
    assert page.index('id="decision"') < page.index('id="mean-reward-delta"')  # the decision comes first
    assert "not applicable" in page and "<code>meanRewardDelta" not in page  # the guard reads in words


def test_the_timeout_rate_counts_the_rows_whose_agent_timed_out(client_logged_in):
    body = _compare(client_logged_in)
    for side, folder in (("baseline", MINI), ("candidate", OPUS)):
        rows = _rows(folder)
        timed_out = sum(1 for r in rows if r["failure_mode"] == "agent_timeout")  # not test_timeout: the harness
        assert timed_out > 0
        assert body[side]["metrics"]["timeoutRate"] == pytest.approx(timed_out / len(rows))


def test_each_of_the_three_deltas_and_both_flip_counts_says_what_it_counts(client_logged_in):
    body = _compare(client_logged_in)
    mini, opus = _rows(MINI), _rows(OPUS)
    # the leaderboard's rule: resolved over every trial, unscored as 0 (terminal-bench-1/README.md)
    for side, rows in (("baseline", mini), ("candidate", opus)):
        resolved = sum(1 for r in rows if r["is_resolved"])
        assert body[side]["metrics"]["leaderboardScore"] == pytest.approx(resolved / len(rows))
    page = client_logged_in.get(
        f"/comparisons/?baseline={body['baseline']['id']}&candidate={body['candidate']['id']}"
    ).content.decode()
    headline = re.sub(r"<[^>]+>", "", page[page.index('id="mean-reward-delta"') : page.index('id="figure-p0"')])
    assert f"over the {body['comparison']['pairedTasks']} tasks both sides scored" in headline
    assert "verdict changed" in headline and "without a flip" in headline
    for label in ("Leaderboard score", "Mean reward [CI95]"):
        cell = page[page.index(f">{label}") - 200 : page.index(f">{label}")]
        assert 'title="' in cell, label
    assert "an unscored trial counts as 0" in page and "each side&#x27;s mean over the tasks it scored" in page


GOOSE = REFERENCE / "public-runs-2" / "tb1-goose-flat" / "20250829_goose_claude-4-opus"


@pytest.mark.parametrize("goose_first", [False, True], ids=["droid-first", "goose-first"])
def test_flat_goose_results_pair_with_the_droid_runs_on_their_common_tasks(client_logged_in, goose_first):
    # The flat files name no dataset; their task ids are the droid runs' terminal-bench-core@0.1.1,
    # whichever was imported first (Must 6: the same answer whichever way in).
    for folder in (GOOSE, OPUS) if goose_first else (OPUS, GOOSE):
        import_path(folder)
    droid = Configuration.objects.get(key=OPUS.name).pk  # (a run folder is configured by its submission)
    [goose] = Configuration.objects.exclude(pk=droid).values_list("pk", flat=True)
    metadata = orjson.loads(next(OPUS.glob("*/run_metadata.json")).read_bytes())
    named = {(metadata["dataset_name"], metadata["dataset_version"])}
    assert set(Trial.objects.values_list("task__dataset__name", "task__dataset__version").distinct()) == named
    assert set(Dataset.objects.values_list("name", "version")) == named  # (none left for the flat files)
    assert Task.objects.count() == len({r["task_id"] for r in _rows(OPUS)})  # one row a task: both sides' trials
    goose_rows = [r for p in GOOSE.glob("*_results.json") for r in orjson.loads(p.read_bytes())["results"]]
    common = {r["task_id"] for r in goose_rows} & {r["task_id"] for r in _rows(OPUS)}
    assert len(common) > 1  # (before: 0 paired, "terminal-bench" vs "terminal-bench-core")
    c = client_logged_in.get(f"/api/comparisons/?baseline={goose}&candidate={droid}").json()["comparison"]
    scored = set(_task_means(goose_rows)) & set(_task_means(_rows(OPUS)))
    assert c["pairedTasks"] == len(scored) > 1 and scored <= common
    assert c["valid"], c["invalidReasons"]
