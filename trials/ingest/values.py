"""Reading values of unknown shape: a producer's field may hold anything JSON allows."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def comparable_times(*times: datetime) -> bool:
    """min, max and subtraction need datetimes that are all aware or all naive."""
    return bool(times) and len({t.tzinfo is None for t in times}) == 1


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if start and end and comparable_times(start, end) else None
