"""Reading values of unknown shape: a producer's field may hold anything JSON allows."""

from __future__ import annotations

from datetime import UTC, datetime
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


def parse_iso(value: Any) -> datetime | None:
    """An ISO 8601 timestamp, or None when it is not one or not a moment a database can hold."""
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is not None:
            moment.astimezone(UTC)  # 0001-01-01T00:00+01:00 falls before year 1 in UTC
    except (ValueError, OverflowError):
        return None
    return moment


def pick(data: dict[str, Any], *keys: str, default: Any = None) -> Any:
    """First present, non-None value among `keys` (camelCase and snake_case spellings)."""
    for key in keys:
        value = data.get(key)
        if value is not None:
            return value
    return default


def to_str(value: Any) -> str:
    return "" if value is None else str(value)
