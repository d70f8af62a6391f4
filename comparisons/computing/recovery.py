"""Comparisons no worker is going to finish, found and sent again, as imports are
(trials/imports/recovery.py).

A comparison can be stranded two ways: queued, but its message is gone (the broker was
down when it was sent, or lost its data), or running, but its worker died. Every message
sent for one leaves a marker in the broker (core/broker.py), and a running one holds
its worker lock (core/locks.py). `stale_comparisons` finds both kinds; the sweep
(comparisons.tasks.requeue_stale_comparisons, from beat and when a worker starts) and the
next request for the comparison send them again. A message that arrives twice, or for a
comparison already done, is a no-op (`run_once`).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from comparisons.computing.cache import run_comparison
from comparisons.models import Comparison
from core.broker import broker_redis, clear_sent, waiting_in_broker
from core.locks import unheld, worker_lock

PENDING = (Comparison.Status.QUEUED, Comparison.Status.RUNNING)
LOCK_WAIT_SECONDS = 5.0  # a redelivered message may come a moment before the dead holder's lock is freed


def sent_marker(comparison_id: int) -> str:
    return f"comparison-sent:{comparison_id}"


def lock_name(comparison_id: int) -> str:
    return f"comparison-{comparison_id}"


def run_once(comparison_id: int) -> None:
    """Compute the comparison unless another worker is on it or it is no longer pending."""
    clear_sent(sent_marker(comparison_id))  # from here on the lock says a worker is on it
    with worker_lock(lock_name(comparison_id), wait=LOCK_WAIT_SECONDS) as held:
        if not held:
            return  # a duplicate message: another worker is computing it
        status = Comparison.objects.filter(pk=comparison_id).values_list("status", flat=True).first()
        if status in PENDING:
            run_comparison(comparison_id)


def on_its_way(comparison: Comparison) -> bool:
    """Whether a worker will finish this pending comparison: its message waits, or a live worker holds it.
    (Without markers to read, a broker that is not Redis, it is taken to be.)"""
    if broker_redis() is None or waiting_in_broker(sent_marker(comparison.pk)):
        return True
    return comparison.status == Comparison.Status.RUNNING and not unheld([lock_name(comparison.pk)])


def stale_comparisons() -> list[int]:
    """Queued comparisons whose message is gone, and running ones whose worker is gone."""
    grace = timezone.now() - timedelta(seconds=settings.IMPORT_QUEUED_GRACE)
    queued = Comparison.objects.filter(status=Comparison.Status.QUEUED, updated_at__lt=grace)
    stale = [pk for pk in queued.values_list("pk", flat=True) if not waiting_in_broker(sent_marker(pk))]
    running = list(Comparison.objects.filter(status=Comparison.Status.RUNNING).values_list("pk", flat=True))
    gone = set(unheld([lock_name(pk) for pk in running]))
    return stale + [pk for pk in running if lock_name(pk) in gone]
