"""Attempts, unscored trials and infrastructure failures in comparisons: known answers.

Sides are generated with known per-task attempt outcomes; every expected figure is computed
here independently (numpy by hand, statsmodels for the power, the shared bootstrap function
for the intervals), never read back from the code under test.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from statsmodels.stats.power import NormalIndPower

from comparisons.statistics import stats
from comparisons.statistics.side_data import leaderboard_score, load_side
from comparisons.statistics.sides import Side
from tests.builders import REFERENCE, import_path, make_user
from tests.factories import ConfigurationFactory, DatasetFactory, JobFactory, TaskFactory, TrialFactory
from trials.demo import write_demo
from trials.ingest.formats.detect import traits_of
from trials.models import Job, Trial
from trials.models.qc import AuditEntry
from trials.triage.signatures import sign_trials

pytestmark = pytest.mark.django_db

TB1_RUN = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet" / "2025-08-07__20-46-16"
UNSCORED, INFRA = "unscored", "infra"  # an errored trial with no reward; a failure classed infrastructure


def side(key: str, tasks: dict[str, list], *, dataset=None, source_format: str = "harbor"):
    """A configuration whose trials are the given attempts, task by task: a reward, UNSCORED
    (errored, no reward), INFRA (reward 0, classed infrastructure), or (status, reward[, failure category])."""
    conf = ConfigurationFactory(key=key)
    job = JobFactory(key=f"job-{key}")
    dataset = dataset or DatasetFactory(name="attempts/tasks", version="1.0")
    for name, attempts in tasks.items():
        task = TaskFactory(dataset=dataset, name=name, checksum=f"sha-{name}")
        for attempt, outcome in enumerate(attempts, start=1):
            kw = {"configuration": conf, "job": job, "task": task, "attempt": attempt, "source_format": source_format}
            if outcome == UNSCORED:
                TrialFactory(reward=None, status="errored", exception_type="RuntimeError", **kw)
            elif outcome == INFRA:
                TrialFactory(reward=0.0, status="failed", failure_class="infrastructure", **kw)
            elif isinstance(outcome, tuple):  # (signed, as an import signs it: its safety flags stored)
                status, reward, *category = outcome
                trial = TrialFactory(reward=reward, status=status, failure_category="".join(category), **kw)
                sign_trials([trial.pk])
            else:
                TrialFactory(reward=outcome, **kw)
    return conf


def grid(client, *confs, reference=None) -> dict:
    url = f"/api/comparisons/grid/?sides={','.join(str(c.pk) for c in confs)}"
    url += f"&reference={reference.pk}" if reference else ""
    response = client.get(url)
    assert response.status_code == 200, response.content
    return response.json()


def pair(client, base, cand) -> dict:
    response = client.get(f"/api/comparisons/?baseline={base.pk}&candidate={cand.pk}")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def two_sides():
    """20 tasks x 5 attempts. Reference: seeded 0/1 rewards. Side: its own 0/1 rewards on the first
    three attempts, then one unscored trial and one infrastructure failure per task."""
    rng = np.random.default_rng(7)
    ref_rewards = {f"t{i:02d}": rng.integers(0, 2, 5).astype(float).tolist() for i in range(20)}
    side_rewards = {f"t{i:02d}": rng.integers(0, 2, 3).astype(float).tolist() for i in range(20)}
    ref = side("ref", ref_rewards)
    other = side("other", {t: [*r, UNSCORED, INFRA] for t, r in side_rewards.items()})
    return ref, other, ref_rewards, side_rewards


def test_grid_figures_average_attempts_and_set_unscored_and_infra_apart(client_logged_in, two_sides):
    ref, other, ref_rewards, side_rewards = two_sides
    body = grid(client_logged_in, ref, other, reference=ref)
    row = body["sides"][1]
    tasks = sorted(ref_rewards)
    ref_means = np.array([np.mean(ref_rewards[t]) for t in tasks])
    with_infra = np.array([np.mean([*side_rewards[t], 0.0]) for t in tasks])  # the infra trial has reward 0
    without_infra = np.array([np.mean(side_rewards[t]) for t in tasks])

    assert row["attempts_per_task"] == 5
    assert row["unscored"] == 20 and row["infra_failures"] == 20
    assert row["mean_reward_scored"] == pytest.approx(with_infra.mean())
    assert row["mean_reward_excluding_infra"] == pytest.approx(without_infra.mean())
    assert row["mean_reward_excluding_infra_ci95"] == pytest.approx(
        list(stats.paired_bootstrap_ci(np.zeros(20), without_infra))
    )
    diffs = with_infra - ref_means
    assert row["delta_vs_reference"] == pytest.approx(diffs.mean())
    assert row["delta_ci95"] == pytest.approx(list(stats.paired_bootstrap_ci(ref_means, with_infra)))
    # The MDE of a paired mean difference, by statsmodels' normal power solver (one sample: ratio 0).
    effect = NormalIndPower().solve_power(nobs1=20, alpha=0.05, power=0.8, ratio=0)
    assert row["mde"] == pytest.approx(effect * np.std(diffs, ddof=1), rel=1e-5)  # (a root finder)
    assert row["leaderboard_score"] is None  # Harbor has no rule of its own
    assert row["unscored_url"].endswith("unscored=true") and "failure_class=infrastructure" in row["infra_url"]


def test_the_pair_comparison_answers_the_same_fields_for_its_two_sides(client_logged_in, two_sides):
    ref, other, *_ = two_sides
    row = grid(client_logged_in, ref, other, reference=ref)["sides"][1]
    body = pair(client_logged_in, ref, other)
    cand, c = body["candidate"]["metrics"], body["comparison"]
    assert cand["unscoredTrials"] == row["unscored"] and cand["infraFailures"] == row["infra_failures"]
    assert cand["attemptsPerTask"] == row["attempts_per_task"]
    assert cand["meanRewardScored"] == pytest.approx(row["mean_reward_scored"])
    assert cand["meanRewardExcludingInfra"] == pytest.approx(row["mean_reward_excluding_infra"])
    assert cand["meanRewardExcludingInfraCi95"] == pytest.approx(row["mean_reward_excluding_infra_ci95"])
    assert c["meanRewardDelta"] == pytest.approx(row["delta_vs_reference"])
    assert c["meanRewardDeltaCi95"] == pytest.approx(row["delta_ci95"])
    assert c["mde"] == pytest.approx(row["mde"]) and c["moreTasks"] == row["more_tasks"]
    assert "infrastructure failures included" in c["decisionBasis"]


def test_the_mde_plan_reaches_the_delta_with_the_tasks_or_attempts_it_names():
    rng = np.random.default_rng(3)
    n, k, delta = 30, 3, 0.08
    diffs = rng.normal(delta, 0.4, n)
    attempt_var = rng.uniform(0.2, 0.4, n)
    plan = stats.sample_plan(diffs, attempt_var, k, delta)
    sd = np.std(diffs, ddof=1)
    z = 1.959963984540054 + 0.8416212335729143  # z(0.975) + z(0.80)
    assert plan["mde"] == pytest.approx(z * sd / np.sqrt(n))
    assert plan["mde"] > delta
    # n + more tasks detect delta; one task fewer does not.
    more = plan["more_tasks"]
    assert z * sd / np.sqrt(n + more) <= delta < z * sd / np.sqrt(n + more - 1)
    # var(d) = tau2 + W / k: with k + more attempts the MDE is at most delta, with one fewer above it.
    w = attempt_var.mean()
    tau2 = max(0.0, sd**2 - w / k)
    extra = plan["more_attempts_per_task"]
    if extra is None:  # the tasks' own spread alone is above what delta allows
        assert z * np.sqrt(tau2 / n) > delta
    else:
        assert z * np.sqrt((tau2 + w / (k + extra)) / n) <= delta < z * np.sqrt((tau2 + w / (k + extra - 1)) / n)


def test_a_delta_the_sample_can_detect_needs_nothing_more():
    plan = stats.sample_plan(np.array([0.5, 0.6, 0.55, 0.45]), np.full(4, 0.1), 5, 0.525)
    assert plan["mde"] < 0.525 and plan["more_tasks"] == 0 and plan["more_attempts_per_task"] == 0


def test_a_timed_out_trial_with_a_reward_counts_once_by_its_reward(client_logged_in):
    tasks = [f"t{i}" for i in range(10)]
    base = side("base", {t: [1.0] for t in tasks})
    ended = {"t0": [("timeout", 1.0)], "t1": [("failed", 1.0, "message_limit")]}  # (an Inspect limit: status failed)
    cand = side("cand", {t: ended.get(t, [1.0]) for t in tasks})
    body = pair(client_logged_in, base, cand)
    metrics = body["candidate"]["metrics"]
    assert metrics["meanReward"] == 1.0 and metrics["passRate"] == 0.9  # t1 failed by its status
    assert metrics["endedWithReward"] == 2  # both flagged, as triage flags them
    flagged = client_logged_in.get(grid(client_logged_in, base, cand)["sides"][1]["ended_with_reward_url"])
    assert sorted(t.task.name for t in flagged.context["page"]) == ["t0", "t1"]
    t0 = next(r for r in body["tasks"] if r["task"] == "t0")
    assert t0["outcome"] == "unchanged" and t0["candidate"]["endedWithReward"] == 1
    cell = grid(client_logged_in, base, cand)["tasks"][0]["cells"][1]
    assert cell["passes"] == 1 and cell["mean_reward"] == 1.0 and cell["ended_with_reward"] == 1


def test_unscored_trials_are_counted_not_failed(client_logged_in):
    tasks = [f"t{i}" for i in range(10)]
    base = side("base", {t: [1.0, 0.0] for t in tasks})
    cand = side("cand", {t: [1.0, UNSCORED] for t in tasks})
    metrics = pair(client_logged_in, base, cand)["candidate"]["metrics"]
    assert metrics["unscoredTrials"] == 10 and metrics["decided"] == 10 and metrics["passRate"] == 1.0
    assert metrics["meanReward"] == 1.0


def test_terminal_bench_leaderboard_score_equals_the_published_accuracy(client_logged_in):
    """The shared run's rows, as the TB1 parser maps them (is_resolved true/false/null -> 1/0/None)."""
    results = json.loads((TB1_RUN / "results.json").read_text())
    by_task: dict[str, list] = defaultdict(list)
    for row in results["results"]:
        resolved = row["is_resolved"]
        by_task[row["task_id"]].append(UNSCORED if resolved is None else float(resolved))
    tb1 = side("tb1", by_task, source_format="terminal-bench")
    harbor = side("harbor", {t: [1.0] for t in by_task})
    row = grid(client_logged_in, tb1, harbor)["sides"][0]
    assert row["leaderboard_score"] == pytest.approx(results["accuracy"])  # 0.1375: 11 of 80
    assert row["unscored"] == sum(1 for r in results["results"] if r["is_resolved"] is None)
    # Ours leaves the unscored out: 11 resolved of the 48 scored rows, task by task.
    scored = [np.mean([v for v in vs if v != UNSCORED]) for vs in by_task.values() if set(vs) != {UNSCORED}]
    assert row["mean_reward_scored"] == pytest.approx(np.mean(scored))


