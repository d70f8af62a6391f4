"""A comparison's digest: the decision first, its reasons, the headline figures, then the per-task deltas.

Built from the finished `Comparison.result` the page and API show (`comparisons.services.get_or_compute`).
"""

from __future__ import annotations

from typing import Any

from comparisons.pair.formatting import formatted
from comparisons.statistics.metrics import delta_or_none
from trials.digests.markdown import inline, link, table
from trials.digests.trial import Absolute

TASKS_LISTED = 50  # rows of the per-task table: flips first, then the largest changes
REASONS_LISTED = 20


def task_order(row: dict[str, Any]) -> tuple[int, float, str]:
    """Flips first, then the largest change of the mean reward, then by name."""
    return (0 if row.get("flip") else 1, -abs(row.get("delta") or 0.0), str(row.get("task")))


def comparison_digest(result: dict[str, Any], page_url: str, api_url: str, absolute: Absolute) -> str:
    c = result["comparison"]
    base, cand = result["baseline"], result["candidate"]
    title = f"# Comparison: {inline(base.get('label'), 200)} → {inline(cand.get('label'), 200)}"
    decision = [
        title,
        "",
        f"**Decision: {inline(c.get('decision'), 20)}**. {inline(c.get('decisionReason'), 1000)}",
        "",
        f"- Basis: {inline(c.get('decisionBasis'), 300)}",
        f"- Page: {link('the comparison', absolute(page_url))} · API: {link('JSON', absolute(api_url))}",
    ]
    parts = ["\n".join(decision)]
    parts += _listed("Conditions it misses", c.get("missingConditions") or [])
    guard = [_guard_line(g) for g in c.get("guard") or []]
    parts += _listed("Guard", guard)
    if not c.get("valid", True):
        parts += _listed("Not comparable", c.get("invalidReasons") or [])
    parts.append(_headline(result))
    parts.append(_tasks(result.get("tasks") or [], absolute))
    return "\n\n".join(parts) + "\n"


def _guard_line(check: dict[str, Any]) -> str:
    """A check of the guard as the page says it: one a format cannot carry reads "not applicable", never "ok"."""
    if check.get("applicable") is False:
        return f"not applicable: {check.get('label')} ({check.get('note')})"
    return f"{'ok' if check.get('ok') else 'fails'}: {check.get('label')}"


def _listed(title: str, items: list[Any]) -> list[str]:
    if not items:
        return []
    lines = [f"- {inline(item, 500)}" for item in items[:REASONS_LISTED]]
    if len(items) > REASONS_LISTED:
        lines.append(f"- … {len(items) - REASONS_LISTED} more")
    return [f"## {title}", "\n".join(lines)]


def _headline(result: dict[str, Any]) -> str:
    c = result["comparison"]
    b, k = result["baseline"]["metrics"], result["candidate"]["metrics"]
    deltas = result.get("deltas") or {}
    scored = c.get("scoredTasks") or {}
    mean_row = (
        "Mean reward (each side over the tasks it scored)",
        _over(b.get("meanRewardScored"), scored.get("baseline")),
        _over(k.get("meanRewardScored"), scored.get("candidate")),
        f"{formatted(delta_or_none(b.get('meanRewardScored'), k.get('meanRewardScored')), 'delta')} unpaired",
    )
    rows = [mean_row] + [
        (label, formatted(b.get(key), kind), formatted(k.get(key), kind), formatted(deltas.get(key), delta))
        for label, key, kind, delta in (
            ("Pass rate (trials)", "passRate", "pct", "dpct"),
            ("Timeout rate", "timeoutRate", "pct", "dpct"),
            ("Cost per trial", "costPerTrial", "usd", "dusd"),
        )
    ]
    flips = c.get("flips") or {}
    lines = [
        "## Headline figures",
        "",
        table(("", "baseline", "candidate", "delta"), rows),
        "",
        f"- Mean reward delta: {_mean_deltas(result)}",
        *_leaderboard(result),
        f"- McNemar exact p: {formatted(c.get('mcnemarP'))} (pass → fail {flips.get('passToFail', 0)}, "
        f"fail → pass {flips.get('failToPass', 0)} of {flips.get('pairedTasks', 0)} decided tasks)",
        f"- Minimum detectable effect: {formatted(c.get('mde'))} · valid: {'yes' if c.get('valid') else 'no'}"
        f" · headline eligible: {'yes' if c.get('headlineEligible') else 'no'}",
    ]
    return "\n".join(lines)


def _over(value: float | None, tasks: int | None) -> str:
    return formatted(value) + (f" over {tasks} tasks" if value is not None and tasks is not None else "")


def _mean_deltas(result: dict[str, Any]) -> str:
    """Which delta is which, as the page's Figures table says: paired over N tasks first, then unpaired."""
    c = result["comparison"]
    b, k = result["baseline"]["metrics"], result["candidate"]["metrics"]
    ci = c.get("meanRewardDeltaCi95")
    ci_text = f" (CI95 {ci[0]:+.3f} to {ci[1]:+.3f}, paired bootstrap over tasks)" if ci else " (no CI)"
    unpaired = delta_or_none(b.get("meanRewardScored"), k.get("meanRewardScored"))
    return (
        f"{formatted(c.get('meanRewardDelta'), 'delta')} paired over {c.get('pairedTasks', 0)} tasks{ci_text}; "
        f"{formatted(unpaired, 'delta')} unpaired (the two sides' own means)"
    )


def _leaderboard(result: dict[str, Any]) -> list[str]:
    """The source's own score (an unscored trial counts as 0), paired over the tasks both ran, where it has one."""
    b, k = result["baseline"]["metrics"], result["candidate"]["metrics"]
    rule = b.get("leaderboardRule") or k.get("leaderboardRule")
    paired = result["comparison"].get("leaderboardDelta")
    if not rule:
        return []
    line = f"- Leaderboard score ({inline(rule, 100)}): {formatted(b.get('leaderboardScore'))} → "
    line += formatted(k.get("leaderboardScore"))
    if paired and paired.get("delta") is not None:
        se = f", SE {paired['se']:.3f}" if paired.get("se") is not None else ""
        line += f"; {formatted(paired['delta'], 'delta')} paired over {paired['tasks']} tasks{se}"
    return [line]


def _mean(side: dict[str, Any] | None) -> str:
    return formatted(side.get("mean")) if side else "(not run)"


def _tasks(tasks: list[dict[str, Any]], absolute: Absolute) -> str:
    ordered = sorted(tasks, key=task_order)
    rows = []
    for row in ordered[:TASKS_LISTED]:
        name = inline(row.get("task"), 150)
        if row.get("sideBySideUrl"):
            name += f" ({link('side by side', absolute(row['sideBySideUrl']))})"
        rows.append(
            (
                name,
                inline(row.get("flip") or row.get("outcome") or "", 30),
                _mean(row.get("baseline")),
                _mean(row.get("candidate")),
                formatted(row.get("delta"), "delta"),
            )
        )
    shown = f"{len(rows)} of {len(tasks)}" if len(tasks) > len(rows) else f"{len(rows)}"
    title = f"## Per-task deltas ({shown}: flips first, then the largest changes)"
    return title + "\n\n" + table(("task", "outcome", "baseline", "candidate", "delta"), rows)
