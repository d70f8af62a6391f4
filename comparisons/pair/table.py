"""The comparison page's Figures table and headline numbers: one row per meaning, each saying what it counts.

A score's delta is on the page up to three times, and each says which tasks it counts, linked to them
(`figures.TASK_SETS`): the headline's (`comparison.meanRewardDelta`) pairs the tasks both sides scored;
the mean reward row's is the difference of the two sides' own means, each over the tasks it scored,
not paired; the leaderboard row's counts an unscored trial as 0, paired over the tasks both sides ran.
A row that would only repeat another's figures (pass@1 or the one reward key of binary rewards: the
mean reward again) is left out.
"""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from comparisons.pair.formatting import formatted
from comparisons.statistics.metrics import delta_or_none

SAME = 1e-9  # two figures this close are one figure

# label, metric key, value format, delta format, hint, the side's trials a value opens (`figure_links`)
METRIC_ROWS = (
    ("Timeout rate", "timeoutRate", "pct", "dpct", "trials whose agent timed out, over all trials", ""),
    ("Mean duration", "meanDurationSec", "sec", "dsec", "over the trials that say how long they ran", "all"),
    ("Tokens per trial", "tokensPerTrial", "int", "dint", "over the trials that report tokens", "all"),
    (
        "Tokens per successful trial",
        "tokensPerSuccess",
        "int",
        "dint",
        "total over all trials ÷ passed trials",
        "passed",
    ),
    ("Cost per trial", "costPerTrial", "usd", "dusd", "over the trials that report a cost", "all"),
    ("Cost per successful trial", "costPerSuccess", "usd", "dusd", "total over all trials ÷ passed trials", "passed"),
    ("Evidence completeness rate", "evidenceCompletenessRate", "pct", "dpct", "", "all"),
)
COUNT_ROWS = (
    ("Errored trials", "erroredTrials", "errored"),
    ("Unscored trials (not in the mean, not failed)", "unscoredTrials", "unscored"),
    ("Infrastructure failures", "infraFailures", "infra"),
    ("Ended abnormally yet scored (flagged)", "endedWithReward", "endedWithReward"),
    ("Side effects after a denied permission", "deniedSideEffects", "deniedSideEffects"),
)
MEAN_HINT = "each side's mean over the tasks it scored (a task: its scored attempts' mean); CI95: bootstrap over tasks"
WITHOUT_INFRA_HINT = "the same mean, the trials classed infrastructure left out (they open from each value)"
LEADERBOARD_HINT = "the source's own rule over every trial: an unscored trial counts as 0"
PASS_RATE_HINT = "trials, not tasks: passes over each side's scored trials"


def metric_rows(result: dict[str, Any], links: dict[str, Any]) -> list[dict[str, Any]]:
    """The Figures table: each row's label, hint, the two sides' values and their delta; a value that
    counts something links to it (`*_url`), and a `*_note` says over what it is taken."""
    base, cand = result["baseline"]["metrics"], result["candidate"]["metrics"]
    c, deltas = result["comparison"], result["deltas"]
    rows = _score_rows(base, cand, c, links)
    rows.append(_pass_rate_row(base, cand, deltas, links))
    rows += _repeating_rows(base, cand, c, deltas)
    rows.append(
        {
            "label": "Attempts per task (median)",
            "baseline": formatted(base["attemptsPerTask"], "int"),
            "candidate": formatted(cand["attemptsPerTask"], "int"),
            "delta": "",
        }
    )
    for label, key, fmt, dfmt, hint, opens in METRIC_ROWS:
        # evidence completeness is a Lime evidence-pack fact: no row where neither side carries it
        if key == "evidenceCompletenessRate" and not c.get("evidenceApplies"):
            continue
        row = {
            "label": label,
            "baseline": formatted(base[key], fmt),
            "candidate": formatted(cand[key], fmt),
            "delta": formatted(deltas[key], dfmt),
        }
        if opens:  # (a value of "—" opens nothing: no trial has the figure)
            row |= {
                f"{role}_url": links[role][opens]
                for role, m in (("baseline", base), ("candidate", cand))
                if m[key] is not None
            }
        if key == "timeoutRate":
            row |= {
                f"{role}_note": _of_trials(links, role, metrics, "timedOut", "timedOutTrials")
                for role, metrics in (("baseline", base), ("candidate", cand))
            }
        rows.append(row | ({"hint": hint} if hint else {}))
    for label, key, link in COUNT_ROWS:
        rows.append(
            {
                "label": label,
                "baseline": formatted(base[key], "int"),
                "candidate": formatted(cand[key], "int"),
                "delta": formatted(cand[key] - base[key], "dint"),
                "baseline_url": links["baseline"][link],
                "candidate_url": links["candidate"][link],
            }
        )
    return rows


