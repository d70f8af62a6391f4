"""Figures as the comparison pages show them: one formatter, so a saved comparison reads as the page does."""

from __future__ import annotations

from typing import Any

from core.durations import duration


def formatted(value: Any, kind: str = "num") -> str:
    """`kind`: num, delta (signed), pct, dpct (a rate's change in points), usd, dusd, int, dint, sec, dsec
    (a duration as every page writes one: "2 min 5 s"). Every signed figure: "+" or "-", as Python writes them."""
    if value is None:
        return "—"
    if kind == "sec":
        return duration(value)
    if kind == "dsec":
        return f"{'+' if value >= 0 else '-'}{duration(abs(value))}"
    if kind == "pct":
        return f"{value:.1%}"
    if kind == "dpct":
        return f"{value * 100:+.1f} pp"
    if kind == "usd":
        return f"${value:,.4f}"
    if kind == "dusd":
        return f"{'+' if value >= 0 else '-'}${abs(value):,.4f}"
    if kind == "int":
        return f"{value:,.0f}"
    if kind == "dint":
        return f"{value:+,.0f}"
    if kind == "delta":
        return f"{value:+.3f}"
    return f"{value:,.3f}"
