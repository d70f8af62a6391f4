"""Plotly figures (plain data + layout dicts) built from a computed comparison.

No Django here: URLs are already in the comparison result (matrix rows carry their
trial-list links) or come in as a function. Each point's `customdata` is the URL the
browser opens when the point is clicked.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from trials.reading.text import NAME_PARTS

BASELINE_COLOUR = "#6b7a90"
CANDIDATE_COLOUR = "#2f6fdf"
GOOD, BAD, NEUTRAL = "#2e8b57", "#c0392b", "#9aa5b1"
MAX_BAR_TASKS = 400  # beyond this, the delta chart keeps the largest moves both ways
MAX_LABELLED_TASKS = 120  # task labels, smaller past 40, up to this many bars or rows (a TB1 run: 80 tasks)

CHARTS = ("reward_delta", "heatmap", "distribution", "cost_reward", "pass_rate")


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 60},
        "hovermode": "closest",
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        **extra,
    }


TICK_CHARS = 26  # a task's tick at most: its head and its tail, "…" between (the hover keeps it whole)
DELTA_HEIGHT = 460  # px: the delta chart spans the row, its bars as tall whatever the count of tasks


def _tick(name: Any) -> str:
    """A task's name as a tick: whole when short, else its head and its tail ("blind-maze…algorithm.hard"):
    a task's variants differ at their end, its family at its head."""
    text = str(name)
    if len(text) > TICK_CHARS:
        head = (TICK_CHARS - 1) // 2
        text = text[:head] + "…" + text[len(text) - (TICK_CHARS - 1 - head) :]
    return _plain(text)


def _task_axis(names: list[Any], **extra: Any) -> dict[str, Any]:
    """A task axis with every task's tick (`_tick`) while they can be read: smaller past 40, none past
    MAX_LABELLED_TASKS. The categories stay the whole names, so a bar's hover says its task whole."""
    axis = {
        "showticklabels": len(names) <= MAX_LABELLED_TASKS,
        "automargin": True,
        "type": "category",
        "tickmode": "array",
        "tickvals": [_plain(n) for n in names],
        "ticktext": [_tick(n) for n in names],
        **extra,
    }
    if len(names) > 40:
        axis["tickfont"] = {"size": 9}
    return axis


MIN_HEAD = 8  # characters of a common head worth taking out of the ticks
SIDE_TICK_LINE = 18  # characters a line of a side's tick: two sides' ticks stay apart in a half-width chart


def _side_axis(labels: list[str]) -> dict[str, Any]:
    """A side axis whose ticks fit the chart: the names' common head (`20250923_droid_`) once, as the axis
    title, and each tick what is left (`…claude-4-sonnet`), level, wrapped after a separator; the hover
    keeps each name whole (the trace's categories are the whole names)."""
    head = _common_head(labels)
    ticks = [_wrapped(("…" if head else "") + label[len(head) :]) for label in labels]
    axis: dict[str, Any] = {"automargin": True, "tickmode": "array", "tickvals": labels, "ticktext": ticks}
    axis["tickangle"] = 0
    if head:
        axis["title"] = {"text": f"{head}…", "standoff": 6}
    return axis


def _common_head(labels: list[str]) -> str:
    """The longest start the names share that ends with a separator, "" when they share none."""
    shared = 0
    while shared < min(map(len, labels)) and len({label[shared] for label in labels}) == 1:
        shared += 1
    while shared and labels[0][shared - 1] not in NAME_PARTS:
        shared -= 1
    # (a head as short as "job " says nothing on its own: the ticks keep it)
    return labels[0][:shared] if MIN_HEAD <= shared < min(map(len, labels)) else ""


def _wrapped(text: str) -> str:
    """A tick's text in lines of about SIDE_TICK_LINE characters, broken after separators only."""
    lines, line = [], ""
    for piece in re.split(f"(?<=[{re.escape(NAME_PARTS)}])", text):
        if line and len(line) + len(piece) > SIDE_TICK_LINE:
            lines.append(line)
            line = ""
        line += piece
    return "<br>".join([*lines, line])


