"""OTLP/HTTP's error body: every 4xx and 5xx of `/v1/traces` is a `google.rpc.Status`, as protobuf
or as JSON after the request's own Content-Type (the OTLP specification), whichever part of the
server answers it: the view, the body limits (core/limits.py) or a failure (core/errors.py)."""

from __future__ import annotations

import orjson
from django.http import HttpRequest, HttpResponse

PROTOBUF = "application/x-protobuf"
OTLP_PREFIX = "/v1/"
# The gRPC code each HTTP status stands for (OTLP leaves Status.code optional; exporters read the HTTP status).
GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 9, 411: 3, 413: 8, 414: 3, 415: 3, 429: 8, 500: 13, 503: 14}
UNKNOWN = 2


def is_otlp(request: HttpRequest) -> bool:
    return request.path.startswith(OTLP_PREFIX)


def wants_protobuf(request: HttpRequest) -> bool:
    return request.META.get("CONTENT_TYPE", "").split(";")[0].strip().lower() == PROTOBUF


def status_response(
    request: HttpRequest, status: int, message: str, headers: dict[str, str] | None = None
) -> HttpResponse:
    """A Status with `message`, answered with the HTTP `status`, in the request's encoding."""
    code = GRPC_CODES.get(status, UNKNOWN)
    if wants_protobuf(request):  # (fields 1, code, and 2, message: written by hand, the proto is in no dependency)
        text = message.encode()
        body = b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text
        return HttpResponse(body, status=status, content_type=PROTOBUF, headers=headers)
    body = orjson.dumps({"code": code, "message": message})
    return HttpResponse(body, status=status, content_type="application/json", headers=headers)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
