"""The trials API: trials, a trajectory, its steps, search, permissions, context, alignment, export."""

import tempfile
from typing import Any

from django.http import FileResponse, Http404, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import roles
from core.ids import parse_pk
from trials import export
from trials.filters import TrialFilter
from trials.ingest.formats.atif import EMBEDDED_MARK
from trials.models import Trajectory, Trial, step_url
from trials.reading import search_hits, side_by_side, steps, tabs, text
from trials.viewer.serializers import TrialDetailSerializer, TrialListSerializer


class TrialList(generics.ListAPIView):
    queryset = Trial.objects.for_list().order_by("pk")
    serializer_class = TrialListSerializer
    filterset_class = TrialFilter


class TrialDetail(generics.RetrieveAPIView):
    queryset = Trial.objects.for_list()
    serializer_class = TrialDetailSerializer


class TrialTrajectory(APIView):
    """The trial's trajectory as ATIF JSON: the stored bytes of the imported file, unchanged (unless a
    redaction withholds values in it: then its scrubbed copy, and the `X-Benchviewer-Withheld` header says so).

    `?trajectory=<id>` (ids in the trial's `trajectories`) picks another file of the trial:
    a multi-step trial's other steps, a continuation, a subagent's.
    """

    @extend_schema(
        parameters=[OpenApiParameter("trajectory", int, description="a trajectory id; default the main one")],
        responses={200: OpenApiResponse(description="ATIF trajectory JSON")},
    )
    def get(self, request: Request, pk: int) -> HttpResponseBase:
        trial = get_object_or_404(Trial, pk=pk)
        wanted = request.query_params.get("trajectory")
        if wanted is not None:
            if (pk_wanted := parse_pk(wanted)) is None:
                raise ValidationError({"trajectory": [f"a trajectory id (a whole number), not {wanted!r}"]})
            trajectory = trial.trajectories.filter(pk=pk_wanted).first()
        else:
            trajectory = steps.main_trajectory(trial, list(trial.trajectories.order_by("position", "pk")))
        if trajectory is None and wanted is not None:
            raise Http404(f"trial {trial.pk} has no trajectory {wanted!r}")
        if trajectory is None:
            raise Http404("this trial has no trajectory")
        if trajectory.blob is None and trajectory.schema_version.startswith("ATIF"):  # a live trial, still running
            return StreamingHttpResponse(trajectory.withheld_atif(), content_type="application/json")
        if trajectory.blob is None:  # steps read from another format (AgentV output messages)
            raise Http404("this trial's steps come from its result row, not an ATIF file: see /steps/")
        if trajectory.withheld:  # the file holds values a redaction withholds: its scrubbed copy instead
            response = StreamingHttpResponse(trajectory.withheld_atif(), content_type="application/json")
            response["X-Benchviewer-Withheld"] = "values of redacted context items are replaced by [redacted]"
            return response
        if EMBEDDED_MARK in trajectory.path:  # an embedded subagent: its object, cut out of its parent's file
            return HttpResponse(trajectory.atif_bytes(), content_type="application/json")
        return FileResponse(trajectory.blob.open(), content_type="application/json")


