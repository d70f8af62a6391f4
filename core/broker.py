"""Markers beside the broker's messages: "a message for this work is waiting".

Every message sent for an import or a comparison leaves a marker key next to it in the
broker's Redis, and the task deletes it when it starts. Work queued for a while with no
marker lost its message (Redis restarted without persistence, or was down when it was
sent): the recovery sweeps send it again. The marker lives and dies with the messages it
stands for. Without a Redis broker (the embedded default) there are no markers.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery import current_app
from django.conf import settings
from django.utils import timezone

log = logging.getLogger(__name__)

PREFIX = "benchviewer:"

_clients: dict[str, redis.Redis] = {}


def broker_redis() -> redis.Redis | None:
    """A client for the broker's Redis, or None when the broker is not Redis (eager mode)."""
    url = current_app.conf.broker_url
    if not isinstance(url, str) or url.split("://", 1)[0] not in ("redis", "rediss"):
        return None
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    return _clients[url]


def first_argument(body: Any) -> Any:
    """The first argument of a task message's body as `after_task_publish` gets it, or None.
    (Task protocol 2: the body is (args, kwargs, embed).)"""
    args = task_arguments(body)
    return args[0] if args else None


def task_arguments(body: Any) -> tuple:
    """The positional arguments of a task message's body as `after_task_publish` gets it."""
    args = body[0] if isinstance(body, (list, tuple)) and body else ()
    return tuple(args) if isinstance(args, (list, tuple)) else ()


def mark_unless_waiting(marker: str, seconds: int) -> bool:
    """The marker set unless it is already (one Redis SET NX): True when this call set it, so the caller
    sends the message; False when a message for the work is waiting. True without a Redis broker, or when
    Redis does not answer (the message is sent, or fails to be, as without a marker)."""
    client = broker_redis()
    if client is None:
        return True
    try:
        return bool(client.set(PREFIX + marker, timezone.now().isoformat(), nx=True, ex=seconds))
    except redis.RedisError as exc:
        log.warning("could not mark %s: %s", marker, exc)
        return True


def mark_sent(marker: str) -> None:
    client = broker_redis()
    if client is None:
        return
    try:
        client.set(PREFIX + marker, timezone.now().isoformat(), ex=settings.IMPORT_SENT_MARKER_TTL)
    except redis.RedisError as exc:  # at worst the work is sent once more later: harmless
        log.warning("could not mark %s: %s", marker, exc)


def clear_sent(marker: str) -> None:
    client = broker_redis()
    if client is None:
        return
    try:
        client.delete(PREFIX + marker)
    except redis.RedisError as exc:  # the worker lock covers the work from here on
        log.warning("could not clear %s: %s", marker, exc)


def waiting_in_broker(marker: str) -> bool:
    """Whether a message for the marked work is waiting in the broker (False when unknowable)."""
    client = broker_redis()
    return client is not None and bool(client.exists(PREFIX + marker))
