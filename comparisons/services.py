"""Baseline / candidate comparisons: what views, the API and scripts call.

The flow: `sides.parse_sides` reads the request, `get_or_compute` returns the cached
Comparison row when its fingerprint still matches both sides' data, and otherwise queues
the Celery task, which calls `cache.run_comparison` -> `computation.compute`.
"""

from __future__ import annotations

from typing import Any

import redis
from django.utils import timezone
from kombu.exceptions import OperationalError

from comparisons.computing.cache import comparison_row, fingerprint
from comparisons.computing.events import comparison_event
from comparisons.computing.recovery import on_its_way
from comparisons.models import Comparison, SavedComparison
from comparisons.statistics.sides import Side
from comparisons.tasks import compute_comparison_task

# What a broker that is down or unreachable raises when a task is sent or a marker read.
BROKER_ERRORS = (OperationalError, redis.RedisError, ConnectionError)


class BrokerUnreachable(Exception):
    """The comparison could not be sent to a worker. Its row stays queued, and the recovery
    sweep (or the next request) sends it once the broker is back."""


def get_or_compute(baseline: Side, candidate: Side) -> Comparison:
    """The cached comparison when still fresh; otherwise queue the Celery task.

    Without a broker (no REDIS_URL) the task runs in-process, so the row returned is done.
    With a broker the row comes back queued: callers answer 202 and poll its status. A
    pending row whose message is gone, or whose worker died, is sent again. With the broker
    down, BrokerUnreachable: callers answer 503.
    """
    current = fingerprint(baseline, candidate)
    comparison = comparison_row(baseline, candidate)
    if comparison.fingerprint == current and comparison.status == Comparison.Status.DONE:
        return comparison
    pending = (Comparison.Status.QUEUED, Comparison.Status.RUNNING)
    eager = compute_comparison_task.app.conf.task_always_eager
    try:
        if comparison.fingerprint == current and comparison.status in pending and not eager:
            if on_its_way(comparison):
                return comparison
        Comparison.objects.filter(pk=comparison.pk).update(
            status=Comparison.Status.QUEUED, fingerprint=current, updated_at=timezone.now()
        )
        compute_comparison_task.delay(comparison.pk)
    except BROKER_ERRORS as exc:
        raise BrokerUnreachable(f"the task broker is unreachable: {exc}") from exc
    return Comparison.objects.defer("points").get(pk=comparison.pk)


def save_comparison(comparison: Comparison, user: Any = None) -> SavedComparison:
    """Record the comparison's event; its sequence counts the earlier saves of this comparison."""
    sequence = SavedComparison.objects.filter(comparison=comparison).count()
    event = comparison_event(comparison, sequence=sequence)
    result = comparison.result or {}
    title = f"{result.get('baseline', {}).get('label')} → {result.get('candidate', {}).get('label')}"
    return SavedComparison.objects.create(
        comparison=comparison,
        event_id=event["eventId"],
        title=title[:300],
        decision=event["comparison"].get("decision", ""),
        event=event,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
