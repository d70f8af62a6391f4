"""What the site answers when a request fails on the server: the API's documented JSON error
body, a page for people; 503 with Retry-After when the database or the task broker is
unreachable (an outage, not a bug), 500 otherwise. Django calls `server_error` for every
uncaught exception, in a view or in a middleware (a session read during a database outage).

Retry-After follows the outage: an outage that has lasted t seconds so far is guessed to last
about t more (a 0.5 s database restart: 1 s; one of two minutes: 60 s at most)."""

from __future__ import annotations

import math
import sys
import threading
import time

import redis
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from kombu.exceptions import OperationalError as BrokerError

from core import otlp_status

RETRY_AFTER_MIN_SECONDS, RETRY_AFTER_MAX_SECONDS = 1, 60
# A failure later than this past the last Retry-After advised starts a new outage (clients came back and got in).
OUTAGE_GAP_SECONDS = 5.0
UNREACHABLE = (OperationalError, InterfaceError, BrokerError, redis.ConnectionError)


class Outage:
    """How long a service has been unreachable, as this process has seen it: its first and latest failure."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = self.last = -math.inf
        self.advised = 0

    def retry_after(self) -> int:
        """Seconds to advise now: the outage's length so far, between the bounds; records this failure."""
        with self.lock:
            now = time.monotonic()
            if now - self.last > self.advised + OUTAGE_GAP_SECONDS:
                self.started = now
            self.last = now
            self.advised = max(RETRY_AFTER_MIN_SECONDS, min(RETRY_AFTER_MAX_SECONDS, math.ceil(now - self.started)))
            return self.advised


DATABASE_OUTAGE, BROKER_OUTAGE = Outage(), Outage()


def retry_after(*, broker: bool) -> str:
    """The Retry-After header's value for a failure to reach the task broker, or the database."""
    return str((BROKER_OUTAGE if broker else DATABASE_OUTAGE).retry_after())


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: it touches no database and renders no context processor (they may need one)."""
    failure = sys.exc_info()[1]
    unreachable = isinstance(failure, UNREACHABLE)
    status = 503 if unreachable else 500
    detail = (
        "a service this server needs (the database or the task broker) is unreachable: try again shortly"
        if unreachable
        else "the server failed to answer this request"
    )
    headers = {}
    if unreachable:
        headers["Retry-After"] = retry_after(broker=isinstance(failure, BrokerError | redis.ConnectionError))
    if otlp_status.is_otlp(request):  # (an OpenTelemetry exporter: its Status, and it retries a 503)
        return otlp_status.status_response(request, status, detail, headers)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=status, headers=headers)
    page = loader.get_template("500.html").render({"detail": detail, "status": status})
    return HttpResponse(page, status=status, headers=headers)
