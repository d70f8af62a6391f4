"""Reading values of unknown shape: a producer's field may hold anything JSON allows.

The converters every parser shares: numbers, counts, attempts, timestamps, categories.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from trials.ingest.records import Problem


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


def to_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def to_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def to_count(value: Any) -> int | None:
    """A count as the columns hold it (0 to 2^63), or None: the row keeps what was written."""
    number = to_int(value) if not isinstance(value, float) or value.is_integer() else None
    return number if number is not None and 0 <= number < 2**63 else None


def to_attempt(value: Any) -> int | None:
    """An attempt number, or None for anything that is not one (a float is not an attempt)."""
    number = to_int(value) if not isinstance(value, float) else None
    return number if number is not None and 0 <= number < 2**31 else None


def parse_time(value: Any, file: str, json_path: str, problems: list[Problem] | None = None) -> datetime | None:
    """ISO timestamp -> datetime. A naive result is kept but flagged: its zone is a guess."""
    if not isinstance(value, str) or not value:
        return None
    moment = parse_iso(value)
    if moment is None:
        if problems is not None:
            problems.append(
                Problem(file, f"unreadable timestamp {value!r}", json_path, severity="warning", kept="raw value")
            )
        return None
    if moment.tzinfo is None and problems is not None:
        problems.append(
            Problem(file, f"timestamp {value!r} has no time zone", json_path, severity="warning", kept="naive datetime")
        )
    return moment


def clean_category(value: Any) -> str:
    """`none` means no failure: store it as empty."""
    text = to_str(value).strip()
    return "" if text.lower() == "none" else text