class ExportBenchmarkTrial(APIView):
    """Seed 000's `export_benchmark_trial`: the trial as a zip laid out as a Harbor trial folder.

    `agent/trajectory.json`, `verifier/reward.json`, `verifier/reward-details.json`, `artifacts/…` and
    the trial's other stored files, plus `events.jsonl`, the evidence pack, `qc-items.json`,
    `redaction-manifest.json` and `export-manifest.json` (path, size and sha256 of every other file).
    Values a redaction withholds are `[redacted]` in every file. Importing the zip gives the same trial.
    Any logged-in user may export what they may read (the read right, as the ATIF download).
    """

    documented_errors = {"404": "No trial has the id `trial` names."}

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "trial",
                int,
                required=True,
                description="the trial's id",
                examples=[OpenApiExample("a trial", value=42)],
            )
        ],
        responses={
            (200, "application/zip"): OpenApiResponse(
                response=OpenApiTypes.BINARY,
                description="a zip: one folder named after the trial, laid out as a Harbor trial folder",
                examples=[
                    OpenApiExample(
                        "the files of an exported trial",
                        value=[
                            "configure-git-webserver__YfkUhxf/result.json",
                            "configure-git-webserver__YfkUhxf/agent/trajectory.json",
                            "configure-git-webserver__YfkUhxf/verifier/reward.json",
                            "configure-git-webserver__YfkUhxf/verifier/reward-details.json",
                            "configure-git-webserver__YfkUhxf/events.jsonl",
                            "configure-git-webserver__YfkUhxf/qc-items.json",
                            "configure-git-webserver__YfkUhxf/redaction-manifest.json",
                            "configure-git-webserver__YfkUhxf/export-manifest.json",
                        ],
                    )
                ],
            )
        },
    )
    def get(self, request: Request) -> FileResponse:
        wanted = request.query_params.get("trial")
        if wanted is None or (pk := parse_pk(wanted)) is None:
            raise ValidationError({"trial": [f"a trial id (a whole number), not {wanted!r}"]})
        trial = get_object_or_404(Trial.objects.select_related("pack", "configuration", "task", "dataset"), pk=pk)
        spool = tempfile.TemporaryFile()  # (closed by the response once sent: the zip is never held in memory)
        export.write_trial_zip(trial, spool)
        spool.seek(0)
        name = f"{export.export_name(trial)}.zip"
        return FileResponse(spool, as_attachment=True, filename=name, content_type="application/zip")


# ---------------------------------------------------------------- trial viewer


class TrialSteps(APIView):
    """One window of steps (`?page=`, 50 a page; `?t=` a trajectory id, default the main one)."""

    @extend_schema(operation_id="trials_steps_list", responses={200: OpenApiResponse(description="a window of steps")})
    def get(self, request: Request, pk: int) -> Response:
        trial = get_object_or_404(Trial, pk=pk)
        trajectory, trajectories = steps.named_trajectory(trial, request.query_params.get("t"))
        page = steps.requested_page(request.query_params.get("page"))
        window = steps.step_window(trial, trajectory, (page - 1) * steps.STEP_WINDOW, trajectories)
        return Response(
            {
                "trajectory": trajectory.pk,
                "page": window.page,
                "pages": window.pages,
                "total": window.total,
                "steps": [
                    {
                        "number": sv.number,
                        "step_id": sv.step.step_id,
                        "source": sv.step.source,
                        "timestamp": sv.step.timestamp,
                        "seconds_since_previous": sv.seconds_since_previous,
                        "message": sv.message,
                        "message_truncated": sv.message_truncated,
                        "skill": sv.step.skill,  # the agent skill it ran within ("" for none)
                        "tool_calls": [
                            {
                                "tool_call_id": c.call.tool_call_id,
                                "function_name": c.call.function_name,
                                "skill": text.scrub_json(c.call.skill) or None,  # the skill it loads, reads or runs
                                "result_size": c.observation.content_size if c.observation else None,
                                "permissions": [p.decision for p in c.permissions],
                            }
                            for c in sv.calls
                        ],
                        "prompt_tokens": sv.step.prompt_tokens,
                        "cached_tokens": sv.step.cached_tokens,
                        "completion_tokens": sv.step.completion_tokens,
                        "cost_usd": sv.step.cost_usd,
                        "is_copied_context": sv.step.is_copied_context,
                        "url": viewer_step_url(trial, sv.number, trajectory, trajectories),
                    }
                    for sv in window.steps
                ],
            }
        )


