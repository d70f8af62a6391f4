"""Plotly figures of the N-sides grid and of a trend (plain dicts, no Django).

As in charts.py, each point's `customdata` is the URL the browser opens on a click:
a side's trials.
"""

from __future__ import annotations

from typing import Any

from comparisons.pair.charts import BASELINE_COLOUR, CANDIDATE_COLOUR, _layout, _plain


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


TREND_COLOURS = ("#2f6fdf", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#16a085", "#6b7a90", "#b7950b")


def trend(result: dict[str, Any]) -> dict[str, Any]:
    """Each configuration a line of its runs by date: mean reward with its CI95 (solid) and pass rate
    (dotted, hidden until its legend entry is clicked); never a line from one configuration to another."""
    lines: dict[Any, list[dict[str, Any]]] = {}
    for p in result["points"]:
        lines.setdefault(p["configuration"], []).append(p)
    data = []
    for i, points in enumerate(lines.values()):
        name, colour = _plain(points[0]["label"]), TREND_COLOURS[i % len(TREND_COLOURS)]
        x = [p["first_trial_at"] for p in points]
        runs = [_plain(p["run"]) for p in points]
        urls = [p["trials_url"] for p in points]
        rewards, rates = [p["mean_reward"] for p in points], [p["pass_rate"] for p in points]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{name}: mean reward",
                "legendgroup": name,
                "x": x,
                "y": rewards,
                "error_y": _error_bars(rewards, [p["mean_reward_ci95"] for p in points]),
                "customdata": urls,
                "text": [
                    f"{r} · {p['n_tasks']} tasks · {p['n_trials']} trials" for r, p in zip(runs, points, strict=True)
                ],
                "marker": {"color": colour, "size": 9},
                "line": {"color": colour},
                "hovertemplate": f"<b>{name}</b><br>%{{text}}<br>%{{x}}<br>mean reward %{{y:.3f}}<extra></extra>",
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{name}: pass rate",
                "legendgroup": name,
                "visible": "legendonly",
                "x": x,
                "y": rates,
                "error_y": _error_bars(rates, [p["pass_rate_ci95"] for p in points]),
                "customdata": urls,
                "text": [f"{r} · {p['passes']} / {p['decided']} passed" for r, p in zip(runs, points, strict=True)],
                "line": {"dash": "dot", "color": colour},
                "marker": {"color": colour, "size": 7},
                "hovertemplate": f"<b>{name}</b><br>%{{text}}<br>%{{x}}<br>pass rate %{{y:.1%}}<extra></extra>",
            }
        )
    return {
        "data": data,
        "layout": _layout(
            "Mean reward (CI95) of each run of each configuration, by its first trial",
            xaxis={"type": "date", "title": {"text": "run (first trial)"}, "automargin": True},
            yaxis={"title": {"text": "mean reward / pass rate"}},
            legend={"orientation": "h", "y": -0.3},
        ),
    }
