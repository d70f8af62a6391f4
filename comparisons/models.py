"""Cached comparisons and saved comparison events.

A Comparison row is keyed by both sides. Its `fingerprint` summarises the data of both
sides when it was computed; a different fingerprint now means "stale, compute again".
"""

from __future__ import annotations

import orjson
from django.conf import settings
from django.db import models


class FastJSONField(models.JSONField):
    """JSONField that decodes with orjson: a cached comparison is ~0.7 MB of JSON per page view."""

    def from_db_value(self, value, expression, connection):
        if isinstance(value, str | bytes):
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        return super().from_db_value(value, expression, connection)


class SideKind(models.TextChoices):
    CONFIGURATION = "configuration"
    JOB = "job"


class Comparison(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    baseline_kind = models.CharField(max_length=20, choices=SideKind.choices)
    baseline_id = models.PositiveBigIntegerField()
    candidate_kind = models.CharField(max_length=20, choices=SideKind.choices)
    candidate_id = models.PositiveBigIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # The fingerprint the result was computed for (or is being computed for).
    fingerprint = models.CharField(max_length=64, blank=True)
    result = FastJSONField(null=True, blank=True)  # summary, matrix, guard: what the page shows
    points = FastJSONField(null=True, blank=True)  # per-trial columns: only the charts read them
    error = models.TextField(blank=True)
    compute_ms = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["baseline_kind", "baseline_id", "candidate_kind", "candidate_id"],
                name="unique_comparison_sides",
            )
        ]

    def __str__(self) -> str:
        return f"{self.baseline_kind} {self.baseline_id} vs {self.candidate_kind} {self.candidate_id}"


class SavedComparison(models.Model):
    """A `benchmark.comparison.completed` event, frozen when a user saved the comparison."""

    comparison = models.ForeignKey(Comparison, null=True, on_delete=models.SET_NULL, related_name="saved")
    event_id = models.CharField(max_length=100, unique=True)
    title = models.CharField(max_length=300)
    decision = models.CharField(max_length=10)
    event = models.JSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.title} ({self.decision})"


class GridResult(models.Model):
    """A computed N-sides grid (comparisons/families/grid.py) or trend (trend.py), keyed by what it covers.

    Like Comparison, `fingerprint` summarises the trials it read when it was computed; a
    different one now means "compute again".
    """

    key = models.CharField(max_length=64, unique=True)  # sha256 of the side kind, ids and reference
    fingerprint = models.CharField(max_length=64)
    result = FastJSONField()
    # A grid's task rows, one JSON document a line, apart from `result`: a page of 100 decodes its
    # 100 lines, not 12 sides x 1,000 tasks of cells (2.5 MB, most of a served grid's time).
    task_lines = models.TextField(blank=True, default="")
    compute_ms = models.FloatField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"grid {self.key[:12]}"

    def task_rows(self, indices) -> list[dict]:
        """The task rows at these positions (in the stored order: by task name)."""
        lines = self.task_lines.split("\n") if self.task_lines else []
        return [orjson.loads(lines[i]) for i in indices]