class TrialStep(APIView):
    """One step in full (message, reasoning, arguments, observation contents), scrubbed."""

    @extend_schema(
        operation_id="trials_step_retrieve", responses={200: OpenApiResponse(description="one step in full")}
    )
    def get(self, request: Request, pk: int, number: int) -> Response:
        trial = get_object_or_404(Trial, pk=pk)
        trajectory, _ = steps.named_trajectory(trial, request.query_params.get("t"))
        step = get_object_or_404(trajectory.steps.all(), index=number - 1)
        return Response(steps.step_detail(step))


class TrialSearch(APIView):
    """Steps of the whole trial matching `?q=` (case-insensitive), `?offset=` to page.

    Where a word starts, through the word index (`word_starts_only` in the answer), or
    anywhere with `?inside=1` (a scan, slower on long trials).
    """

    @extend_schema(responses={200: OpenApiResponse(description="matching step numbers")})
    def get(self, request: Request, pk: int) -> Response:
        trial = get_object_or_404(Trial, pk=pk)
        offset = steps.requested_offset(request.query_params.get("offset"))
        query = request.query_params.get("q", "")
        found = steps.search_steps(trial, query, offset, inside_words=request.query_params.get("inside") == "1")
        trajectories = list(trial.trajectories.order_by("position", "pk"))
        by_pk = {t.pk: t for t in trajectories}
        for m in found.matches:
            m["url"] = viewer_step_url(trial, m["number"], by_pk.get(m["trajectory"]), trajectories)
        return Response(
            {
                "q": query,
                "offset": offset,
                "matches": found.matches,
                "has_more": found.more,
                "next_offset": offset + len(found.matches),
                "word_starts_only": found.word_starts_only,
            }
        )


class Search(APIView):
    """Steps of every trial whose tool names, arguments, outputs or messages hold `?q=` where a word starts.

    Narrowed by `job`, `configuration`, `task` (an id, or part of a name, as the trial list) and
    `tool` (a tool name); 50 hits a `?page=`, the newest steps first. Each hit has its trial, job,
    task and configuration, a snippet (`snippet_html`: escaped, the match in `<mark>`) and its
    step's permalink. Through the word index only: `pending_trials` were not searched yet.
    """

    @extend_schema(
        operation_id="search_list",
        parameters=[
            OpenApiParameter("q", str, description="the words to find (the last one as a prefix)"),
            OpenApiParameter("job", str, description="a job id, or part of its name"),
            OpenApiParameter("configuration", str, description="a configuration id, or part of its key"),
            OpenApiParameter("task", str, description="a task id, or part of its name"),
            OpenApiParameter("tool", str, description="steps with a call of a tool whose name holds this, any case"),
            OpenApiParameter("where", str, description="only the trials of this query (the trial list's `q`)"),
            OpenApiParameter("page", int, description="from 1"),
        ],
        responses={200: OpenApiResponse(description="a page of matching steps")},
    )
    def get(self, request: Request) -> Response:
        page = request.query_params.get("page")
        if page is not None and ((number := parse_pk(page)) is None or number < 1):
            raise ValidationError({"page": [f"a whole number from 1, not {page!r}"]})
        if error := search_hits.where_error(request.query_params):
            raise ValidationError({search_hits.WHERE: [error]})
        found = search_hits.search_trials(request.query_params)
        return Response(
            {
                "q": found.query,
                "page": found.page,
                "results": found.hits,
                "has_more": found.has_more,
                "pending_trials": found.pending_trials,
            }
        )


class TrialPermissions(APIView):
    @extend_schema(responses={200: OpenApiResponse(description="permission decisions of the trial")})
    def get(self, request: Request, pk: int) -> Response:
        trial = get_object_or_404(Trial, pk=pk)
        fields = (
            "action_id",
            "tool_call_id",
            "step_id",
            "action_type",
            "tool_name",
            "scope",
            "decision",
            "decided_by",
            "reason",
            "side_effect_after_denial",
            "requested_at",
            "resolved_at",
        )
        rows = trial.permissions.order_by("requested_at", "pk").values(*fields)
        return Response({"permissions": [text.scrub_json(dict(r)) for r in rows]})