def test_the_shared_terminal_bench_run_imported_scores_its_published_accuracy_on_its_leaderboard():
    """The same run read by the Terminal-Bench 1 parser itself: the side's leaderboard score is `accuracy`."""
    imp = import_path(TB1_RUN)
    assert imp.status == "done"
    [job] = Job.objects.filter(trials__source_format="terminal-bench").distinct()  # the run is one job
    data = load_side(Side("job", job.pk))
    published = json.loads((TB1_RUN / "results.json").read_text())["accuracy"]
    assert leaderboard_score(data) == (pytest.approx(published), traits_of("terminal-bench").leaderboard_rule)
    scored = Trial.objects.filter(job=job, reward__isnull=False)
    assert scored.count() == 48 and Trial.objects.filter(job=job).count() == 80  # 32 unscored: not failed


def test_the_default_reference_is_the_side_with_the_most_paired_tasks(client_logged_in):
    dataset = DatasetFactory(name="attempts/tasks", version="1.0")
    tiny = side("tiny", {"t0": [1.0]}, dataset=dataset)
    wide = side("wide", {f"t{i}": [1.0] for i in range(10)}, dataset=dataset)
    also = side("also", {f"t{i}": [0.0] for i in range(10)}, dataset=dataset)
    body = grid(client_logged_in, tiny, wide, also)  # tiny ticked first
    assert body["reference"] == wide.pk
    tiny_row = body["sides"][0]
    assert tiny_row["valid"] is False
    assert tiny_row["not_comparable"] == "task sets differ: 9 task(s) only in the reference, 0 only in this side"
    # Two sides have a McNemar p: Holm is named for both; with only one it is not.
    assert all(s["mcnemar_p_holm"] is not None for s in body["sides"] if s["mcnemar_p"] is not None)
    two = grid(client_logged_in, wide, also)
    assert [s["mcnemar_p_holm"] for s in two["sides"]] == [None, None]


