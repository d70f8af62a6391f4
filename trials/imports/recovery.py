"""Finding imports that no worker is going to finish, and sending them again.

An import can be stranded two ways:

- **queued, but its message is gone**: Redis lost its data (restarted without persistence,
  failed over) or was down when the import was sent. Every message sent for an import
  leaves a marker key next to it in the broker's Redis, and the task deletes the marker
  when it starts. Queued for longer than `IMPORT_QUEUED_GRACE` with no marker means the
  message is gone: the marker lives and dies with the messages it stands for.
- **running, but its worker is gone**: SIGKILL, out of memory, a lost machine. A running
  import holds a PostgreSQL advisory lock, on a connection of its own, for as long as its
  worker lives; PostgreSQL releases it when that connection closes, however the worker
  died. Running with the lock free means nobody is working on it. SQLite has no such
  lock, and its workers share one machine, so there the lock is an exclusive `flock` on a
  file in `IMPORT_LOCK_DIR`, which the kernel releases when its process ends.

`trials.tasks.resend_stale_imports` sends both kinds again. It runs every
`IMPORT_RECOVERY_INTERVAL` seconds from Celery beat and from `manage.py requeue_imports`. Sending an import twice is
safe: the task skips a finished import and one that another worker holds, and the import
itself keys packs by content and trials by natural key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

import redis
from django.conf import settings
from django.utils import timezone

from benchviewer.celery import app
from trials.imports.locks import unheld
from trials.models import Import

log = logging.getLogger(__name__)


FINISHED = (Import.Status.DONE, Import.Status.FAILED)


MARKER_PREFIX = "benchviewer:import-sent:"


_clients: dict[str, redis.Redis] = {}


def broker_redis() -> redis.Redis | None:
    """A client for the broker's Redis, or None when the broker is not Redis (eager mode)."""
    url = app.conf.broker_url
    if not isinstance(url, str) or url.split("://", 1)[0] not in ("redis", "rediss"):
        return None
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    return _clients[url]


def mark_sent(import_id: str) -> None:
    client = broker_redis()
    if client is None:
        return
    try:
        client.set(MARKER_PREFIX + import_id, timezone.now().isoformat(), ex=settings.IMPORT_SENT_MARKER_TTL)
    except redis.RedisError as exc:  # at worst the import is sent once more later: harmless
        log.warning("could not mark import %s as sent: %s", import_id, exc)


def clear_sent(import_id: str) -> None:
    client = broker_redis()
    if client is None:
        return
    try:
        client.delete(MARKER_PREFIX + import_id)
    except redis.RedisError as exc:  # the lock covers the import from here on
        log.warning("could not clear the sent marker of import %s: %s", import_id, exc)


def waiting_in_broker(import_id: str) -> bool:
    """Whether a message for the import is waiting in the broker (False when unknowable)."""
    client = broker_redis()
    return client is not None and bool(client.exists(MARKER_PREFIX + import_id))


@dataclass(frozen=True)
class Requeued:
    import_id: str
    reason: str


def stale_imports() -> list[Requeued]:
    """Queued imports whose message is gone and running imports whose worker is gone."""
    now = timezone.now()
    stale = []
    queued = Import.objects.filter(
        status=Import.Status.QUEUED, created_at__lt=now - timedelta(seconds=settings.IMPORT_QUEUED_GRACE)
    )
    for import_id in queued.values_list("pk", flat=True):
        if not waiting_in_broker(str(import_id)):
            stale.append(Requeued(str(import_id), "queued, but no message for it is waiting in the broker"))
    running = [str(pk) for pk in Import.objects.filter(status=Import.Status.RUNNING).values_list("pk", flat=True)]
    stale.extend(Requeued(import_id, "running, but no worker holds it") for import_id in unheld(running))
    return stale
