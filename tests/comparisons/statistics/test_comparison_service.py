"""Known-answer tests of the comparison service: hand-built sides, answers computed here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from comparisons.computing.computation import compute
from comparisons.pair import charts
from comparisons.statistics.sides import Side
from tests.builders import ERRORED, MISSING, REFERENCE, build_side, import_path
from tests.factories import (
    ConfigurationFactory,
    DatasetFactory,
    JobFactory,
    PermissionDecisionFactory,
    TaskFactory,
    TrialFactory,
)
from trials.models import Configuration, Job

pytestmark = pytest.mark.django_db


def compare(base, cand, **kwargs):
    result, _ = compute(Side("configuration", base.pk), Side("configuration", cand.pk), **kwargs)
    return result


def task_means(tasks):
    """Plain-Python reference: mean of the numeric rewards of each task."""
    means = {}
    for name, rewards in tasks.items():
        scored = [r for r in rewards if isinstance(r, float | int)]
        means[name] = sum(scored) / len(scored) if scored else None
    return means


BASE = {"t1": [1.0, 0.0], "t2": [0.0, 0.0], "t3": [1.0, ERRORED], "t4": [0.5, MISSING]}
CAND = {"t1": [1.0, 1.0], "t2": [1.0, 0.0], "t3": [1.0, 1.0], "t4": [0.0, 0.0]}


def test_mean_reward_delta_pairs_tasks_and_never_counts_missing_or_errored_as_zero():
    result = compare(build_side("base", BASE), build_side("cand", CAND), resamples=1000)
    base_means, cand_means = task_means(BASE), task_means(CAND)
    deltas = [cand_means[t] - base_means[t] for t in BASE]
    c = result["comparison"]

    assert base_means == {"t1": 0.5, "t2": 0.0, "t3": 1.0, "t4": 0.5}  # errored/missing left out
    assert c["meanRewardDelta"] == pytest.approx(sum(deltas) / len(deltas))
    assert result["baseline"]["metrics"]["meanReward"] == pytest.approx(sum(base_means.values()) / 4)
    assert result["baseline"]["metrics"]["erroredTrials"] == 1
    assert result["baseline"]["metrics"]["missingRewardTrials"] == 1
    assert result["candidate"]["metrics"]["erroredTrials"] == 0


def test_bootstrap_interval_of_the_delta_is_the_numpy_resampling_of_task_deltas():
    result = compare(build_side("base", BASE), build_side("cand", CAND), resamples=1000, seed=11)
    base_means, cand_means = task_means(BASE), task_means(CAND)
    deltas = np.array([cand_means[t] - base_means[t] for t in sorted(BASE)])
    idx = np.random.default_rng(11).integers(0, len(deltas), size=(1000, len(deltas)))
    expected = np.percentile(deltas[idx].mean(axis=1), [2.5, 97.5])

    assert result["comparison"]["meanRewardDeltaCi95"] == pytest.approx(list(expected))
    assert result["comparison"]["bootstrap"] == {"resamples": 1000, "seed": 11, "unit": "task"}


def test_bootstrap_is_deterministic_under_the_seed():
    base, cand = build_side("base", BASE), build_side("cand", CAND)
    assert (
        compare(base, cand)["comparison"]["meanRewardDeltaCi95"]
        == compare(base, cand)["comparison"]["meanRewardDeltaCi95"]
    )


def test_pass_rate_flips_and_mcnemar():
    # Task passes when at least half of its decided attempts passed.
    base = {f"p{i}": [1.0] for i in range(3)} | {f"f{i}": [0.0] for i in range(7)}
    cand = {f"p{i}": [1.0 if i else 0.0] for i in range(3)} | {f"f{i}": [1.0 if i < 5 else 0.0] for i in range(7)}
    result = compare(build_side("base", base), build_side("cand", cand), resamples=500)
    c = result["comparison"]

    assert c["flips"] == {"passToFail": 1, "failToPass": 5, "pairedTasks": 10}
    # Exact two-sided McNemar: 2 * P(X <= 1), X ~ Binomial(6, 1/2).
    assert c["mcnemarP"] == pytest.approx(2 * (1 + 6) / 2**6)
    assert c["passRateDelta"] == pytest.approx(7 / 10 - 3 / 10)
    outcomes = {row["task"]: row["outcome"] for row in result["tasks"]}
    assert outcomes["p0"] == "flipped" and outcomes["f0"] == "flipped" and outcomes["p1"] == "unchanged"
    assert {row["task"]: row["flip"] for row in result["tasks"]}["p0"] == "pass → fail"


def test_matrix_outcomes_improved_regressed_unchanged():
    base = {"up": [0.2, 0.4], "down": [0.6, 0.4], "same": [0.3, 0.3]}
    cand = {"up": [0.4, 0.4], "down": [0.2, 0.2], "same": [0.3, 0.3]}
    result = compare(build_side("base", base), build_side("cand", cand), resamples=200)
    rows = {row["task"]: row for row in result["tasks"]}
    assert rows["up"]["outcome"] == "improved" and rows["up"]["delta"] == pytest.approx(0.1)
    assert rows["down"]["outcome"] == "regressed" and rows["down"]["delta"] == pytest.approx(-0.3)
    assert rows["same"]["outcome"] == "unchanged"
    conf_id = Configuration.objects.get(key="cand").pk
    assert rows["up"]["candidateUrl"] == f"/trials/?configuration={conf_id}&task=up"


def test_pass_at_k_timeout_rate_costs_and_tokens():
    base_conf = build_side("base", {"a": [1.0, 0.0, 0.0], "b": [0.0, 0.0, 0.0]}, trial_kwargs={"cost_usd": 0.5})
    cand_conf = build_side(
        "cand", {"a": [1.0, 1.0, 0.0], "b": [1.0, 0.0, 0.0]}, trial_kwargs={"cost_usd": 1.0, "input_tokens": 100}
    )
    TrialFactory(
        configuration=cand_conf,
        job=cand_conf.trials.first().job,
        task=cand_conf.trials.first().task,
        reward=None,
        status="timeout",
        cost_usd=1.0,
        input_tokens=100,
    )
    result = compare(base_conf, cand_conf, resamples=100)
    base, cand = result["baseline"]["metrics"], result["candidate"]["metrics"]

    # pass@1 averaged over tasks: baseline (1/3 + 0) / 2.
    assert base["passAtK"]["1"] == pytest.approx((1 / 3 + 0) / 2)
    # pass@3 with 3 attempts: 1 if any passed. Candidate task a has 4 decided attempts (timeout counts).
    assert base["passAtK"]["3"] == pytest.approx(0.5)
    assert cand["timeoutRate"] == pytest.approx(1 / 7)
    assert base["costPerTrial"] == pytest.approx(0.5)
    assert base["costPerSuccess"] == pytest.approx(6 * 0.5 / 1)
    assert cand["costPerSuccess"] == pytest.approx(7 * 1.0 / 3)
    assert cand["tokensPerTrial"] == pytest.approx(100)
    assert cand["tokensPerSuccess"] == pytest.approx(700 / 3)
    assert base["tokensPerTrial"] is None


def test_reward_keys_are_averaged_per_key():
    conf = build_side("base", {"a": [1.0]})
    TrialFactory(
        configuration=conf,
        job=conf.trials.first().job,
        task=conf.trials.first().task,
        reward=0.0,
        rewards={"reward": 0.0, "style": 0.5},
    )
    cand = build_side("cand", {"a": [1.0]}, trial_kwargs={"rewards": {"reward": 1.0, "style": 1.0}})
    result = compare(conf, cand, resamples=100)
    assert result["baseline"]["metrics"]["rewardKeys"] == {"reward": 0.5, "style": 0.5}
    assert result["deltas"]["rewardKeys"]["style"] == pytest.approx(0.5)


# --------------------------------------------------------------------------- validity


def test_a_different_dataset_version_pairs_on_the_task_name_and_is_not_like_for_like():
    base = build_side("base", {"a": [1.0]}, dataset=DatasetFactory(version="1.0"))
    cand = build_side("cand", {"a": [1.0]}, dataset=DatasetFactory(version="2.0"))
    c = compare(base, cand, resamples=100)["comparison"]
    assert c["valid"] is False
    # one dataset at two versions pairs the tasks both hold (issue 41), never as a like-for-like claim
    assert c["invalidReasons"] == [
        "not like-for-like: known-answer/tasks 1.0 vs 2.0; 1 tasks paired, 0 of the baseline's "
        "and 0 of the candidate's left out"
    ]
    assert c["pairedTasks"] == 1
    assert c["unpairedAcrossDatasets"] == []
    assert c["decision"] == "hold"
    assert "comparison invalid: not like-for-like" in c["remainingRisk"][0]


def test_a_different_task_checksum_makes_the_comparison_invalid():
    base = build_side("base", {"a": [1.0], "b": [0.0]})
    cand = build_side("cand", {"a": [1.0], "b": [1.0]}, checksums={"b": "sha-changed"})
    result = compare(base, cand, resamples=100)
    assert result["comparison"]["invalidReasons"] == ["verifier differs (task checksum) on 1 task(s): b"]
    assert {r["task"]: r["checksumsDiffer"] for r in result["tasks"]} == {"a": False, "b": True}
    assert "same task contracts were not used for every compared library" in result["comparison"]["headlineReasons"]


def test_each_task_in_both_sides_links_the_first_attempts_side_by_side():
    base = build_side("base", {"a": [1.0, 0.0], "b": [1.0]})
    cand = build_side("cand", {"a": [0.0], "c": [1.0]})
    rows = {r["task"]: r for r in compare(base, cand, resamples=100)["tasks"]}
    first = {side.key: min(side.trials.filter(task__name="a").values_list("pk", flat=True)) for side in (base, cand)}
    assert rows["a"]["sideBySideUrl"] == f"/trials/{first['base']}/side-by-side/{first['cand']}/"
    assert rows["b"]["sideBySideUrl"] is None and rows["c"]["sideBySideUrl"] is None


def test_different_task_sets_are_invalid_and_list_the_tasks_on_one_side():
    base = build_side("base", {"a": [1.0], "b": [1.0], "c": [0.0]})
    cand = build_side("cand", {"b": [1.0], "c": [1.0], "d": [1.0]})
    result = compare(base, cand, resamples=100)
    c = result["comparison"]
    assert c["invalidReasons"] == ["task sets differ: 1 task(s) only in baseline, 1 only in candidate"]
    assert result["tasksOnOneSide"] == {"baseline": ["a"], "candidate": ["d"]}
    assert "2 task(s) present on one side only" in c["remainingRisk"]
    assert c["pairedTasks"] == 2 and c["meanRewardDelta"] == pytest.approx(0.5)
    outcomes = {r["task"]: r["outcome"] for r in result["tasks"]}
    assert outcomes["a"] == "baseline only" and outcomes["d"] == "candidate only"


def test_a_valid_comparison_has_no_reasons():
    result = compare(build_side("base", BASE), build_side("cand", CAND), resamples=100)
    c = result["comparison"]
    assert c["valid"] is True and c["invalidReasons"] == [] and result["verifierChecked"] is True


def test_packs_without_task_checksums_say_the_verifier_could_not_be_checked():
    no_checksums = {"a": "", "b": ""}
    base = build_side("base", {"a": [1.0], "b": [0.0]}, checksums=no_checksums)
    cand = build_side("cand", {"a": [1.0], "b": [1.0]}, checksums=no_checksums)
    result = compare(base, cand, resamples=100)
    assert result["comparison"]["valid"] is True and result["verifierChecked"] is False


def test_sides_that_score_the_same_everywhere_say_so_rather_than_a_zero_width_interval():
    result = compare(build_side("base", {"a": [1.0], "b": [0.0]}), build_side("cand", {"a": [1.0], "b": [0.0]}))
    risks = result["comparison"]["remainingRisk"]
    assert "no reward difference: the two sides score the same on every paired task" in risks
    assert not any("crosses 0" in r for r in risks)


# --------------------------------------------------------------------------- decision


def _tasks(values):
    return {f"t{i:02d}": [v] for i, v in enumerate(values)}


def test_promote_when_guard_holds_and_comparison_is_valid():
    base = build_side("base", _tasks([0.0] * 6 + [1.0] * 6))
    cand = build_side("cand", _tasks([1.0] * 12))
    c = compare(base, cand, resamples=500)["comparison"]
    assert c["meanRewardDelta"] == pytest.approx(0.5)
    assert [g["ok"] for g in c["guard"]] == [True, True, True]
    assert c["decision"] == "promote"


def test_hold_when_a_p0_qc_gate_regressed():
    base = build_side("base", _tasks([0.0] * 6 + [1.0] * 6))
    pack = {"decisionInputs": {"p0QcGateRegressionCount": 2}}
    cand = build_side("cand", _tasks([1.0] * 12), trial_kwargs={"documents": {"evidence_pack": pack}})
    c = compare(base, cand, resamples=500)["comparison"]
    assert c["p0QcGateRegressionCount"] == 2 * 12
    assert c["decision"] == "hold"
    assert f"{2 * 12} P0 QC gate regression(s) in candidate trials" in c["remainingRisk"]


def test_hold_when_evidence_completeness_drops_below_baseline():
    base = build_side("base", _tasks([0.0] * 12), trial_kwargs={"lime_evidence": True})
    cand = build_side("cand", _tasks([1.0] * 12), trial_kwargs={"lime_evidence": True})
    cand.trials.filter(task__name__in=["t00", "t01", "t02"]).update(is_complete=False)
    c = compare(base, cand, resamples=500)["comparison"]
    assert c["evidenceCompletenessRate"] == pytest.approx(9 / 12)
    assert c["baselineEvidenceCompletenessRate"] == 1.0
    assert c["guard"][2]["ok"] is False
    assert c["decision"] == "hold"
    assert "evidence completeness below baseline (75% vs 100%)" in c["remainingRisk"]


def test_hold_when_the_guard_passes_but_the_comparison_is_invalid():
    base = build_side("base", _tasks([0.0] * 12))
    # (a changed verifier keeps the pairing: a changed dataset version would pair nothing)
    cand = build_side("cand", _tasks([1.0] * 12), checksums={"t00": "sha-changed"})
    c = compare(base, cand, resamples=500)["comparison"]
    assert c["guardPasses"] is True and c["valid"] is False
    assert c["decision"] == "hold"


def test_revert_when_clearly_worse():
    base = build_side("base", _tasks([1.0] * 12))
    cand = build_side("cand", _tasks([0.0] * 9 + [1.0] * 3))
    c = compare(base, cand, resamples=2000)["comparison"]
    assert c["meanRewardDelta"] == pytest.approx(-0.75)
    assert c["meanRewardDeltaCi95"][1] < 0
    assert c["decision"] == "revert"


def test_hold_when_worse_but_the_interval_crosses_zero():
    base = build_side("base", _tasks([0.0, 1.0, 0.0, 1.0, 1.0, 0.0]))
    cand = build_side("cand", _tasks([1.0, 0.0, 0.0, 1.0, 0.0, 0.0]))
    c = compare(base, cand, resamples=2000)["comparison"]
    assert c["meanRewardDelta"] == pytest.approx(-1 / 6)
    assert c["meanRewardDeltaCi95"][0] < 0 < c["meanRewardDeltaCi95"][1]
    assert c["decision"] == "hold"
    assert any(r.startswith("CI95 of the reward delta crosses 0") for r in c["remainingRisk"])


def test_denied_side_effects_are_counted_per_side():
    base = build_side("base", _tasks([1.0]))
    cand = build_side("cand", _tasks([1.0]))
    PermissionDecisionFactory(trial=cand.trials.first(), side_effect_after_denial=True)
    PermissionDecisionFactory(trial=cand.trials.first(), side_effect_after_denial=False)
    result = compare(base, cand, resamples=100)
    assert result["candidate"]["metrics"]["deniedSideEffects"] == 1
    assert result["baseline"]["metrics"]["deniedSideEffects"] == 0
    assert "candidate has 1 side effect(s) after a denied permission" in result["comparison"]["remainingRisk"]


# --------------------------------------------------------------------------- headline eligibility

PINNED_LLM = {"temperature": 0, "max_steps": 30, "max_tokens": 200000, "max_cost_usd": 2.0}
LIVE = {"measurementMode": "live", "finalPostconditionEvaluated": True}


def test_headline_eligible_when_every_rule_holds():
    kwargs = {"trial_kwargs": {"provenance": LIVE}, "conf_kwargs": {"model_name": "gpt-5", "profiles": PINNED_LLM}}
    base = build_side("base", {"a": [1.0, 0.0] * 10}, **kwargs)
    cand = build_side("cand", {"a": [1.0] * 20}, **kwargs)
    result = compare(base, cand, resamples=200)
    assert result["comparison"]["headlineEligible"] is True
    assert result["comparison"]["headlineReasons"] == []
    assert result["headline"]["tier"] == "primary-realworld"
    assert result["tasks"][0]["headlineReasons"] == []


def test_harbor_trials_without_a_mode_and_few_samples_are_not_headline():
    result = compare(build_side("base", BASE), build_side("cand", CAND), resamples=100)
    c = result["comparison"]
    assert c["headlineReasons"] == [
        "measurement mode unknown",
        "at least 10 scored trials on each side (has 6)",
        "final task postcondition was not evaluated",  # the errored and unrewarded trials
    ]
    per_task = {r["task"]: r["headlineReasons"] for r in result["tasks"]}
    assert per_task["t1"] == ["measurement mode unknown", "at least 20 scored trials of this task on each side (has 2)"]
    assert "final task postcondition was not evaluated" in per_task["t3"]


def test_scaffold_modes_unpinned_llm_and_versions_are_named():
    mock = {"measurementMode": "deterministic-fixture", "finalPostconditionEvaluated": True}
    kwargs = {"trial_kwargs": {"provenance": mock}, "conf_kwargs": {"model_name": "gpt-5", "agent_version": ""}}
    base = build_side("base", {"a": [1.0] * 10}, **kwargs)
    cand = build_side("cand", {"a": [1.0] * 10}, **kwargs)
    c = compare(base, cand, resamples=100)["comparison"]
    assert c["headlineReasons"] == [
        "measurement mode deterministic-fixture is not headline-eligible; use live or recorded-real",
        "competitor/library versions are not pinned",
        "LLM model/settings/budgets are not pinned",
    ]


def test_environment_must_be_pinned():
    base = build_side("base", {"a": [1.0] * 10}, trial_kwargs={"provenance": LIVE})
    cand = build_side("cand", {"a": [1.0] * 10}, trial_kwargs={"provenance": LIVE})
    cand.trials.first().job.__class__.objects.filter(key="job-cand").update(config={})
    c = compare(base, cand, resamples=100)["comparison"]
    assert c["headlineReasons"] == ["environment metadata is not pinned"]


# --------------------------------------------------------------------------- AgentV and OpenChrome


def _rows(path: Path) -> dict[str, float]:
    return {row["test_id"]: row["score"] for row in map(json.loads, path.read_text().splitlines())}


def test_agentv_compare_of_the_reference_runs_matches_a_hand_computation():
    import_path(REFERENCE / "agentv" / "compare-baseline-results.jsonl")
    import_path(REFERENCE / "agentv" / "compare-candidate-results.jsonl")
    s1 = _rows(REFERENCE / "agentv" / "compare-baseline-results.jsonl")
    s2 = _rows(REFERENCE / "agentv" / "compare-candidate-results.jsonl")
    base, cand = Configuration.objects.get(key="gpt-4.1"), Configuration.objects.get(key="gpt-5")

    agentv = compare(base, cand, resamples=100)["agentv"]

    expected = {}
    for test_id in s1:
        delta = s2[test_id] - s1[test_id]
        outcome = "win" if delta >= 0.1 else "loss" if delta <= -0.1 else "tie"
        expected[test_id] = (delta, delta / (1 - s1[test_id]), outcome)
    got = {m["test_id"]: (m["delta"], m["normalized_gain"], m["outcome"]) for m in agentv["matched"]}
    assert got.keys() == expected.keys()
    for test_id, (delta, gain, outcome) in expected.items():
        assert got[test_id][0] == pytest.approx(delta)
        assert got[test_id][1] == pytest.approx(gain)
        assert got[test_id][2] == outcome
    summary = agentv["summary"]
    outcomes = [o for _, _, o in expected.values()]
    assert summary["matched"] == 5 and summary["total"] == 5
    assert (summary["wins"], summary["losses"], summary["ties"]) == (
        outcomes.count("win"),
        outcomes.count("loss"),
        outcomes.count("tie"),
    )
    assert summary["mean_delta"] == pytest.approx(sum(d for d, _, _ in expected.values()) / 5)
    assert summary["mean_normalized_gain"] == pytest.approx(sum(g for _, g, _ in expected.values()) / 5)
    assert agentv["unmatched"] == {"file1": [], "file2": []}


def test_openchrome_completion_per_library_and_task():
    def runs(library, successes):
        conf = ConfigurationFactory(key=library, agent_version="1.0")
        job = JobFactory(key=f"oc-{library}", source_format="openchrome")
        task = TaskFactory(name="rw-001")
        for ok in successes:
            TrialFactory(
                configuration=conf,
                job=job,
                task=task,
                source_format="openchrome",
                reward=float(ok),
                provenance={"mode": "recorded-real", "finalPostconditionEvaluated": True},
            )
        return conf

    base, cand = runs("playwright", [1, 0, 0, 1]), runs("openchrome", [1, 1, 1, 0])
    result = compare(base, cand, resamples=100)
    rows = {(r["library"], r["task"]): r for r in result["openchrome"]}
    assert rows[("playwright", "rw-001")]["successRate"] == pytest.approx(0.5)
    assert rows[("openchrome", "rw-001")]["successRate"] == pytest.approx(0.75)
    assert rows[("openchrome", "rw-001")]["runs"] == 4
    assert "measurement mode unknown" not in result["comparison"]["headlineReasons"]


def test_jobs_can_be_compared_as_sides():
    base = build_side("base", {"a": [0.0], "b": [1.0]})
    cand = build_side("cand", {"a": [1.0], "b": [1.0]})
    base_job, cand_job = base.trials.first().job, cand.trials.first().job
    result, _ = compute(Side("job", base_job.pk), Side("job", cand_job.pk), resamples=100)
    assert result["comparison"]["meanRewardDelta"] == pytest.approx(0.5)
    assert result["baseline"]["label"] == f"job job-base #{base_job.pk}"


def test_two_jobs_of_one_name_are_two_sides_in_every_label():
    base = build_side("base", {"a": [0.0], "b": [1.0]})
    cand = build_side("cand", {"a": [1.0], "b": [1.0]})
    base_job, cand_job = base.trials.first().job, cand.trials.first().job
    Job.objects.filter(pk__in=[base_job.pk, cand_job.pk]).update(name="baseline-job")  # as two runs of one job
    result, points = compute(Side("job", base_job.pk), Side("job", cand_job.pk), resamples=100)
    assert result["baseline"]["label"] != result["candidate"]["label"]
    for chart in (charts.heatmap, charts.pass_rate):  # a category per side, not one merged one
        figure = chart(result, points, lambda pk: f"/trials/{pk}/")
        assert len({x for trace in figure["data"] for x in trace["x"]}) == 2, chart.__name__
    assert result["tasks"][0]["baselineUrl"] == f"/trials/?job={base_job.pk}&task=a"


def test_names_from_the_data_are_text_in_every_chart_not_plotly_markup():
    hostile = '<a href="https://evil.example/">fixed</a><span style="font-size:40px">BIG</span> & co'
    base = build_side("base", {hostile: [0.0], "b": [1.0]})
    cand = build_side("cand", {hostile: [1.0], "b": [1.0]})
    Job.objects.filter(pk=cand.trials.first().job_id).update(name="<b>cand</b>")
    base_job, cand_job = base.trials.first().job, cand.trials.first().job
    result, points = compute(Side("job", base_job.pk), Side("job", cand_job.pk), resamples=100)
    shown = []
    for name in charts.CHARTS:
        for trace in charts.build(name, result, points, lambda pk: f"/trials/{pk}/")["data"]:
            shown += [v for key in ("x", "y", "text") for v in trace.get(key, []) if isinstance(v, str)]
            shown += [trace["name"]] if "name" in trace else []
    assert shown and not [value for value in shown if "<" in value or ">" in value]
    escaped = '&lt;a href="https://evil.example/"&gt;fixed&lt;/a&gt;'
    assert any(value.startswith(escaped) and value.endswith("&amp; co") for value in shown)
    assert any("&lt;b&gt;cand&lt;/b&gt;" in value for value in shown)
