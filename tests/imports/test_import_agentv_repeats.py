"""AgentV repeats: a test run three times is three attempts of one task, each a trial of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import import_path
from trials.models import Trial

pytestmark = pytest.mark.django_db


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_test_repeated_on_three_rows_is_three_attempts(tmp_path):
    rows = [
        {"test_id": "refactor-001", "target": "gpt-4.1", "score": score, "timestamp": f"2026-01-15T10:0{i}:00Z"}
        for i, score in enumerate((1.0, 0.0, 0.5))
    ]
    rows.append({"test_id": "refactor-002", "target": "gpt-4.1", "score": 1.0, "timestamp": "2026-01-15T10:09:00Z"})
    imp = import_path(write_jsonl(tmp_path / "repeat.results.jsonl", rows))
    repeated = Trial.objects.filter(task__name="refactor-001").order_by("attempt")
    assert [(t.attempt, t.reward) for t in repeated] == [(n, r["score"]) for n, r in enumerate(rows[:3], start=1)]
    assert Trial.objects.get(task__name="refactor-002").attempt == 1
    assert not [p for p in imp.problems if "duplicate" in p.get("message", "")]
    assert len({t.key for t in Trial.objects.all()}) == len(rows)


def test_a_row_with_its_trials_listed_is_a_trial_per_attempt(tmp_path):
    attempts = [
        {"attempt": i, "score": score, "verdict": "pass" if score == 1 else "fail"}
        for i, score in enumerate((0.0, 1.0, 1.0))
    ]
    row = {"test_id": "code-gen-001", "target": "claude", "score": 1.0, "trials": attempts, "aggregation": "pass_at_k"}
    import_path(write_jsonl(tmp_path / "trials.results.jsonl", [row]))
    trials = Trial.objects.filter(task__name="code-gen-001").order_by("attempt")
    assert [(t.attempt, t.reward) for t in trials] == [(n, a["score"]) for n, a in enumerate(attempts, start=1)]
    assert {t.configuration.key for t in trials} == {"claude"}


def test_importing_the_same_repeats_again_adds_nothing(tmp_path):
    rows = [{"test_id": "t", "target": "m", "score": s} for s in (1.0, 0.0, 1.0)]
    path = write_jsonl(tmp_path / "again.results.jsonl", rows)
    import_path(path)
    import_path(path)
    assert Trial.objects.count() == 3
