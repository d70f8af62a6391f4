"""What the site answers when a request fails on the server: the API's documented JSON error
body, a page for people; 503 with Retry-After when the database or the task broker is
unreachable (an outage, not a bug), 500 otherwise. Django calls `server_error` for every
uncaught exception, in a view or in a middleware (a session read during a database outage)."""

from __future__ import annotations

import sys

import redis
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from kombu.exceptions import OperationalError as BrokerError

RETRY_AFTER_SECONDS = 30
UNREACHABLE = (OperationalError, InterfaceError, BrokerError, redis.ConnectionError)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: it touches no database and renders no context processor (they may need one)."""
    unreachable = isinstance(sys.exc_info()[1], UNREACHABLE)
    status = 503 if unreachable else 500
    detail = (
        "a service this server needs (the database or the task broker) is unreachable: try again shortly"
        if unreachable
        else "the server failed to answer this request"
    )
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if unreachable else {}
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=status, headers=headers)
    page = loader.get_template("500.html").render({"detail": detail, "status": status})
    return HttpResponse(page, status=status, headers=headers)
