"""What every demo module shares: the dataset and runner constants, seeded randomness, ids
and times, and the byte-exact file writers."""

from __future__ import annotations

import hashlib
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

DATASET_NAME = "benchviewer-demo/terminal-tasks"
DATASET_VERSION = "2026.11"
# trial_uri / trials_dir point at the machine that "ran" the job, never at the output dir,
# so two runs into different directories stay byte-identical.
RUN_ROOT = "/srv/harbor/jobs"
BASE_TIME = datetime(2026, 11, 2, 14, 0, 0, tzinfo=UTC)
AGENT_TIMEOUT_SEC = 900.0
JSON_OPTS = orjson.OPT_INDENT_2


# --------------------------------------------------------------------------------------
# Small deterministic helpers
# --------------------------------------------------------------------------------------


def seeded_rng(*parts: object) -> random.Random:
    """A Random seeded from a string key: stable across runs and PYTHONHASHSEED."""
    return random.Random("/".join(str(p) for p in parts))


def seeded_uuid(*parts: object) -> str:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def seeded_hex(n: int, *parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()[:n]


def iso(dt: datetime) -> str:
    """Trial timestamps: UTC with a Z, microseconds, as Harbor writes them."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso_ms(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def random_secs(rng: random.Random, lo: float, hi: float) -> timedelta:
    return timedelta(microseconds=round(rng.uniform(lo, hi) * 1_000_000))


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=JSON_OPTS) + b"\n")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