def _of_trials(links: dict[str, Any], role: str, metrics: dict[str, Any], link: str, key: str) -> SafeString:
    """ "12 of 80 trials": the trials a rate counts and all the side's trials, each a link to them."""
    return format_html(
        '<a href="{}">{}</a> of <a href="{}">{} trials</a>',
        links[role][link],
        metrics[key],
        links[role]["all"],
        metrics["trials"],
    )


def _tasks_link(links: dict[str, Any], which: str, text: str) -> SafeString:
    return format_html('<a href="{}">{}</a>', links["tasks"][which], text)


def _with_ci(value: float | None, ci: list[float] | None) -> str:
    return formatted(value) + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _score_rows(
    base: dict[str, Any], cand: dict[str, Any], c: dict[str, Any], links: dict[str, Any]
) -> list[dict[str, Any]]:
    """The mean reward of scored trials, the same without infrastructure failures, and the source's rule."""

    def over(role: str) -> SafeString:
        return format_html("over {}", _tasks_link(links, f"{role}-scored", f"{c['scoredTasks'][role]} tasks"))

    mean = {
        "label": "Mean reward [CI95]",
        "hint": MEAN_HINT,
        "baseline": _with_ci(base["meanRewardScored"], base["meanRewardScoredCi95"]),
        "candidate": _with_ci(cand["meanRewardScored"], cand["meanRewardScoredCi95"]),
        "delta": formatted(delta_or_none(base["meanRewardScored"], cand["meanRewardScored"]), "delta"),
        "baseline_note": over("baseline"),
        "candidate_note": over("candidate"),
    }
    if c["valid"] and c["meanRewardDelta"] is not None:
        mean["delta_note"] = format_html(
            "the two means, not paired; paired over the {} both scored: {}",
            _tasks_link(links, "paired", f"{c['pairedTasks']} tasks"),
            formatted(c["meanRewardDelta"], "delta"),
        )
    rows = [
        mean,
        {
            "label": "Mean reward without infrastructure failures [CI95]",
            "hint": WITHOUT_INFRA_HINT,
            "baseline": _with_ci(base["meanRewardExcludingInfra"], base["meanRewardExcludingInfraCi95"]),
            "candidate": _with_ci(cand["meanRewardExcludingInfra"], cand["meanRewardExcludingInfraCi95"]),
            "delta": formatted(
                delta_or_none(base["meanRewardExcludingInfra"], cand["meanRewardExcludingInfra"]), "delta"
            ),
            "delta_note": "the two means, not paired",
            "baseline_url": links["baseline"]["infra"],
            "candidate_url": links["candidate"]["infra"],
        },
    ]
    if base["leaderboardRule"] or cand["leaderboardRule"]:
        rows.append(_leaderboard_row(base, cand, c, links))
    return rows


def _leaderboard_row(
    base: dict[str, Any], cand: dict[str, Any], c: dict[str, Any], links: dict[str, Any]
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "label": f"Leaderboard score ({base['leaderboardRule'] or cand['leaderboardRule']})",
        "hint": LEADERBOARD_HINT,
        "baseline": formatted(base["leaderboardScore"]),
        "candidate": formatted(cand["leaderboardScore"]),
        "delta": formatted(delta_or_none(base["leaderboardScore"], cand["leaderboardScore"]), "delta"),
        "baseline_note": format_html('over <a href="{}">{} trials</a>', links["baseline"]["all"], base["trials"]),
        "candidate_note": format_html('over <a href="{}">{} trials</a>', links["candidate"]["all"], cand["trials"]),
    }
    paired = c.get("leaderboardDelta")
    if c["valid"] and paired and paired["delta"] is not None:
        unpaired = delta_or_none(base["leaderboardScore"], cand["leaderboardScore"])
        # (as many attempts a task on each side: one figure, computed two ways, must read as one)
        shown = unpaired if _same(unpaired, paired["delta"]) else paired["delta"]
        se = f", SE {paired['se']:.3f}" if paired["se"] is not None else ""
        row["delta_note"] = format_html(
            "paired over the {} both ran: {} a task{}",
            _tasks_link(links, "both", f"{paired['tasks']} tasks"),
            formatted(shown, "delta"),
            se,
        )
    return row