def test_a_signed_trial_gets_its_class_and_a_triager_override_moves_the_figures(client, two_sides):
    ref, other, *_ = two_sides
    trial = Trial.objects.filter(configuration=other, status="errored").first()
    Trial.objects.filter(pk=trial.pk).update(exception_type="DaytonaError")
    sign_trials([trial.pk])
    trial.refresh_from_db()
    assert (trial.failure_class, trial.failure_class_why) == ("infrastructure", "the sandbox or environment failed")

    client.force_login(make_user("tri", "triager"))
    before = grid(client, ref, other, reference=ref)["sides"][1]["infra_failures"]
    response = client.post(
        f"/trials/{trial.pk}/failure-class/", {"failure_class": "capability", "reason": "the agent broke it"}
    )
    assert response.status_code == 302
    trial.refresh_from_db()
    assert trial.failure_class_override == "capability" and trial.effective_failure_class == "capability"
    entry = AuditEntry.objects.get(trial=trial, action="failure class set")
    assert entry.changes["failure_class_override"] == ["", "capability"] and entry.actor.username == "tri"
    assert grid(client, ref, other, reference=ref)["sides"][1]["infra_failures"] == before - 1
    page = client.get(trial.get_absolute_url()).content.decode()
    assert 'id="failure-class"' in page and "set by a triager" in page


