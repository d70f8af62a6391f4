"""How big a request may be: refused before its body is read, so a worker's memory stays bounded.

- An address (path and query) longer than `MAX_REQUEST_LINE_BYTES`: 414. Gunicorn refuses a
  request line over its own `limit_request_line` (4,094 bytes, method and version included)
  with its HTML page before Django sees it; this limit sits below that.
- A body whose `Content-Length` is over the limit of the view it reaches: 413, unread. A view
  names the setting that holds its limit in `max_body_setting` (a class attribute, or an
  attribute of a function view: `@limits.body_limited_by(...)`); every other view takes
  `MAX_BODY_BYTES`.
- A body sent without `Content-Length` (chunked): 411. Django reads a WSGI body only as far as
  `Content-Length` says, so such a body would be read as empty, silently.

A parser that reads the stream itself (trials/live/parsers.py) reads it through `read_capped`, which
stops one byte past the limit whatever the server hands it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import status
from rest_framework.exceptions import APIException

from core import otlp_status

UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "body_too_large"


def body_limit(view_func: Callable) -> int:
    """The most bytes of body the view reads: the setting its `max_body_setting` names, or `MAX_BODY_BYTES`."""
    owner = getattr(view_func, "cls", None) or getattr(view_func, "view_class", None) or view_func
    return int(getattr(settings, getattr(owner, "max_body_setting", "MAX_BODY_BYTES")))


def body_limited_by(setting: str) -> Callable[[Callable], Callable]:
    """A function view's body limit: the setting named (a class-based view sets `max_body_setting`)."""

    def decorator(view: Callable) -> Callable:
        view.max_body_setting = setting  # type: ignore[attr-defined]
        return view

    return decorator


def too_large_message(limit: int) -> str:
    return f"the body is larger than this endpoint reads ({limit:,} bytes): send less in each request"


def read_capped(stream: IO[bytes] | None, limit: int) -> bytes:
    """The whole body, read at most one byte past `limit`: BodyTooLarge (413) when it is longer."""
    if stream is None:
        return b""
    body = stream.read(limit + 1)
    if len(body) > limit:
        raise BodyTooLarge(too_large_message(limit))
    return body


def refuse(request: HttpRequest, code: int, detail: str) -> HttpResponse:
    """The API's JSON error body under /api/, OTLP's Status under /v1/, a short page elsewhere (no template)."""
    if otlp_status.is_otlp(request):
        return otlp_status.status_response(request, code, detail)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=code)
    return HttpResponse(f"{code}: {detail}\n", status=code, content_type="text/plain; charset=utf-8")


class RequestLimitMiddleware:
    """Put it first but SecurityMiddleware: its `process_view` runs before the CSRF check reads a form."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        address = request.META.get("RAW_URI") or request.get_full_path()  # (RAW_URI: as sent, under gunicorn)
        if len(address) > settings.MAX_REQUEST_LINE_BYTES:
            detail = f"the address is {len(address):,} bytes long; at most {settings.MAX_REQUEST_LINE_BYTES:,} are read"
            return refuse(request, status.HTTP_414_REQUEST_URI_TOO_LONG, detail)
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Callable, view_args, view_kwargs) -> HttpResponse | None:
        if request.method not in UNSAFE_METHODS:
            return None
        declared = request.META.get("CONTENT_LENGTH")
        if not declared:
            if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
                return refuse(request, status.HTTP_411_LENGTH_REQUIRED, "send the body with a Content-Length")
            return None
        try:
            length = int(declared)
        except ValueError:
            return refuse(request, status.HTTP_400_BAD_REQUEST, f"Content-Length is not a number: {declared!r}")
        limit = body_limit(view_func)
        if length > limit:
            return refuse(request, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, too_large_message(limit))
        return None
