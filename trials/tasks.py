"""Celery tasks: run an import, index its step text, send stranded imports again
(trials/imports/recovery.py), sweep what killed imports left in the blob storage.

Delivery is at least once: a message is acknowledged only after its import ran
(`acks_late`), a message whose pool process died is put back (`reject_on_worker_lost`),
and `requeue_stale_imports` (every minute under beat, and whenever a worker starts)
re-sends imports whose message or worker was lost. So a message may arrive twice, or for
an import already finished; the task makes that a no-op, and the import itself is
idempotent (packs by content, trials by key).
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import after_task_publish, worker_ready
from django.db import InterfaceError, OperationalError

from core.broker import clear_sent, first_argument, mark_sent
from core.locks import worker_lock
from trials import search
from trials.imports import blobs, recovery, service
from trials.models import Import

log = logging.getLogger(__name__)

# How long a task waits for the import's lock before deciding another worker has it.
LOCK_WAIT_SECONDS = 5.0


def import_status(import_id: str) -> str | None:
    return Import.objects.filter(pk=import_id).values_list("status", flat=True).first()


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    # The database unreachable at the start: try again later rather than drop the import.
    autoretry_for=(ConnectionError, OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def import_pack_task(import_id: str) -> None:
    clear_sent(recovery.sent_marker(import_id))  # from here on the import's lock says a worker is on it
    if import_status(import_id) in (None, *recovery.FINISHED):
        return  # a duplicate or late message: the import is finished (or was deleted)
    with worker_lock(import_id, wait=LOCK_WAIT_SECONDS) as held:
        if not held:
            log.info("import %s is running in another worker; this message is a duplicate", import_id)
            return
        if import_status(import_id) in recovery.FINISHED:
            return  # finished by the worker that held the lock a moment ago
        service.remove_spool_leftovers(import_id)
        service.run_import(import_id, still_ours=held.regain)
    index_step_text_task.delay()


# Trials one indexing run takes on; then it queues itself again, behind whatever waits.
INDEX_TRIALS_PER_RUN = 1000


@shared_task(ignore_result=True)
def index_step_text_task() -> int:
    """Put the steps of newly imported trials into the search index (after the import, not in it)."""
    done = search.index_pending(max_trials=INDEX_TRIALS_PER_RUN)
    if done == INDEX_TRIALS_PER_RUN:  # more may be waiting: a comparison queued meanwhile goes first
        index_step_text_task.delay()
    return done


@shared_task(ignore_result=True)
def requeue_stale_imports() -> int:
    return len(resend_stale_imports())


def resend_stale_imports(dry_run: bool = False) -> list[recovery.Requeued]:
    """Send again the imports no worker is going to finish (beat's sweep, `manage.py requeue_imports`)."""
    stale = recovery.stale_imports()
    for item in stale:
        log.warning("import %s: %s; sending it again", item.import_id, item.reason)
        if not dry_run:
            import_pack_task.delay(item.import_id)
    return stale


@shared_task(ignore_result=True)
def sweep_storage_task() -> int:
    return len(blobs.sweep_storage())


@worker_ready.connect
def sweep_when_a_worker_starts(sender=None, **kwargs) -> None:
    """A worker that starts picks up what a dead one left running, whether or not beat runs."""
    requeue_stale_imports.delay()


@after_task_publish.connect
def mark_import_sent(sender: str | None = None, headers: dict | None = None, body=None, **kwargs) -> None:
    """Every message sent for an import leaves a marker beside it in the broker (recovery.py)."""
    if sender != import_pack_task.name:
        return
    if (import_id := first_argument(body)) is not None:
        mark_sent(recovery.sent_marker(str(import_id)))
