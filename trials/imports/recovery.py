"""TODO docstring."""

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
