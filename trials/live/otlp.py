"""`POST /v1/traces`: OTLP/HTTP (protobuf or JSON) from a runner's OpenTelemetry exporter, as live trials.

The spans are read by the importer's pure parser (trials/ingest/formats/otlp.py) and written by the
live service's own entry points (`start_trial`, `add_items`, the reward and completion events): the
same stages as every other live write. The answer is OTLP's ExportTraceServiceResponse, in the
request's encoding; spans refused (no trace, a step the service refuses, a trial another account
started) are counted in `partial_success` and named in its message, the others kept.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from typing import Any

import orjson
from django.conf import settings
from django.db import transaction
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.views import APIView

from core import limits, roles
from trials.ingest.formats import otlp
from trials.live import service
from trials.models import ReceivedSpan, Trajectory, Trial

PROTOBUF = "application/x-protobuf"
WHERE = "POST /v1/traces"


class _RawBody(BaseParser):
    """The body as bytes, read no further than the view's limit (gzip inflated no further either)."""

    def parse(self, stream, media_type=None, parser_context=None):
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
    max_body_setting = "OTLP_MAX_BODY_BYTES"
    parser_classes = [ProtobufBody, JSONBody]

    @extend_schema(
        operation_id="otlp_traces_export",
        request={PROTOBUF: bytes, "application/json": {"type": "object"}},
        responses={
            200: OpenApiResponse(description="ExportTraceServiceResponse; partial_success names refused spans"),
            400: OpenApiResponse(description="a body that is no ExportTraceServiceRequest (an OTLP Status)"),
            413: OpenApiResponse(description="the body is over OTLP_MAX_BODY_BYTES: nothing of it was read"),
        },
    )
    def post(self, request):
        as_protobuf = request.content_type.split(";")[0].strip() == PROTOBUF
        try:
            body = request.data
            data = otlp.decode_protobuf(body) if as_protobuf else orjson.loads(body)
        except ParseError as exc:
            return _status(400, f"{WHERE}: {exc.detail}", as_protobuf)
        except ValueError as exc:  # (orjson's JSONDecodeError is one)
            return _status(400, f"{WHERE}: {exc}", as_protobuf)
        if not isinstance(data, dict):
            return _status(400, f"{WHERE}: the body must be an ExportTraceServiceRequest object", as_protobuf)
        spans, problems = otlp.read_spans(data, WHERE)
        rejected, messages = len(problems), [p.message for p in problems]
        for trial_id, members in otlp.spans_by_trial(spans).items():
            count, why = record(trial_id, members, request.user)
            rejected, messages = rejected + count, messages + why
        return _answer(rejected, messages, as_protobuf)


def record(trial_id: str, spans: list[otlp.Span], user: Any) -> tuple[int, list[str]]:
    """One trial's spans into its live trial, through the live service; (spans refused, why).

    A span stored before (the exporter sent its batch again, not having heard back) is skipped.
    When the top agent span arrives (the trial is over), a trial some of whose spans were written
    under the wrong agent (`_rewritten_if_misplaced`) has its steps written again from all of them.
    """
    trace = otlp.trace_trial(trial_id, spans)
    spine: dict[str, Any] = {"benchmark": trace.benchmark, "agent": trace.agent}
    if trace.attempt is not None:
        spine["attempt"] = trace.attempt
    trial, _ = service.start_trial(spine, started_by=user)
    if not trial.writable_by(user):
        return trace.span_count, [f"trial {trace.trial_id!r} was started by another account: its spans refused"]
    with transaction.atomic():
        trial = Trial.objects.select_for_update().get(pk=trial.pk)  # (a retry may come while the first is written)
        new = _not_received(trial, spans)
        if not new:
            return 0, []
        trace = otlp.trace_trial(trial_id, new)
        ReceivedSpan.objects.bulk_create(
            ReceivedSpan(trial=trial, trace_id=s.trace_id, span_id=s.span_id, span=vars(s), lane=trace.lanes[s.span_id])
            for s in new
        )
        refused = _write_steps(trial, trace)
        if trace.finished is not None:
            refused = _rewritten_if_misplaced(trial, trial_id) or refused
            trial.refresh_from_db()
            events = []
            if trace.reward is not None:
                events.append(service.reward_event(trial, {"reward": trace.reward}))
            failed = trace.finished.failed
            reason = {"reason": str(trace.finished.status.get("message") or "")} if failed else {}
            events.append(service.completion_event(trial, {"status": "failed" if failed else "completed", **reason}))
            service.add_items(trial, events, [])
    return len(refused), refused