def no_data(title: str, why: str) -> dict[str, Any]:
    """A chart with nothing to draw: its title and why, no made-up axes."""
    hidden = {"visible": False}
    note = {"text": f"no data: {_plain(why)}", "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}
    return {"data": [], "layout": _layout(title, xaxis=hidden, yaxis=hidden, annotations=[note], height=200)}


def _plain(name: Any) -> str:
    """A name from the data, as text: Plotly reads <a>, <span style>, <b>... in labels and hover text
    as markup, and shows &lt; &gt; &amp; as the characters."""
    return html.escape(str(name), quote=False)


def _labels(result: dict[str, Any]) -> tuple[str, str]:
    return _plain(result["baseline"]["label"]), _plain(result["candidate"]["label"])


def reward_delta(result: dict[str, Any], points: dict[str, Any], trial_url: Callable[[int], str]) -> dict[str, Any]:
    """Sorted bars: candidate minus baseline mean reward, one bar per paired task."""
    rows = sorted((r for r in result["tasks"] if r["delta"] is not None), key=lambda r: r["delta"])
    if not rows:
        return no_data("Reward delta per task (candidate − baseline)", "no task is scored on both sides")
    if len(rows) > MAX_BAR_TASKS:
        half = MAX_BAR_TASKS // 2
        rows = rows[:half] + rows[-half:]
    colours = [GOOD if r["delta"] > 0 else BAD if r["delta"] < 0 else NEUTRAL for r in rows]
    trace = {
        "type": "bar",
        "x": [_plain(r["task"]) for r in rows],
        "y": [r["delta"] for r in rows],
        "marker": {"color": colours},
        "customdata": [r["candidateUrl"] for r in rows],
        "text": [r["outcome"] for r in rows],
        "textposition": "none",
        "hovertemplate": "<b>%{x}</b><br>Δ reward %{y:+.3f}<br>%{text}<br>click: candidate trials<extra></extra>",
    }
    return {
        "data": [trace],
        "layout": _layout(
            "Reward delta per task (candidate − baseline)",
            height=DELTA_HEIGHT,
            xaxis=_task_axis(
                [r["task"] for r in rows],
                tickangle=-60 if len(rows) <= 30 else -90,
                title={"text": "task", "standoff": 12},
            ),
            yaxis={"title": {"text": "Δ mean reward"}, "zeroline": True},
        ),
    }


def _mean_of(side: dict[str, Any] | None) -> float | None:
    """A side's mean reward of a task (None: not run, or no scored attempt)."""
    return side["mean"] if side else None


def heatmap(result: dict[str, Any], points: dict[str, Any], trial_url: Callable[[int], str]) -> dict[str, Any]:
    """Task x side: mean reward of each task on each side."""
    rows = sorted(result["tasks"], key=lambda r: (r["delta"] is None, r["delta"] or 0.0))
    if not any(_mean_of(r["baseline"]) is not None or _mean_of(r["candidate"]) is not None for r in rows):
        return no_data("Mean reward per task and side", "no task is scored on either side")
    base_label, cand_label = _labels(result)

    return {
        "data": [
            {
                "type": "heatmap",
                "x": [base_label, cand_label],
                "y": [_plain(r["task"]) for r in rows],
                "z": [[_mean_of(r["baseline"]), _mean_of(r["candidate"])] for r in rows],
                "customdata": [[r["baselineUrl"], r["candidateUrl"]] for r in rows],
                "zmin": 0,
                "zmax": 1,
                "colorscale": [[0.0, BAD], [0.5, "#f4d35e"], [1.0, GOOD]],  # red = 0, green = 1
                "hovertemplate": "<b>%{y}</b><br>%{x}: mean reward %{z:.3f}<extra></extra>",
            }
        ],
        "layout": _layout(
            "Mean reward per task and side",
            height=max(320, min(1200, 18 * len(rows) + 120)),
            yaxis=_task_axis([r["task"] for r in rows]),
            xaxis=_side_axis([base_label, cand_label]),
        ),
    }


def distribution(result: dict[str, Any], points: dict[str, Any], trial_url: Callable[[int], str]) -> dict[str, Any]:
    """Distribution of task mean rewards on each side (box with every task as a point)."""
    traces = []
    for role, colour in (("baseline", BASELINE_COLOUR), ("candidate", CANDIDATE_COLOUR)):
        rows = [r for r in result["tasks"] if r[role] and r[role]["mean"] is not None]
        traces.append(
            {
                "type": "box",
                "name": _plain(result[role]["label"]),
                "y": [r[role]["mean"] for r in rows],
                "text": [_plain(r["task"]) for r in rows],
                "customdata": [r[f"{role}Url"] for r in rows],
                "boxpoints": "all",
                "jitter": 0.4,
                "pointpos": 0,
                "marker": {"color": colour, "size": 5},
                "hovertemplate": "<b>%{text}</b><br>%{fullData.name}: mean reward %{y:.3f}<extra></extra>",
            }
        )
    if not any(t["y"] for t in traces):
        return no_data("Reward distribution per side (task means)", "no task is scored on either side")
    return {
        "data": traces,
        "layout": _layout(
            "Reward distribution per side (task means)",
            showlegend=False,  # (the ticks name the sides; a legend of whole names took half the chart)
            xaxis=_side_axis(list(_labels(result))),
            yaxis={"title": {"text": "mean reward"}},
        ),
    }


def cost_reward(result: dict[str, Any], points: dict[str, Any], trial_url: Callable[[int], str]) -> dict[str, Any]:
    """Cost vs reward, one point per trial that has both."""
    traces = []
    for role, colour in (("baseline", BASELINE_COLOUR), ("candidate", CANDIDATE_COLOUR)):
        cols = points.get(role) or {}
        keep = [
            i
            for i, (cost, reward) in enumerate(zip(cols.get("cost", []), cols.get("reward", []), strict=True))
            if cost is not None and reward is not None
        ]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": _plain(result[role]["label"]),
                "x": [cols["cost"][i] for i in keep],
                "y": [cols["reward"][i] for i in keep],
                "text": [_plain(cols["task"][i]) for i in keep],
                "customdata": [trial_url(cols["id"][i]) for i in keep],
                "marker": {"color": colour, "size": 6, "opacity": 0.6},
                "hovertemplate": "<b>%{text}</b><br>cost $%{x:.4f}<br>reward %{y:.3f}<extra></extra>",
            }
        )
    if not any(t["x"] for t in traces):
        return no_data("Cost vs reward per trial", "no trial of either side records a cost")
    return {
        "data": traces,
        "layout": _layout(
            "Cost vs reward per trial", xaxis={"title": {"text": "cost (USD)"}}, yaxis={"title": {"text": "reward"}}
        ),
    }


