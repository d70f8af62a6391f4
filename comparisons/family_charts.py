"""Plotly figures of the N-sides grid and of a trend (plain dicts, no Django).

As in charts.py, each point's `customdata` is the URL the browser opens on a click:
a side's trials.
"""

from __future__ import annotations

from typing import Any

from comparisons.charts import BASELINE_COLOUR, CANDIDATE_COLOUR, GOOD, _layout, _plain


def _error_bars(values: list[float | None], intervals: list[list[float] | None]) -> dict[str, Any]:
    plus = [ci[1] - v if ci and v is not None else 0 for v, ci in zip(values, intervals, strict=True)]
    minus = [v - ci[0] if ci and v is not None else 0 for v, ci in zip(values, intervals, strict=True)]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


def grid_sides(result: dict[str, Any]) -> dict[str, Any]:
    """Each side's task-averaged mean reward with its CI95; the reference in grey."""
    sides = result["sides"]
    values = [s["mean_reward"] for s in sides]
    text = [
        "reference"
        if s["is_reference"]
        else (f"Δ {s['delta_vs_reference']:+.3f}" if s["delta_vs_reference"] is not None else "no paired task")
        + ("" if s["valid"] else " · not comparable")
        for s in sides
    ]
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "markers",
                "x": [_plain(s["label"]) for s in sides],
                "y": values,
                "error_y": _error_bars(values, [s["mean_reward_ci95"] for s in sides]),
                "text": text,
                "customdata": [s["trials_url"] for s in sides],
                "marker": {
                    "size": 11,
                    "color": [BASELINE_COLOUR if s["is_reference"] else CANDIDATE_COLOUR for s in sides],
                    "symbol": ["circle" if s["valid"] else "x" for s in sides],
                },
                "hovertemplate": "<b>%{x}</b><br>mean reward %{y:.3f}<br>%{text}<br>click: its trials<extra></extra>",
            }
        ],
        "layout": _layout(
            "Mean reward per side with 95% interval (bootstrap over tasks)",
            xaxis={"type": "category", "automargin": True},
            yaxis={"title": {"text": "mean reward (task-averaged)"}},
        ),
    }


def trend(result: dict[str, Any]) -> dict[str, Any]:
    """Mean reward with its CI95 and the pass rate, one point per configuration, oldest first."""
    points = result["points"]
    x = [f"{_plain(p['label'])} · {(p['first_trial_at'] or '')[:10]}" for p in points]
    urls = [p["trials_url"] for p in points]
    rewards = [p["mean_reward"] for p in points]
    rates = [p["pass_rate"] for p in points]
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "mean reward",
                "x": x,
                "y": rewards,
                "error_y": _error_bars(rewards, [p["mean_reward_ci95"] for p in points]),
                "customdata": urls,
                "text": [f"{p['n_tasks']} tasks · {p['n_trials']} trials" for p in points],
                "marker": {"color": CANDIDATE_COLOUR, "size": 9},
                "hovertemplate": "<b>%{x}</b><br>mean reward %{y:.3f}<br>%{text}<extra></extra>",
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "pass rate",
                "x": x,
                "y": rates,
                "error_y": _error_bars(rates, [p["pass_rate_ci95"] for p in points]),
                "customdata": urls,
                "text": [f"{p['passes']} / {p['decided']} passed" for p in points],
                "line": {"dash": "dot"},
                "marker": {"color": GOOD, "size": 7},
                "hovertemplate": "<b>%{x}</b><br>pass rate %{y:.1%}<br>%{text}<extra></extra>",
            },
        ],
        "layout": _layout(
            "Mean reward (CI95) and pass rate (Wilson) per configuration, by first trial",
            xaxis={"type": "category", "automargin": True},
            yaxis={"title": {"text": "mean reward / pass rate"}},
            legend={"orientation": "h", "y": -0.25},
        ),
    }
