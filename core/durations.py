"""A duration as every page writes one (the trial pages' `seconds` filter, the comparison figures)."""

from __future__ import annotations

from typing import Any


def duration(value: Any) -> str:
    """12.3 -> "12.3 s", 125 -> "2 min 5 s", 4000 -> "1 h 6 min" (no-break spaces: one duration, one line)."""
    if not isinstance(value, int | float):
        return "–"
    if value < 60:
        shown = f"{value:.1f} s" if value < 10 else f"{value:.0f} s"
    else:
        minutes, secs = divmod(int(round(value)), 60)
        hours, minutes = divmod(minutes, 60)
        shown = f"{minutes} min {secs} s" if not hours else f"{hours} h {minutes} min"
    return shown.replace(" ", "\u00a0")