def test_a_reviewer_may_not_override_a_failure_class(client, two_sides):
    trial = Trial.objects.filter(configuration=two_sides[1]).first()
    client.force_login(make_user("rev", "reviewer"))
    assert client.post(f"/trials/{trial.pk}/failure-class/", {"failure_class": "capability"}).status_code == 403
    trial.refresh_from_db()
    assert trial.failure_class_override == ""


def test_two_generated_harbor_jobs_of_five_attempts_give_the_delta_computed_from_their_files(
    client_logged_in, tmp_path
):
    jobs = write_demo(tmp_path / "demo", tasks=6, attempts=5, seed=4)
    for job in jobs:
        import_path(job)
    by_hand = {}
    for job in jobs:
        rewards: dict[str, list[float]] = defaultdict(list)
        for result in job.glob("*/result.json"):
            doc = json.loads(result.read_text())
            reward = ((doc.get("verifier_result") or {}).get("rewards") or {}).get("reward")
            if reward is not None:
                rewards[doc["task_name"]].append(float(reward))
        by_hand[job.name] = {t: float(np.mean(v)) for t, v in rewards.items()}
    base, cand = by_hand["baseline-job"], by_hand["candidate-job"]
    paired = sorted(set(base) & set(cand))
    expected = float(np.mean([cand[t] - base[t] for t in paired]))
    ids = {j.name: j.pk for j in Job.objects.all()}
    url = f"/api/comparisons/?baseline_job={ids['baseline-job']}&candidate_job={ids['candidate-job']}"
    body = client_logged_in.get(url).json()
    assert body["candidate"]["metrics"]["attemptsPerTask"] == 5
    assert body["comparison"]["pairedTasks"] == len(paired)
    assert body["comparison"]["meanRewardDelta"] == pytest.approx(expected)


def test_a_sides_score_interval_is_the_same_on_the_pair_page_and_the_grid(client_logged_in):
    """Tasks stored out of name order: both pages resample the same tasks in the same order."""
    tasks = [f"t{(7 * i) % 23:02}" for i in range(23)]  # t00, t07, t14, t21, t05, …
    base = side("base", {t: [1.0] for t in tasks})
    cand = side("cand", {t: [i / 23] for i, t in enumerate(tasks)})  # (a distinct mean each)
    metrics = pair(client_logged_in, base, cand)["candidate"]["metrics"]
    row = grid(client_logged_in, base, cand)["sides"][1]
    assert metrics["meanRewardScoredCi95"] == pytest.approx(row["mean_reward_ci95"], abs=1e-12)
    assert metrics["meanRewardScoredCi95"][0] < metrics["meanRewardScoredCi95"][1]


def test_a_stored_comparison_counts_a_flag_signed_after_it_was_computed(client_logged_in):
    """An import signs its trials after they are written: a comparison computed between sees them again."""
    tasks = [f"t{i}" for i in range(10)]
    base = side("base", {t: [1.0] for t in tasks})
    cand = side("cand", {t: [1.0] for t in tasks})
    late = Trial.objects.get(configuration=cand, task__name="t0")
    Trial.objects.filter(pk=late.pk).update(status="timeout")
    sign_trials([late.pk])  # (its class set; then its flag taken away, as before the flags were written)
    Trial.objects.filter(pk=late.pk).update(safety_flags=[], is_flagged=False)
    assert pair(client_logged_in, base, cand)["candidate"]["metrics"]["endedWithReward"] == 0
    sign_trials([late.pk])
    assert pair(client_logged_in, base, cand)["candidate"]["metrics"]["endedWithReward"] == 1
