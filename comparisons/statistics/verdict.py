"""The verdict on a comparison: validity, the promotion guard and decision, remaining risk.

`validity_reasons` reads both sides' data (datasets, task sets, task checksums);
`promotion` (with `missing_conditions`) and `remaining_risk` read only the figures already computed.
"""

from __future__ import annotations

from typing import Any

from comparisons.statistics.eligibility import AGGREGATE_MIN_SAMPLES
from comparisons.statistics.side_data import SideData, version_mismatch

SIGNIFICANCE = 0.05
# The seed's aggregate claim threshold (seed 003: N >= 10), counted in paired tasks.
MIN_PAIRED_TASKS = AGGREGATE_MIN_SAMPLES


def validity_reasons(base: SideData, cand: SideData) -> tuple[list[str], dict[str, list[str]]]:
    """Why the two sides are not comparable (empty when they are), and the unpaired tasks."""
    reasons: list[str] = []
    if base.side == cand.side:
        reasons.append("baseline and candidate are the same trials")
    for data, role in ((base, "baseline"), (cand, "candidate")):
        if not data.rows:
            reasons.append(f"{role} has no trials")
    shared = sorted(set(base.tasks) & set(cand.tasks))
    one_side = {
        "baseline": sorted(set(base.tasks) - set(cand.tasks)),
        "candidate": sorted(set(cand.tasks) - set(base.tasks)),
    }
    versions = version_mismatch(base, cand) if {n for n, _ in base.datasets} == {n for n, _ in cand.datasets} else []
    if versions:
        # One dataset at two versions: its tasks pair on their names, never a like-for-like claim (issue 41).
        shown = "; ".join(f"{name} {v1} vs {v2}" for name, v1, v2 in versions)
        reasons.append(
            f"not like-for-like: {shown}; {len(shared)} tasks paired, {len(one_side['baseline'])} of the "
            f"baseline's and {len(one_side['candidate'])} of the candidate's left out"
        )
    else:
        reasons += _dataset_reasons(base.datasets, cand.datasets)
    changed = [t for t in shared if base.tasks[t].checksums != cand.tasks[t].checksums]
    if changed:
        listed = ", ".join(changed[:5]) + (", …" if len(changed) > 5 else "")
        reasons.append(f"verifier differs (task checksum) on {len(changed)} task(s): {listed}")
    if not versions and (one_side["baseline"] or one_side["candidate"]):
        reasons.append(
            f"task sets differ: {len(one_side['baseline'])} task(s) only in baseline, "
            f"{len(one_side['candidate'])} only in candidate"
        )
    return reasons, one_side


def _dataset_reasons(base: set[tuple[str, str]], cand: set[tuple[str, str]]) -> list[str]:
    if not base or not cand or base == cand:
        return []

    def show(datasets: set[tuple[str, str]]) -> str:
        return ", ".join(f"{n}@{v}" if v else n for n, v in sorted(datasets)) or "none"

    if {n for n, _ in base} == {n for n, _ in cand}:
        return [f"dataset version differs: baseline {show(base)}, candidate {show(cand)}"]
    return [f"dataset differs: baseline {show(base)}, candidate {show(cand)}"]


def promotion(comparison: dict[str, Any]) -> dict[str, Any]:
    """The seed-000 guard, the decision, one sentence on why, and the conditions it misses.

    "promote" needs every condition of `missing_conditions`; "revert" needs the same evidence
    and a CI95 of the delta below 0; anything else is "hold", with the conditions it misses.
    The evidence gate is the seed's where a side's format carries Lime evidence; elsewhere it
    reads "not applicable to <format>" and the decision rests on the rest.
    """
    delta = comparison["meanRewardDelta"]
    ci = comparison["meanRewardDeltaCi95"]
    cand_rate = comparison["evidenceCompletenessRate"]
    base_rate = comparison["baselineEvidenceCompletenessRate"]
    evidence_applies = comparison.get("evidenceApplies", True)
    guard = [
        {
            "check": "meanRewardDelta >= 0",
            "label": "The candidate scores no lower than the baseline",
            "ok": delta is not None and delta >= 0,
            "value": delta,
        },
        {
            "check": "p0QcGateRegressionCount == 0",
            "label": "No P0 QC gate regression in the candidate",
            "ok": comparison["p0QcGateRegressionCount"] == 0,
            "value": comparison["p0QcGateRegressionCount"],
        },
        {
            "check": "evidenceCompletenessRate >= baselineEvidenceCompletenessRate",
            "label": "Evidence as complete as the baseline's",
            "ok": not evidence_applies or (cand_rate is not None and base_rate is not None and cand_rate >= base_rate),
            "value": [cand_rate, base_rate],
            "applicable": evidence_applies,
            "note": "" if evidence_applies else not_applicable(comparison),
        },
    ]
    if delta is None:
        guard[0]["note"] = "no task is scored on both sides, so there is no delta to check"
    guard_passes = all(g["ok"] for g in guard)
    missing = missing_conditions(comparison, guard)
    # What a decision either way rests on: a valid comparison of enough tasks with evidence on both sides.
    sufficient = not [m for m in missing if m not in guard_failures(comparison, guard)]
    if not missing:
        decision = "promote"
    elif sufficient and delta is not None and delta < 0 and ci is not None and ci[1] < 0:
        decision = "revert"
    else:
        decision = "hold"
        missing += below_mde(comparison)
    return {
        "guard": guard,
        "guardPasses": guard_passes,
        "decision": decision,
        "decisionReason": decision_reason(comparison, decision, missing),
        "missingConditions": missing,
    }


