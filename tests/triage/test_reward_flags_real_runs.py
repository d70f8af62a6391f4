"""The `…-with-reward` flags on real runs (issue 39): a run that did not end normally yet scored above 0
(a pass or partial credit after a timeout, an error, a limit) is flagged; one that scored 0 after a bad
ending is the failure it looks like, in its cluster, unflagged. Known answers are read from the raw
files: Terminal-Bench 1's results rows (`is_resolved`, `failure_mode`), the Harbor job's reward buckets
and exception lists, the Inspect log's samples (their `sample_limit` events and scores)."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Trial
from trials.models.taxonomy import WITH_REWARD

TB1 = [REFERENCE / "terminal-bench-1", REFERENCE / "public-runs-2" / "tb1-droid-5x2"]
HARBOR = [
    REFERENCE / "public-runs-1" / "skillsbench-claude-code-minimax",
    REFERENCE / "public-runs-2" / "harbor-check-claude-code-notloggedin",
]
DOCENT = REFERENCE / "public-runs-2" / "docent-sample-eval" / "log.eval"
QUIET = {"unset", "none", ""}  # Terminal-Bench 1's "nothing went wrong" modes
SCORED = {"C": 1.0, "I": 0.0}  # Inspect's `includes` scorer


def tb1_endings() -> dict[str, tuple[str, float | None]]:
    """{trial key: (how it ended, its reward)} of the TB1 rows whose failure_mode says it went wrong."""
    found = {}
    for run in TB1:
        for results in sorted(run.rglob("*results.json")):
            for row in json.loads(results.read_text()).get("results") or []:
                if row.get("failure_mode") not in QUIET and "trial_name" in row:
                    ended = "timeout" if "timeout" in row["failure_mode"] else "errored"
                    reward = None if row["is_resolved"] is None else float(row["is_resolved"])
                    found[f"tb1:{row['id']}"] = (ended, reward)
    return found


def harbor_endings() -> dict[str, tuple[str, float | None]]:
    """{trial name: (how it ended, its reward)} of the trials a job's exception lists name."""
    found = {}
    for job in HARBOR:
        for result in job.rglob("result.json"):
            stats = json.loads(result.read_text()).get("stats") or {}
            for evaluation in (stats.get("evals") or {}).values():
                rewards = {
                    name: float(value)
                    for buckets in (evaluation.get("reward_stats") or {}).values()
                    for value, names in buckets.items()
                    for name in names
                }
                for exception, names in (evaluation.get("exception_stats") or {}).items():
                    ended = "timeout" if "Timeout" in exception else "errored"
                    found |= {name: (ended, rewards.get(name)) for name in names}
    return found


def inspect_endings() -> dict[str, tuple[str, float | None]]:
    """{sample name: ("limit", its score)} of the samples a limit stopped."""
    found = {}
    with zipfile.ZipFile(DOCENT) as log:
        for name in log.namelist():
            if name.startswith("samples/"):
                sample = json.loads(log.read(name))
                if any(e.get("event") == "sample_limit" for e in sample.get("events") or []):
                    [score] = sample["scores"].values()
                    found[f"{sample['id']}_epoch_{sample['epoch']}"] = ("limit", SCORED[score["value"]])
    return found


@pytest.fixture
def imported(db):
    for pack in [*TB1, *HARBOR, DOCENT]:
        import_path(pack)


def test_only_runs_that_ended_badly_yet_scored_above_zero_carry_a_with_reward_flag(imported):
    endings = {("key", k): v for k, v in tb1_endings().items()}
    endings |= {("name", n): v for n, v in (harbor_endings() | inspect_endings()).items()}
    wanted = {who: WITH_REWARD[ended] for who, (ended, reward) in endings.items() if (reward or 0) > 0}
    scored_zero = {who for who, (_, reward) in endings.items() if reward == 0.0}
    assert len(wanted) >= 70 and len(scored_zero) >= 150  # (both kinds are on these runs)
    found = {}
    for key, name, flags in Trial.objects.values_list("key", "name", "safety_flags"):
        with_reward = [f for f in flags or [] if f in WITH_REWARD.values()]
        if with_reward:
            [flag] = with_reward
            found[("key", key) if key.startswith("tb1:") else ("name", name)] = flag
    assert found == wanted


def test_a_run_that_scored_zero_after_a_bad_ending_is_in_a_cluster_unflagged(imported):
    zero = [key for key, (_, reward) in tb1_endings().items() if reward == 0.0]
    trials = Trial.objects.filter(key__in=zero)
    assert trials.count() == len(zero) > 100
    assert not trials.filter(is_flagged=True).exists()
    assert not trials.filter(cluster__isnull=True).exists()