def _pass_rate_row(
    base: dict[str, Any], cand: dict[str, Any], deltas: dict[str, Any], links: dict[str, Any]
) -> dict[str, Any]:
    def note(role: str, metrics: dict[str, Any]) -> SafeString:
        return format_html(
            '<a href="{}">{}</a> of <a href="{}">{} scored trials</a>',
            links[role]["passed"],
            metrics["passes"],
            links[role]["scored"],
            metrics["decided"],
        )

    return {
        "label": "Pass rate",
        "hint": PASS_RATE_HINT,
        "baseline": formatted(base["passRate"], "pct"),
        "candidate": formatted(cand["passRate"], "pct"),
        "delta": formatted(deltas["passRate"], "dpct"),
        "baseline_note": note("baseline", base),
        "candidate_note": note("candidate", cand),
    }


def _same(a: float | None, b: float | None) -> bool:
    return a is None and b is None or (a is not None and b is not None and abs(a - b) < SAME)


def _repeating_rows(
    base: dict[str, Any], cand: dict[str, Any], c: dict[str, Any], deltas: dict[str, Any]
) -> list[dict[str, Any]]:
    """pass@k and each reward key's mean, but where a row would only repeat the mean reward's figures."""
    rows = []
    for k, value in base["passAtK"].items():
        theirs = cand["passAtK"].get(k)
        if k == "1" and _same(value, base["meanReward"]) and _same(theirs, cand["meanReward"]):
            continue  # (binary rewards: pass@1 is the mean reward)
        rows.append(
            {
                "label": f"pass@{k} (mean over tasks)",
                "hint": f"the chance that one of {k} attempts passes, averaged over each side's tasks",
                "baseline": formatted(value, "pct"),
                "candidate": formatted(theirs, "pct"),
                "delta": formatted(deltas["passAtK"].get(k), "dpct"),
            }
        )
    keys = sorted(set(base["rewardKeys"]) | set(cand["rewardKeys"]))
    for key in keys:
        mine, theirs = base["rewardKeys"].get(key), cand["rewardKeys"].get(key)
        if len(keys) == 1 and _same(mine, base["meanReward"]) and _same(theirs, cand["meanReward"]):
            continue  # (the only reward key is the reward)
        rows.append(
            {
                "label": f"Mean reward: {key}",
                "hint": "each side's mean of this reward key over its own tasks; Δ paired over the tasks both scored",
                "baseline": formatted(mine),
                "candidate": formatted(theirs),
                "delta": formatted(deltas["rewardKeys"].get(key), "delta"),
                "delta_note": format_html("paired over {} tasks", c["pairedTasks"]) if c["valid"] else "",
            }
        )
    return rows


def headline_numbers(result: dict[str, Any]) -> dict[str, str]:
    c = result["comparison"]
    delta, ci, p = c["meanRewardDelta"], c["meanRewardDeltaCi95"], c["mcnemarP"]
    return {
        "delta": formatted(delta, "delta"),
        "delta_class": "" if not delta else ("up" if delta > 0 else "down"),
        "ci": f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "—",
        "se": "—" if c.get("meanRewardDeltaSe") is None else f"{c['meanRewardDeltaSe']:.3f}",
        "pass_delta": formatted(c["passRateDelta"], "dpct"),
        "baseline_pass_rate": formatted(result["baseline"]["metrics"]["passRate"], "pct"),
        "candidate_pass_rate": formatted(result["candidate"]["metrics"]["passRate"], "pct"),
        "flips": str(c["flips"]["passToFail"] + c["flips"]["failToPass"]),
        "mcnemar": "—" if p is None else "< 0.001" if p < 0.001 else f"= {p:.3f}",
        "evidence": formatted(c["evidenceCompletenessRate"], "pct"),
        "baseline_evidence": formatted(c["baselineEvidenceCompletenessRate"], "pct"),
    }
