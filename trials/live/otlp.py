"""`POST /v1/traces`: OTLP/HTTP (protobuf or JSON) from a runner's OpenTelemetry exporter, as live trials.

The request reads of the body what its answer needs (trials/live/batches.py `outline`: ids, names,
trial ids) and keeps it whole, one row: on PostgreSQL by the one statement that also sees that none
of its trials has ended or is another account's (`accept_if_clear`), else after looking at them
(traces.screened). Off the request it is read by the importer's pure parser
(trials/ingest/formats/otlp.py), its spans kept by trials/live/traces.py and written through the live
service's own entry points (`start_trial`, `add_items`, the reward and completion events): the same
stages as every other live write. The answer is OTLP's ExportTraceServiceResponse, in the request's
encoding, once the body is kept; spans refused (no trace, a trial another account started) are
counted in `partial_success` and named in its message, the others kept. A body with new spans for
a trial that has ended is refused whole (409).
Every error is an OTLP Status (core/otlp_status.py): the view's own, DRF's (401, 403, 413, 415) and
the server's (a 503 in an outage, core/errors.py).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import IO, Any, cast

import orjson
from django.conf import settings
from django.db import connection
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.views import APIView

from core import limits, roles
from core.otlp_status import PROTOBUF, status_response
from trials.ingest.formats import otlp
from trials.live import batches, tasks, traces

WHERE = "POST /v1/traces"


class _RawBody(BaseParser):
    """The body as bytes, read no further than the view's limit (gzip inflated no further either)."""

    def parse(  # type: ignore[override]  # the raw body: the view decodes protobuf or JSON itself
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> bytes:
        context = parser_context or {}
        limit = limits.body_limit(context["view"])
        body = limits.read_capped(stream, limit)
        if context["request"].META.get("HTTP_CONTENT_ENCODING", "").lower() == "gzip":
            inflater = zlib.decompressobj(wbits=31)
            try:
                body = inflater.decompress(body, limit + 1)
            except zlib.error as exc:
                raise ParseError(f"the gzip body does not inflate: {exc}") from exc
            if len(body) > limit or inflater.unconsumed_tail:
                raise limits.BodyTooLarge(limits.too_large_message(limit))
        return body


class ProtobufBody(_RawBody):
    media_type = PROTOBUF


class JSONBody(_RawBody):
    media_type = "application/json"


class Traces(APIView):
    """OTLP/HTTP traces: a runner's exporter with `Authorization: Token <token>` (the `run` right)."""

    required_right = roles.RUN
    # (the default classes, the token's answer kept a few seconds: OTLP_TOKEN_CACHE_SECONDS)
    authentication_classes = [roles.CachedTokenAuthentication, BasicAuthentication, SessionAuthentication]
    max_body_setting = "OTLP_MAX_BODY_BYTES"
    parser_classes = [ProtobufBody, JSONBody]

    @extend_schema(
        operation_id="otlp_traces_export",
        request={PROTOBUF: bytes, "application/json": {"type": "object"}},
        responses={
            200: OpenApiResponse(description="ExportTraceServiceResponse; partial_success names refused spans"),
            400: OpenApiResponse(description="a body that is no ExportTraceServiceRequest (an OTLP Status)"),
            409: OpenApiResponse(
                description="new spans for a trial that has ended: the body refused whole, "
                "nothing stored (an OTLP Status naming the trial and its state)"
            ),
            413: OpenApiResponse(
                description="the body is over OTLP_MAX_BODY_BYTES (nothing of it read) or holds more spans than "
                "OTLP_MAX_SPANS_PER_REQUEST (nothing of it stored)"
            ),
        },
    )
    def post(self, request: Request) -> HttpResponse:
        as_protobuf = request.content_type.split(";")[0].strip() == PROTOBUF
        try:
            body = cast(bytes, request.data)  # _RawBody's bytes
            data = batches.outline(body) if as_protobuf else orjson.loads(body)
        except ParseError as exc:
            return status_response(request, 400, f"{WHERE}: {exc.detail}")
        except ValueError as exc:  # (orjson's JSONDecodeError is one)
            return status_response(request, 400, f"{WHERE}: {exc}")
        if not isinstance(data, dict):
            return status_response(request, 400, f"{WHERE}: the body must be an ExportTraceServiceRequest object")
        spans, problems = otlp.read_spans(data, WHERE)
        if (count := len(spans) + len(problems)) > settings.OTLP_MAX_SPANS_PER_REQUEST:
            limit = settings.OTLP_MAX_SPANS_PER_REQUEST
            message = (
                f"{WHERE}: {count} spans in one body, over the limit of {limit} (OTLP_MAX_SPANS_PER_REQUEST): "
                "send smaller batches (an SDK's BatchSpanProcessor sends 512); no span of this body was stored"
            )
            return status_response(request, 413, message)
        by_trial = otlp.spans_by_trial(spans)
        refused: traces.Refusals = []
        kept = batches.accept_if_clear(body, as_protobuf, request.user, list(by_trial)) if spans else None
        if kept is None:  # (a trial of the body may have ended, or be another account's: looked at first)
            ended, refused = traces.screened(by_trial, request.user)
            if ended:
                return status_response(request, 409, f"{WHERE}: {'; '.join(ended)}; no span of this body was stored")
            if len(refused) < len(spans):  # (the body kept whole; its spans read off the request)
                kept = batches.accept(body, as_protobuf, request.user, list(by_trial)), False
        if kept is not None:
            tasks.read_later(*kept)
        messages = [p.message for p in problems] + sorted({why for _, why in refused})  # (a trial's why once)
        return _answer(len(problems) + len(refused), messages, as_protobuf)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # A kept connection is not checked first (one SELECT 1, a round trip a batch): after a database restart
        # its batch answers 503, which an exporter sends again, and Django closes the broken connection after.
        connection.health_check_done = True  # type: ignore[attr-defined]  # (Django's flag: "checked this request")
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]  # an OTLP Status
        """DRF's refusals of this view (401, 403, 413, 415, a body that does not parse) as OTLP Statuses;
        what is no refusal is raised on, to the server's own answer (core/errors.py: a Status too)."""
        response = super().handle_exception(exc)
        detail = getattr(exc, "detail", "") or response.data
        kept = {name: response[name] for name in ("WWW-Authenticate", "Retry-After") if response.has_header(name)}
        return status_response(self.request, response.status_code, f"{WHERE}: {detail}", kept)


def _answer(rejected: int, messages: list[str], as_protobuf: bool) -> HttpResponse:
    answer = ExportTraceServiceResponse()
    if rejected:
        answer.partial_success.rejected_spans = rejected
        answer.partial_success.error_message = "; ".join(messages)[: settings.OTLP_MAX_ERROR_CHARS]
    if as_protobuf:
        return HttpResponse(answer.SerializeToString(), content_type=PROTOBUF)
    return HttpResponse(orjson.dumps(MessageToDict(answer)), content_type="application/json")
