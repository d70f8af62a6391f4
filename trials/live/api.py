"""The runner's commands (seed 000's control plane).

Token-authenticated like the rest of the API (`POST /api/token/`); each command needs the
`run` right (the runner group, reviewers and above: core/roles.py), and writes only into
a trial its account started (`Trial.writable_by`: or one granted `trials.write_any_live_trial`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from comparisons import services as comparisons
from comparisons.pair.api import broker_unreachable
from comparisons.statistics.sides import SideError, parse_sides
from core import roles
from core.ids import parse_pk
from trials.live import derive, service
from trials.live.parsers import FastJSONParser, JSONLinesAlias, JSONLinesParser
from trials.models import Trial

SPINE = {
    "benchmark": {
        "datasetId": "lime-internal-agent-runtime-tasks",
        "datasetVersion": "2026-05-frozen",
        "taskId": "tool-approval-sandbox-boundary",
        "trialId": "trial-tool-approval-candidate-1",
        "configurationId": "candidate-feedback-v2",
        "role": "candidate",
        "harborJobRef": "jobs/lime-runtime-candidate-feedback-v2",
        "harborTrialRef": "jobs/lime-runtime-candidate-feedback-v2/trial-tool-approval-candidate-1",
    },
    "runtimeCorrelation": {
        "runtimeId": "lime_runtime_local",
        "sessionId": "sess_123",
        "threadId": "thread_123",
        "turnId": "turn_123",
        "taskId": "task_123",
        "runId": "run_123",
    },
    "refs": {
        "trajectoryRef": "/logs/agent/trajectory.json",
        "rewardDetailsRef": "/logs/verifier/reward-details.json",
        "artifactManifestRef": "/logs/artifacts/manifest.json",
    },
}

TRIAL_ID = inline_serializer("LiveTrialId", {"trial_id": serializers.IntegerField()})
ACCEPTED = inline_serializer(
    "LiveAccepted",
    {
        "events": serializers.IntegerField(help_text="new events stored"),
        "steps": serializers.IntegerField(help_text="new steps stored"),
        "duplicates": serializers.IntegerField(help_text="items sent before (same eventId / step_id), skipped"),
        "errors": serializers.ListField(child=serializers.DictField(), help_text="{path, error} of each bad item"),
        "unplaced": serializers.ListField(
            child=serializers.DictField(),
            help_text="{path, type, why} of each event kept that a derived trajectory would place in no step",
        ),
    },
)
COMMAND_EVENT = inline_serializer(
    "LiveCommandEvent",
    {
        "trial_id": serializers.IntegerField(),
        "status": serializers.CharField(),
        "event": serializers.DictField(),
    },
)


EventMaker = Callable[[Trial, dict[str, Any]], dict[str, Any]]  # trials.live.service.reward_event and the like


def writable(trial: Trial, user: User | AnonymousUser) -> Trial:
    if not trial.writable_by(user):
        raise PermissionDenied(f"trial {trial.pk} was started by another account: only it writes into it")
    return trial


class CommandView(APIView):
    required_right = roles.RUN
    documented_errors = {"404": "No trial has the `trial_id` (or `benchmark.trialId`) the body names."}

    def body(self, request: Request) -> dict[str, Any]:
        data = request.data
        if not isinstance(data, dict):
            raise ValidationError({"detail": "the body must be a JSON object"})
        return data

    def trial(self, data: dict[str, Any]) -> Trial:
        """The trial the body names: `trial_id` (Benchviewer's id) or `benchmark.trialId` (the runner's)."""
        if data.get("trial_id") is not None:
            pk = parse_pk(str(data["trial_id"]))
            if pk is None:
                raise ValidationError({"trial_id": [f"a whole number, not {data['trial_id']!r}"]})
            return writable(get_object_or_404(Trial, pk=pk), self.request.user)
        bench = data.get("benchmark")
        trial_id = bench.get("trialId") if isinstance(bench, dict) else None
        if not trial_id:
            raise ValidationError({"trial_id": ["name the trial: trial_id, or benchmark.trialId as started"]})
        return writable(get_object_or_404(Trial, key=f"lime:{trial_id}"), self.request.user)

    def record_event(self, request: Request, make_event: EventMaker, field: str) -> Response:
        """The trial the body names gets the event `make_event` builds from the body; a bad body is a 400 on `field`."""
        data = self.body(request)
        trial = self.trial(data)
        try:
            event = make_event(trial, data)
        except service.SpineError as exc:
            raise ValidationError({field: [str(exc)]}) from exc
        return self.record(trial, event)

    def record(self, trial: Trial, event: dict[str, Any]) -> Response:
        try:
            accepted = service.add_items(trial, [event], [])
        except service.Refused as exc:  # (the event is built here: it names no redaction)
            raise ValidationError({"errors": exc.errors}) from exc
        if accepted.errors:  # (the event is built here: a bad one is ours)
            raise ValidationError({"errors": accepted.errors})
        trial.refresh_from_db(fields=["status"])
        return Response({"trial_id": trial.pk, "status": trial.status, "event": event})


class StartTrial(CommandView):
    """Start (or find again) the trial the spine's `benchmark.trialId` names; it shows as running."""

    documented_errors: dict[str, str] = {}  # (it creates the trial it does not find)

    @extend_schema(
        operation_id="commands_start_benchmark_trial",
        request=inline_serializer(
            "StartBenchmarkTrial",
            {
                "benchmark": serializers.DictField(
                    help_text="datasetId, taskId, trialId (required), configurationId, role, harborJobRef…"
                ),
                "runtimeCorrelation": serializers.DictField(required=False),
                "refs": serializers.DictField(required=False),
                "attempt": serializers.IntegerField(required=False),
                "timeoutSec": serializers.IntegerField(required=False),
                "sandbox": serializers.DictField(required=False),
                "agent": serializers.DictField(required=False, help_text="name, version, model_name"),
            },
        ),
        responses={201: TRIAL_ID, 200: OpenApiResponse(TRIAL_ID, description="started before: the same trial")},
        examples=[
            OpenApiExample(
                "the seed's spine",
                value={
                    **SPINE,
                    "attempt": 1,
                    "timeoutSec": 300,
                    "agent": {"name": "lime", "version": "0.4.0", "model_name": "gpt-5"},
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        try:
            trial, created = service.start_trial(self.body(request), started_by=request.user)
        except service.SpineError as exc:
            raise ValidationError({"benchmark.trialId": [str(exc)]}) from exc
        writable(trial, request.user)  # started before, by another account: its id is not told
        return Response({"trial_id": trial.pk}, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TrialEvents(APIView):
    """Runtime events and ATIF steps of a live trial, as they happen: `{"events": [...], "steps": [...]}`
    (either key) or a JSON-lines body of events. Idempotent by `eventId` and `step_id`; kept in
    `sequence` / `step_id` order whatever the order they arrive in. A bad item: 400 naming it
    (`events[3]`, `steps[0]`, `line 7`), and every good one is kept; but a redaction naming no item
    (400) or steps for a finished trial (409) refuse the whole POST, nothing of it stored."""

    required_right = roles.RUN
    max_body_setting = "LIVE_MAX_BODY_BYTES"
    parser_classes = [FastJSONParser, JSONLinesParser, JSONLinesAlias]

    @extend_schema(
        operation_id="trials_events_create",
        request=inline_serializer(
            "LiveEvents",
            {
                "events": serializers.ListField(child=serializers.DictField(), required=False),
                "steps": serializers.ListField(child=serializers.DictField(), required=False),
            },
        ),
        responses={
            200: ACCEPTED,
            400: OpenApiResponse(
                ACCEPTED,
                description="bad items, named; the good ones kept (a body it cannot read: path `body`; a redaction "
                "naming no item: none kept)",
            ),
            403: OpenApiResponse(description="your role may not run, or another account started this trial"),
            409: OpenApiResponse(ACCEPTED, description="steps for a trial no longer running: nothing kept"),
            413: OpenApiResponse(description="the body is over LIVE_MAX_BODY_BYTES: nothing of it was read"),
        },
        examples=[
            OpenApiExample(
                "a tool call and its step",
                request_only=True,
                value={
                    "events": [
                        {
                            "type": "tool.started",
                            "eventId": "evt_tool_1",
                            "sequence": 43,
                            "sessionId": "sess_123",
                            "threadId": "thread_123",
                            "turnId": "turn_123",
                            "stepId": "2",
                            "toolCallId": "call_1",
                            "timestamp": "2026-05-17T09:00:05Z",
                            "payload": {"toolName": "read_file", "args": {"path": "README.md"}},
                        }
                    ],
                    "steps": [{"step_id": 1, "source": "user", "message": "Fix the failing test."}],
                },
            )
        ],
    )
    def post(self, request: Request, pk: int) -> Response:
        trial = writable(get_object_or_404(Trial, pk=pk), request.user)
        try:
            data = request.data
        except ParseError as exc:
            return _refused("body", str(exc.detail))
        try:
            return self.accept(trial, data)
        except service.Refused as exc:
            return Response(service.Accepted(errors=exc.errors).as_dict(), status=exc.status)

    def accept(self, trial: Trial, data: Any) -> Response:
        errors: list[dict[str, str]] = []
        if isinstance(data, bytes):  # JSON lines
            events: list[Any] = []
            for number, line in enumerate(data.splitlines(), start=1):
                if not line.strip():
                    events.append(None)  # (so an event's place is its line number)
                    continue
                try:
                    events.append(orjson.loads(line))
                except orjson.JSONDecodeError as exc:
                    errors.append({"path": f"line {number}", "error": f"not JSON: {exc}"})
                    events.append(None)  # (keeps the line numbers; named above, skipped below)
            if (refused := _over_limit(sum(e is not None for e in events))) is not None:
                return refused
            accepted = service.add_items(trial, [e for e in events if e is not None], [], where="line {}")
            if None in events:  # the good lines' places shifted by blank and bad ones: name them from the body
                accepted.errors = errors + _renumbered(accepted.errors, events)
            where = "line {}"
        else:
            if not isinstance(data, dict) or not ({"events", "steps"} & data.keys()):
                return _refused("body", 'send {"events": [...], "steps": [...]} or JSON lines of events')
            events, steps = data.get("events", []), data.get("steps", [])
            for key, value in (("events", events), ("steps", steps)):
                if not isinstance(value, list):
                    return _refused(key, f"a list, not {type(value).__name__}")
            if (refused := _over_limit(len(events) + len(steps))) is not None:
                return refused
            accepted = service.add_items(trial, events, steps)
            where = "events[{}]"
        body = accepted.as_dict()
        body["unplaced"] = _unplaced(events, where)
        return Response(body, status=status.HTTP_400_BAD_REQUEST if accepted.errors else status.HTTP_200_OK)


def _refused(path: str, error: str) -> Response:
    """A body refused whole: the 400 of a bad item's shape, naming `path`; nothing of it is stored."""
    body = service.Accepted(errors=[{"path": path, "error": error}]).as_dict()
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


def _over_limit(count: int) -> Response | None:
    if count <= settings.LIVE_MAX_ITEMS:
        return None
    return _refused("body", f"{count} items in one request; send at most {settings.LIVE_MAX_ITEMS} a request")


def _unplaced(events: list[Any], where: str) -> list[dict[str, str]]:
    """The events a derived trajectory would place in no step, named (`events[3]`, `line 7`), with why."""
    first = 1 if where.startswith("line") else 0  # (lines count from 1)
    return [
        {"path": where.format(place), "type": event["type"], "why": why}
        for place, event in enumerate(events, start=first)
        if not service.event_problem(event) and (why := derive.unplaced(event))
    ]


def _renumbered(errors: list[dict[str, str]], events: list[Any]) -> list[dict[str, str]]:
    """Errors named by place among the parsed lines, named by their line in the body instead."""
    lines = [n for n, e in enumerate(events, start=1) if e is not None]
    return [{**e, "path": f"line {lines[int(e['path'].split()[1]) - 1]}"} for e in errors]


class RecordReward(CommandView):
    """Record the trial's reward: writes `benchmark.reward.recorded` (again: replaces the reward)."""

    @extend_schema(
        operation_id="commands_record_benchmark_reward",
        request=inline_serializer(
            "RecordBenchmarkReward",
            {
                "trial_id": serializers.IntegerField(required=False),
                "benchmark": serializers.DictField(required=False),
                "reward": serializers.JSONField(help_text="a number, or reward keys {name: number}"),
                "rewardDetails": serializers.JSONField(required=False),
                "criteria": serializers.ListField(required=False),
                "verifierStatus": serializers.CharField(required=False),
                "failureCategory": serializers.CharField(required=False),
                "drift": serializers.JSONField(required=False),
                "oracleSanity": serializers.JSONField(required=False),
            },
        ),
        responses={200: COMMAND_EVENT},
        examples=[
            OpenApiExample(
                "a reward",
                request_only=True,
                value={
                    "benchmark": {"trialId": "trial-tool-approval-candidate-1"},
                    "reward": 1,
                    "criteria": [{"name": "approval-denial-facts", "score": 1}],
                    "verifierStatus": "passed",
                    "failureCategory": "none",
                },
            )
        ],
    )
    def post(self, request: Request) -> Response:
        return self.record_event(request, service.reward_event, "reward")


class CompleteTrial(CommandView):
    """Finish the trial: writes `benchmark.trial.completed` or `benchmark.trial.failed`."""

    @extend_schema(
        operation_id="commands_complete_benchmark_trial",
        request=inline_serializer(
            "CompleteBenchmarkTrial",
            {
                "trial_id": serializers.IntegerField(required=False),
                "benchmark": serializers.DictField(required=False),
                "status": serializers.ChoiceField(["completed", "failed"]),
                "failureCategory": serializers.CharField(required=False),
                "reason": serializers.CharField(required=False),
            },
        ),
        responses={200: COMMAND_EVENT},
        examples=[
            OpenApiExample(
                "a failure",
                request_only=True,
                value={
                    "trial_id": 42,
                    "status": "failed",
                    "failureCategory": "tool-result-missing",
                    "reason": "the verifier found no tool result for call_7",
                },
            )
        ],
    )
    def post(self, request: Request) -> Response:
        return self.record_event(request, service.completion_event, "status")


class CompareRuns(CommandView):
    """Compare a baseline and a candidate (configuration ids, or `baseline_job` / `candidate_job`) and save
    the comparison's `benchmark.comparison.completed` event. 202 while a worker computes it: ask again."""

    documented_errors: dict[str, str] = {}  # (unknown sides are a 400)

    @extend_schema(
        operation_id="commands_compare_benchmark_runs",
        request=inline_serializer(
            "CompareBenchmarkRuns",
            {
                "baseline": serializers.IntegerField(required=False),
                "candidate": serializers.IntegerField(required=False),
                "baseline_job": serializers.IntegerField(required=False),
                "candidate_job": serializers.IntegerField(required=False),
            },
        ),
        responses={
            201: inline_serializer(
                "ComparedRuns", {"comparison": serializers.DictField(), "event": serializers.DictField()}
            ),
            202: OpenApiResponse(description="being computed: POST again"),
        },
        examples=[OpenApiExample("two jobs", request_only=True, value={"baseline_job": 3, "candidate_job": 4})],
    )
    def post(self, request: Request) -> Response:
        try:
            baseline, candidate = parse_sides(self.body(request))
        except SideError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        try:
            comparison = comparisons.get_or_compute(baseline, candidate)
        except comparisons.BrokerUnreachable as exc:
            return broker_unreachable(exc)
        if comparison.status != comparison.Status.DONE:
            return Response({"id": comparison.pk, "status": comparison.status}, status=status.HTTP_202_ACCEPTED)
        saved = comparisons.save_comparison(comparison, request.user)
        body = {"id": comparison.pk, "status": comparison.status, **(comparison.result or {})}
        return Response({"comparison": body, "event": saved.event}, status=status.HTTP_201_CREATED)