def not_applicable(comparison: dict[str, Any]) -> str:
    formats = ", ".join(comparison.get("sourceFormats") or []) or "these formats"
    return f"not applicable to {formats}: they carry no Lime evidence pack"


def decision_reason(comparison: dict[str, Any], decision: str, missing: list[str]) -> str:
    """One sentence: why the decision is what it is, above all where the CI and the detectable effect disagree
    (the CI95 excludes 0 while the delta is below the MDE, or the other way round)."""
    delta, ci, mde = comparison["meanRewardDelta"], comparison["meanRewardDeltaCi95"], comparison.get("mde")
    effect = f"{delta:+.3f} a task (CI95 {ci[0]:+.3f} to {ci[1]:+.3f})" if delta is not None and ci else ""
    significant = bool(ci) and (ci[0] > 0 or ci[1] < 0)
    detectable = mde is not None and delta is not None and abs(delta) >= mde
    if decision == "promote":
        sentence = f"Promote: the candidate scores {effect} on {comparison['pairedTasks']} paired tasks"
        if significant and not detectable and mde is not None:
            sentence += (
                f"; the CI95 excludes 0, so the effect is real although smaller than the {mde:.3f} "
                "this sample detects 4 times in 5"
            )
        elif not significant:
            sentence += "; the CI95 includes 0, so no gain is shown: it promotes because the candidate scores no lower"
        return sentence + ", and every condition holds."
    if decision == "revert":
        return f"Revert: the candidate scores {effect}, below the baseline beyond doubt."
    first = missing[0] if missing else "a condition is not met"
    if significant and not detectable and mde is not None:
        return (
            f"Hold: {first}. The CI95 of {effect} excludes 0, so the effect is significant, "
            f"but it is below the {mde:.3f} this sample detects reliably: more attempts or tasks would confirm it."
        )
    if comparison["valid"] and delta is not None and delta < 0 and ci and not significant:
        size = f" and the delta is below the {mde:.3f} this sample detects reliably" if not detectable and mde else ""
        return (
            f"Hold: the candidate scores {effect}, lower than the baseline, so it is not promoted; "
            f"the CI95 includes 0{size}, so it is not reverted either."
        )
    return f"Hold: {first}."


def missing_conditions(comparison: dict[str, Any], guard: list[dict[str, Any]]) -> list[str]:
    """Each condition of "promote" this comparison does not meet, in plain words (empty: promote)."""
    missing = []
    if not comparison["valid"]:
        missing.append("comparison is not valid: " + "; ".join(comparison["invalidReasons"]))
    missing += guard_failures(comparison, guard)
    if comparison.get("evidenceApplies", True):
        for role, key in (("baseline", "baselineEvidenceCompletenessRate"), ("candidate", "evidenceCompletenessRate")):
            if not comparison[key]:
                missing.append(f"{role} has no evidence (evidence completeness {_pct(comparison[key])})")
    if comparison["pairedTasks"] < MIN_PAIRED_TASKS:
        missing.append(f"at least {MIN_PAIRED_TASKS} paired tasks (has {comparison['pairedTasks']})")
    return missing


def guard_failures(comparison: dict[str, Any], guard: list[dict[str, Any]]) -> list[str]:
    """Each check of the guard that fails, in words, with the figure that fails it."""
    failed = {g["check"] for g in guard if not g["ok"]}
    words = []
    if "meanRewardDelta >= 0" in failed:
        delta = comparison["meanRewardDelta"]
        words.append(
            "no task is scored on both sides, so there is no delta to check"
            if delta is None
            else f"the candidate scores lower than the baseline ({delta:+.3f} a task)"
        )
    if "p0QcGateRegressionCount == 0" in failed:
        words.append(f"the candidate has {comparison['p0QcGateRegressionCount']} P0 QC gate regression(s)")
    if "evidenceCompletenessRate >= baselineEvidenceCompletenessRate" in failed:
        rates = (_pct(comparison["evidenceCompletenessRate"]), _pct(comparison["baselineEvidenceCompletenessRate"]))
        words.append(f"the candidate's evidence is less complete than the baseline's ({rates[0]} vs {rates[1]})")
    return words


