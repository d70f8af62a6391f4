"""The OTLP path's work done off the request: a trial's received spans written as its steps, and at
the trace's end the trial read again from all of them (trials/live/traces.py `process`)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from trials import queue
from trials.live import traces
from trials.models import Trial


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,  # (a worker killed mid-way: the message is put back; `process` is idempotent)
    autoretry_for=(ConnectionError, OperationalError, InterfaceError),  # (an outage: later, not never)
    retry_backoff=True,
    max_retries=8,
    ignore_result=True,
)
def process_otlp_spans_task(trial_pk: str) -> None:
    traces.process(int(trial_pk))


def process_later(trial: Trial) -> None:
    """The trial's pending spans written off the request (`traces.process`): a Celery task with a broker,
    else the embedded worker's thread (trials/queue.py), in its turn. A broker that takes no message
    raises: the request answers 503 and the exporter sends the batch again, which asks again."""
    if settings.IMPORTS_IN_THREAD:
        queue.embedded_worker().submit(queue.run_in_embedded_worker, process_otlp_spans_task, str(trial.pk))
    else:
        process_otlp_spans_task.delay(str(trial.pk))  # (eager without a broker: run here)
