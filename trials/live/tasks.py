"""The OTLP path's work done off the request: a trial's received spans written as its steps, and at
the trace's end the trial read again from all of them (trials/live/traces.py `process`)."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from trials.live import traces


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