def pass_rate(result: dict[str, Any], points: dict[str, Any], trial_url: Callable[[int], str]) -> dict[str, Any]:
    """Pass rate per side with its Wilson 95% interval."""
    if not any(result[role]["metrics"]["decided"] for role in ("baseline", "candidate")):
        return no_data("Pass rate with 95% interval (Wilson)", "no trial of either side passed or failed")
    x, y, plus, minus, urls, text = [], [], [], [], [], []
    for role in ("baseline", "candidate"):
        metrics = result[role]["metrics"]
        rate, ci = metrics["passRate"], metrics["passRateCi95"]
        x.append(_plain(result[role]["label"]))
        y.append(rate)
        plus.append(ci[1] - rate if ci and rate is not None else 0)
        minus.append(rate - ci[0] if ci and rate is not None else 0)
        urls.append(result[role]["trialsUrl"] + "&status=passed")
        text.append(f"{metrics['passes']} / {metrics['decided']} passed")
    return {
        "data": [
            {
                "type": "bar",
                "x": x,
                "y": y,
                "text": text,
                "customdata": urls,
                "marker": {"color": [BASELINE_COLOUR, CANDIDATE_COLOUR]},
                "insidetextanchor": "start",  # (at the bar's foot, clear of its interval's whisker)
                "error_y": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus},
                "hovertemplate": "<b>%{x}</b><br>pass rate %{y:.1%}<br>%{text}<extra></extra>",
            }
        ],
        "layout": _layout(
            "Pass rate with 95% interval (Wilson)",
            xaxis=_side_axis(x),
            yaxis={"title": {"text": "pass rate"}, "range": [0, 1.05]},
        ),
    }


BUILDERS = {
    "reward_delta": reward_delta,
    "heatmap": heatmap,
    "distribution": distribution,
    "cost_reward": cost_reward,
    "pass_rate": pass_rate,
}


def build(
    chart: str, result: dict[str, Any], points: dict[str, Any], trial_url: Callable[[int], str]
) -> dict[str, Any]:
    return BUILDERS[chart](result, points, trial_url)
