"""Celery tasks: compute a comparison, and send again the ones no worker will finish
(comparisons/computing/recovery.py). Eager (in-process) when REDIS_URL is unset."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import after_task_publish, worker_ready

from comparisons.computing import recovery
from core.broker import first_argument, mark_sent

log = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def compute_comparison_task(comparison_id: int) -> None:
    recovery.run_once(comparison_id)


@shared_task(ignore_result=True)
def requeue_stale_comparisons() -> int:
    stale = recovery.stale_comparisons()
    for comparison_id in stale:
        log.warning("comparison %s: no worker will finish it; sending it again", comparison_id)
        compute_comparison_task.delay(comparison_id)
    return len(stale)


@worker_ready.connect
def requeue_when_a_worker_starts(sender: Any = None, **kwargs: Any) -> None:
    requeue_stale_comparisons.delay()


@after_task_publish.connect
def mark_comparison_sent(
    sender: str | None = None, headers: dict | None = None, body: Any = None, **kwargs: Any
) -> None:
    """Every message sent for a comparison leaves a marker beside it in the broker."""
    if sender != compute_comparison_task.name:
        return
    if (comparison_id := first_argument(body)) is not None:
        mark_sent(recovery.sent_marker(int(comparison_id)))
