"""The comparison's mean-reward deltas on the real TB1 runs, droid + claude-4.1-opus (5 runs) against
mini-swe-agent (1 run): the paired one, with its standard error, and the leaderboard rule's.

Every figure is computed here from the raw `results.json` rows: `is_resolved` true is 1, false 0, null
unscored (terminal-bench-1/README.md: 32 of mini's 80 rows; public-runs-2/README.md: 9 of opus's 400).
"""

from __future__ import annotations

from statistics import fmean, stdev

import pytest

from tests.builders import REFERENCE, import_path, tb1_rows
from trials.models import Configuration

pytestmark = pytest.mark.django_db

MINI = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
OPUS = REFERENCE / "public-runs-2" / "tb1-droid-5x2" / "20250923_droid_claude-4-1-opus"


@pytest.fixture
def compared(client_logged_in):
    import_path(MINI)
    import_path(OPUS)
    base, cand = (Configuration.objects.get(key=folder.name).pk for folder in (MINI, OPUS))
    query = f"baseline={base}&candidate={cand}"
    body = client_logged_in.get(f"/api/comparisons/?{query}").json()
    return {"c": body["comparison"]}


def _task_means(rows: list[dict], unscored_as: float | None = None) -> dict[str, float]:
    """Each task's mean over its attempts; an unscored one left out, or counted as `unscored_as`."""
    by_task: dict[str, list[float]] = {}
    for row in rows:
        value = unscored_as if row["is_resolved"] is None else float(row["is_resolved"])
        if value is not None:
            by_task.setdefault(row["task_id"], []).append(value)
    return {task: fmean(values) for task, values in by_task.items()}


def test_the_headline_delta_pairs_the_tasks_both_sides_scored(compared):
    mini, opus = _task_means(tb1_rows(MINI)), _task_means(tb1_rows(OPUS))
    paired = sorted(mini.keys() & opus.keys())
    diffs = [opus[t] - mini[t] for t in paired]
    c = compared["c"]
    assert c["pairedTasks"] == len(paired) == 47  # 48 tasks mini scored, one of them opus never did
    assert c["meanRewardDelta"] == pytest.approx(fmean(diffs))
    assert c["meanRewardDeltaSe"] == pytest.approx(stdev(diffs) / len(diffs) ** 0.5)
    assert c["scoredTasks"] == {"baseline": len(mini), "candidate": len(opus)} == {"baseline": 48, "candidate": 79}


def test_the_leaderboard_delta_counts_an_unscored_trial_as_0_paired_over_all_80_tasks(compared):
    # The paired effect, +0.45 a task (SE 0.058): Terminal-Bench's own rule, the README's accuracies
    # (mini 0.1375, opus's five runs 0.5875 on average) over the same 80 tasks.
    mini, opus = _task_means(tb1_rows(MINI), unscored_as=0.0), _task_means(tb1_rows(OPUS), unscored_as=0.0)
    assert mini.keys() == opus.keys() and len(mini) == 80
    diffs = [opus[t] - mini[t] for t in mini]
    se = stdev(diffs) / len(diffs) ** 0.5
    assert fmean(diffs) == pytest.approx(0.5875 - 0.1375) and round(se, 3) == 0.058
    assert compared["c"]["leaderboardDelta"] == {"tasks": 80, "delta": pytest.approx(0.45), "se": pytest.approx(se)}