def below_mde(comparison: dict[str, Any]) -> list[str]:
    """What a hold says when the delta is smaller than the sample can detect, and what would do."""
    delta, mde = comparison["meanRewardDelta"], comparison.get("mde")
    if delta is None or mde is None or abs(delta) >= mde:
        return []
    more = []
    if comparison.get("moreAttemptsPerTask"):
        more.append(f"{comparison['moreAttemptsPerTask']} more attempt(s) per task")
    if comparison.get("moreTasks"):
        more.append(f"{comparison['moreTasks']} more task(s)")
    need = f": {' or '.join(more)} would bring it down to the delta" if more else ""
    return [f"the delta ({delta:+.3f}) is below the minimum detectable effect ({mde:.3f}, 80% power, alpha 0.05){need}"]


def _pct(rate: float | None) -> str:
    return "unknown" if rate is None else f"{rate:.0%}"


# A remaining risk: its sentence, and each count in it with what it counts (a figure link of
# comparisons.pair.figures: "passToFail", "candidate.unscored", "tasks.one-side", "#headline-eligibility").
Risk = tuple[str, list[tuple[str, str]]]


def remaining_risk(c: dict[str, Any], base: dict[str, Any], cand: dict[str, Any], one_side: int) -> list[Risk]:
    """Plain sentences: what the numbers do not rule out; each with the counts in it and what they count."""
    risks: list[Risk] = [(f"comparison invalid: {reason}", []) for reason in c["invalidReasons"]]
    ci = c["meanRewardDeltaCi95"]
    if c["meanRewardDelta"] is None:
        risks.append(("no task has a reward on both sides, so there is no reward delta", []))
    elif ci and ci[0] == ci[1] == 0:
        risks.append(("no reward difference: the two sides score the same on every paired task", []))
    elif ci and ci[0] <= 0 <= ci[1]:
        risks.append((f"CI95 of the reward delta crosses 0 ({ci[0]:+.3f} to {ci[1]:+.3f})", []))
    if one_side:
        risks.append(_counted(f"{one_side} task(s)", "tasks.one-side", " present on one side only"))
    if c["p0QcGateRegressionCount"]:
        risks.append(_counted(f"{c['p0QcGateRegressionCount']} P0 QC gate regression(s)", "p0", " in candidate trials"))
    cand_rate, base_rate = c["evidenceCompletenessRate"], c["baselineEvidenceCompletenessRate"]
    if c.get("evidenceApplies", True) and cand_rate is not None and base_rate is not None and cand_rate < base_rate:
        risks.append((f"evidence completeness below baseline ({cand_rate:.0%} vs {base_rate:.0%})", []))
    flips = c["flips"]
    if flips["passToFail"] + flips["failToPass"] and c["mcnemarP"] >= SIGNIFICANCE:
        to_pass, to_fail = f"{flips['failToPass']} fail → pass", f"{flips['passToFail']} pass → fail"
        risks.append(
            (
                f"pass/fail flips are not significant (McNemar p = {c['mcnemarP']:.3f}; {to_pass}, {to_fail})",
                [(to_pass, "failToPass"), (to_fail, "passToFail")],
            )
        )
    elif flips["passToFail"]:
        risks.append(_counted(f"{flips['passToFail']} task(s)", "passToFail", " flipped from pass to fail"))
    for role, side in (("baseline", base), ("candidate", cand)):
        if side["unscoredTrials"]:
            risks.append(
                _counted(
                    f"{side['unscoredTrials']} unscored trial(s)",
                    f"{role}.unscored",
                    " (no reward) are left out of the mean reward: counted, not failed",
                    f"{role}: ",
                )
            )
        if side["endedWithReward"]:
            risks.append(
                _counted(
                    f"{side['endedWithReward']} trial(s)",
                    f"{role}.endedWithReward",
                    " timed out or errored yet have a reward, counted by that reward",
                    f"{role}: ",
                )
            )
    if cand["deniedSideEffects"]:
        risks.append(
            _counted(
                f"{cand['deniedSideEffects']} side effect(s)",
                "candidate.deniedSideEffects",
                " after a denied permission",
                "candidate has ",
            )
        )
    risks += _operational_risk(base, cand)
    if not c["headlineEligible"]:
        reasons = f"{len(c['headlineReasons'])} reason(s)"
        after = "): a diagnostic result only"
        risks.append(_counted(reasons, "#headline-eligibility", after, "not headline-eligible ("))
    return risks


def _counted(count: str, counts: str, after: str, before: str = "") -> Risk:
    """A risk's sentence `before` + `count` + `after`, its count linked to what it counts."""
    return before + count + after, [(count, counts)]


def _operational_risk(base: dict[str, Any], cand: dict[str, Any]) -> list[Risk]:
    risks: list[Risk] = []
    if (
        base["timeoutRate"] is not None
        and cand["timeoutRate"] is not None
        and cand["timeoutRate"] > base["timeoutRate"]
    ):
        rates = f"{base['timeoutRate']:.1%} to {cand['timeoutRate']:.1%}"
        risks.append((f"timeout rate rises from {rates}", [(rates, "candidate.timedOut")]))
    if base["costPerTrial"] and cand["costPerTrial"] and cand["costPerTrial"] > base["costPerTrial"] * 1.1:
        risks.append((f"cost per trial rises by {cand['costPerTrial'] / base['costPerTrial'] - 1:.0%}", []))
    return risks