class TrialContext(APIView):
    """The trial's Agent Context records, each with its facts under stable names (scrubbed)."""

    @extend_schema(responses={200: OpenApiResponse(description="context records of the trial")})
    def get(self, request: Request, pk: int) -> Response:
        trial = get_object_or_404(Trial, pk=pk)
        return Response({"records": tabs.context_records(trial, request.query_params.get("kind"))})


class TrialAlignment(APIView):
    """The trial's main trajectory aligned with trial `other`'s, step by step (both of one task).

    A window at a time: `?left=` / `?right=` the step numbers it starts at (default 1),
    `?size=` steps of each side (default 50, at most 1000); `next` is the next window's URL.
    Steps are named by their number (from 1, as in `/api/trials/<pk>/steps/<number>/`).
    """

    @extend_schema(
        operation_id="trials_align_retrieve",
        parameters=[
            OpenApiParameter("left", int, description="first step number of the left window (default 1)"),
            OpenApiParameter("right", int, description="first step number of the right window (default 1)"),
            OpenApiParameter("size", int, description="steps of each side aligned (default 50, at most 1000)"),
        ],
        responses={
            200: OpenApiResponse(description="pairs of step numbers with their status, and the first divergence"),
            400: OpenApiResponse(description="the trials are not of one task, or one has no trajectory"),
        },
    )
    def get(self, request: Request, pk: int, other: int) -> Response:
        wanted = {name: _number_from_one(request, name) for name in ("left", "right", "size")}
        try:
            trials = Trial.objects.select_related("task")
            s = side_by_side.sides(get_object_or_404(trials, pk=pk), get_object_or_404(trials, pk=other))
        except side_by_side.NotComparable as exc:
            raise ValidationError({"trials": [str(exc)]}) from exc
        left, right = wanted["left"] or 1, wanted["right"] or 1
        size = min(wanted["size"] or side_by_side.WINDOW, side_by_side.MAX_WINDOW)
        prefix = side_by_side.common_prefix(s.left_steps, s.right_steps)
        divergence = side_by_side.divergence(s, prefix)
        settled = side_by_side.align_from(s, left - 1, right - 1, size)
        next_left, next_right = left + settled.left_used, right + settled.right_used
        more = next_left <= s.left_steps.step_count or next_right <= s.right_steps.step_count
        next_url = f"{request.path}?left={next_left}&right={next_right}&size={size}" if more else None
        return Response(
            {
                "left_trial": s.left.pk,
                "right_trial": s.right.pk,
                "left_steps": s.left_steps.step_count,
                "right_steps": s.right_steps.step_count,
                "identical_prefix": prefix,
                "first_divergence": {
                    "left": divergence.left if divergence else None,
                    "right": divergence.right if divergence else None,
                },
                "pairs": [pair._asdict() for pair in settled.pairs],
                "next": request.build_absolute_uri(next_url) if next_url else None,
            }
        )


def _number_from_one(request: Request, name: str) -> int | None:
    """`?name=` as a whole number from 1 (None when absent); anything else is refused."""
    value = request.query_params.get(name)
    if value is None:
        return None
    if not (number := parse_pk(value)):
        raise ValidationError({name: [f"a whole number from 1, not {value!r}"]})
    return number


def viewer_step_url(trial: Trial, number: int, trajectory: Trajectory | None, trajectories: list[Trajectory]) -> str:
    main = steps.main_trajectory(trial, trajectories)
    return step_url(trial.pk, number, None if trajectory is None or trajectory == main else trajectory.pk)


@extend_schema(exclude=True)
class UnknownEndpoint(APIView):
    """Any other address under /api/: a JSON 404 like the API's own, not the HTML page."""

    required_right = roles.READ  # it writes nothing: any logged-in user gets the 404

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise NotFound("no such API endpoint")

    post = put = patch = delete = get
