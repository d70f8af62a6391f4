"""The OTLP path's work done off the request: a body `POST /v1/traces` accepted, read and its spans
written as steps (trials/live/batches.py `read`), and the sweep that sends again a batch whose
message or worker was lost (`batches.stale`; beat, and a worker's start)."""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery import shared_task
from celery.signals import after_task_publish, worker_ready
from django.conf import settings
from django.db import connections

from core.broker import broker_redis, clear_sent, mark_sent, mark_unless_waiting, task_arguments
from trials import queue
from trials.live import batches, traces
from trials.models import ReceivedBatch

log = logging.getLogger(__name__)


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,  # (a worker killed mid-way: the message is put back; `read` is idempotent)
    autoretry_for=batches.OUTAGE,  # (an outage: later, not never; the batch is kept meanwhile)
    retry_backoff=True,
    max_retries=8,
    ignore_result=True,
)
def read_otlp_batch_task(batch_pk: int, trial_key: str = "", sent_by: int | None = None) -> None:
    """The batch read, and with a trial every batch of it waiting (batches.read); those still waiting after
    this task's share, in a message of their own."""
    if (rest := batches.read(int(batch_pk), trial_key, sent_by)) is not None:
        send_read(int(batch_pk), *rest)


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=batches.OUTAGE,
    retry_backoff=True,
    max_retries=8,
    ignore_result=True,
)
def process_otlp_spans_task(trial_pk: str) -> None:
    """A trial's pending spans written (what a message sent before batches were kept asks)."""
    traces.process(int(trial_pk))


@shared_task(ignore_result=True)
def requeue_stale_otlp_batches() -> int:
    stale = batches.stale()
    for batch_pk, trial_key, sent_by in stale:
        log.warning("OTLP batch %s: no worker is reading it; sending it again", batch_pk)
        send_read(batch_pk, trial_key, sent_by)  # (one message a trial)
    return len(stale)


def read_later(batch: ReceivedBatch, queued: bool = False) -> None:
    """The batch read off the request: a Celery task with a broker, else the embedded worker's thread
    (trials/queue.py), in its turn, after the batches a previous process of this server left. `queued`:
    another batch of its trial waited before it (batches.accept_if_clear), so with a Redis broker no
    message (the task reading that one reads this one; the sweep, a lost one's). A broker that takes no
    message raises: the request answers 503 and the exporter sends the batch again."""
    if settings.IMPORTS_IN_THREAD:  # (each batch its own call: this thread's only sweep is its first)
        _resume_stranded_batches()
        queue.embedded_worker().submit(queue.run_in_embedded_worker, read_otlp_batch_task, batch.pk)
    elif not (queued and broker_redis() is not None):
        send_read(batch.pk, batch.trial_key, batch.sent_by_id)  # (eager without a broker: run here)


def send_read(batch_pk: int, trial_key: str, sent_by: int | None) -> None:
    """A message to read the batch, and with a trial every batch of it waiting: none when one for the trial
    is waiting already (one Redis SET NX instead of a message a batch), since its task reads this batch too.
    A broker that takes no message raises, the marker taken back (the next batch's request sends one)."""
    marker = batches.trial_marker(trial_key, sent_by) if trial_key else ""
    if marker and not mark_unless_waiting(marker, batches.TRIAL_MARKER_SECONDS):
        return
    try:
        read_otlp_batch_task.delay(batch_pk, trial_key, sent_by)
    except Exception:
        if marker:
            clear_sent(marker)
        raise


@functools.cache
def _resume_stranded_batches() -> None:
    """Once a process: the batches its embedded worker's predecessor left unread, read first."""
    queue.embedded_worker().submit(_read_stranded)


def _read_stranded() -> None:
    try:
        requeue_stale_otlp_batches.delay()  # (eager here: each batch read in this thread)
    except Exception:  # the thread goes on; the next process looks again
        log.exception("the stranded OTLP batches could not be read")
    finally:
        connections.close_all()  # this thread's own connections


@worker_ready.connect
def requeue_when_a_worker_starts(sender: Any = None, **kwargs: Any) -> None:
    requeue_stale_otlp_batches.delay()


@after_task_publish.connect
def mark_batch_sent(sender: str | None = None, headers: dict | None = None, body: Any = None, **kwargs: Any) -> None:
    """Every message sent for a batch leaves a marker beside it in the broker (batches.stale); one naming its
    trial has the trial's (`send_read`)."""
    if sender != read_otlp_batch_task.name:
        return
    args = task_arguments(body)
    if args and not (len(args) > 1 and args[1]):
        mark_sent(batches.sent_marker(int(args[0])))