def _write_steps(trial: Trial, trace: otlp.TraceTrial) -> list[str]:
    """The trace's steps after those each trajectory holds (batches arrive in order); the refused, named."""
    refused = []
    for n, document in enumerate(trace.trajectories):
        steps = document["steps"]
        if not steps and not (n == 0 and trial.trajectories.filter(path=service.TRAJECTORY_PATH).exists()):
            continue  # (no trajectory is made without steps; the main one's agent may be named below)
        trajectory = service.live_trajectory(trial) if n == 0 else _subagent(trial, document)
        service.name_agent(trajectory, document["agent"])
        for number, step in enumerate(steps, start=trajectory.step_count + 1):
            step["step_id"] = number
        accepted = service.add_items(trial, [], steps, trajectory=trajectory)
        refused += [f"{_span_of(steps, e)}: {e['error']}" for e in accepted.errors]
    return refused


def _not_received(trial: Trial, spans: list[otlp.Span]) -> list[otlp.Span]:
    """The spans this trial has not stored before (the caller records them, in its transaction)."""
    ids = {(s.trace_id, s.span_id) for s in spans}
    held = ReceivedSpan.objects.filter(trial=trial, span_id__in=[span_id for _, span_id in ids])
    seen = set(held.values_list("trace_id", "span_id"))
    new = []
    for span in spans:  # (a span twice in one body counts once too)
        if (span.trace_id, span.span_id) not in seen:
            seen.add((span.trace_id, span.span_id))
            new.append(span)
    return new


def _rewritten_if_misplaced(trial: Trial, trial_id: str) -> list[str] | None:
    """A span is sent once it has ended, so a long subagent's spans may come in a batch before its own
    agent span: they were written as the main agent's. Read with all the trial's spans, if any span's
    agent differs from the one it was written under, every step is written again, as an import of
    the whole trace would write it; the refused, named (None: nothing was misplaced)."""
    received = list(ReceivedSpan.objects.filter(trial=trial).order_by("pk").values_list("span", "lane"))
    whole = otlp.trace_trial(trial_id, [otlp.Span(**span) for span, _ in received])
    if all(whole.lanes[span["span_id"]] == lane for span, lane in received):
        return None
    service.drop_sent_steps(trial)
    moved: dict[str, list[str]] = defaultdict(list)
    for span, lane in received:
        if whole.lanes[span["span_id"]] != lane:
            moved[whole.lanes[span["span_id"]]].append(span["span_id"])
    for lane, span_ids in moved.items():
        for start in range(0, len(span_ids), 1000):
            ReceivedSpan.objects.filter(trial=trial, span_id__in=span_ids[start : start + 1000]).update(lane=lane)
    return _write_steps(trial, whole)


def _subagent(trial: Trial, document: dict[str, Any]) -> Trajectory:
    """The trajectory of an agent span under the top one that came in the same body as its spans.

    (A span is sent once it has ended, so the spans of a subagent sent in an earlier batch than its
    own agent span, a long subagent's, were read as the main agent's: their parent was not known.)
    """
    return service.subagent_trajectory(trial, document["trajectory_id"], document["agent"])


def _span_of(steps: list[dict[str, Any]], error: dict[str, str]) -> str:
    index = int(error["path"].removeprefix("steps[").rstrip("]"))
    otel = steps[index].get("extra", {}).get("otel", {})
    return f"span {otel.get('span_id', '?')} {otel.get('name', '')!r}"


def _answer(rejected: int, messages: list[str], as_protobuf: bool) -> HttpResponse:
    answer = ExportTraceServiceResponse()
    if rejected:
        answer.partial_success.rejected_spans = rejected
        answer.partial_success.error_message = "; ".join(messages)[: settings.OTLP_MAX_ERROR_CHARS]
    if as_protobuf:
        return HttpResponse(answer.SerializeToString(), content_type=PROTOBUF)
    return HttpResponse(orjson.dumps(MessageToDict(answer)), content_type="application/json")


def _status(code: int, message: str, as_protobuf: bool) -> HttpResponse:
    """OTLP's error body: a google.rpc.Status (its message alone), in the request's encoding."""
    if as_protobuf:  # (Status's field 2 is its message: written by hand, the proto is not in the package)
        encoded = message.encode()
        return HttpResponse(b"\x12" + _varint(len(encoded)) + encoded, status=code, content_type=PROTOBUF)
    return HttpResponse(orjson.dumps({"code": 3, "message": message}), status=code, content_type="application/json")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
