"""JSON API: the comparison, its charts, saving and downloading the comparison event.

These views leave authentication to DRF (session, basic or token), so a script can run
the seed's `jq` guard on `curl -u … /api/comparisons/?baseline=…&candidate=…`.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.decorators import method_decorator
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from comparisons import services
from comparisons.computing.cache import points_for
from comparisons.models import Comparison, SavedComparison
from comparisons.pair import charts, saved
from comparisons.pair.serializers import SavedComparisonDetailSerializer, SavedComparisonSerializer
from comparisons.statistics.sides import SideError, parse_sides
from core import errors, roles

SIDE_PARAMETERS = [
    OpenApiParameter("baseline", int, description="baseline configuration id"),
    OpenApiParameter("candidate", int, description="candidate configuration id"),
    OpenApiParameter("baseline_job", int, description="baseline job id (instead of a configuration)"),
    OpenApiParameter("candidate_job", int, description="candidate job id (instead of a configuration)"),
]


def _not_ready(comparison: Comparison) -> Response | None:
    """202 while the Celery task runs, 500 when it failed, None when the result is ready."""
    if comparison.status == Comparison.Status.DONE:
        return None
    body = {
        "id": comparison.pk,
        "status": comparison.status,
        "statusUrl": reverse("api-comparison-status", args=[comparison.pk]),
    }
    if comparison.status == Comparison.Status.FAILED:
        return Response({**body, "error": comparison.error}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return Response(body, status=status.HTTP_202_ACCEPTED)


def _finished_comparison(request) -> Comparison | Response:
    """The finished comparison the request names, or the response to send instead (400, 202, 500)."""
    try:
        baseline, candidate = parse_sides(request.query_params or request.data)
    except SideError as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
    try:
        comparison = services.get_or_compute(baseline, candidate)
    except services.BrokerUnreachable as exc:
        return broker_unreachable(exc)
    return _not_ready(comparison) or comparison


def broker_unreachable(exc: Exception) -> Response:
    """503: nothing is lost (the comparison stays queued and is sent when the broker is back)."""
    detail = f"{exc}; the comparison is computed once it is back: ask again later"
    return Response({"detail": detail}, status=503, headers={"Retry-After": errors.retry_after(broker=True)})


@method_decorator(login_not_required, name="dispatch")
class ComparisonView(APIView):
    @extend_schema(parameters=SIDE_PARAMETERS, responses={200: OpenApiResponse(description="comparison JSON")})
    def get(self, request):
        comparison = _finished_comparison(request)
        if isinstance(comparison, Response):
            return comparison
        return Response(
            {"id": comparison.pk, "status": comparison.status, "computeMs": comparison.compute_ms, **comparison.result}
        )


@method_decorator(login_not_required, name="dispatch")
class ComparisonStatusView(APIView):
    @extend_schema(responses={200: OpenApiResponse(description="status of a comparison computation")})
    def get(self, request, pk: int):
        comparison = get_object_or_404(Comparison.objects.defer("result", "points"), pk=pk)
        return Response({"id": pk, "status": comparison.status, "error": comparison.error})


@method_decorator(login_not_required, name="dispatch")
class ChartView(APIView):
    @extend_schema(parameters=SIDE_PARAMETERS, responses={200: OpenApiResponse(description="Plotly figure JSON")})
    def get(self, request, chart: str):
        if chart not in charts.BUILDERS:
            raise Http404(f"no chart {chart!r}; charts: {', '.join(charts.CHARTS)}")
        comparison = _finished_comparison(request)
        if isinstance(comparison, Response):
            return comparison
        points = points_for(comparison) if chart == "cost_reward" else {}
        # One reverse(), then string formatting: the scatter can hold 10,000 trials.
        prefix = reverse("trial-detail", args=[0]).removesuffix("0/")
        figure = charts.build(chart, comparison.result, points, lambda pk: f"{prefix}{pk}/")
        return Response(figure)


@method_decorator(login_not_required, name="dispatch")
class SaveView(APIView):
    """Record the comparison as a `benchmark.comparison.completed` event."""

    required_right = roles.SAVE_COMPARISON

    @extend_schema(
        parameters=SIDE_PARAMETERS, request=None, responses={201: OpenApiResponse(description="the saved event")}
    )
    def post(self, request):
        comparison = _finished_comparison(request)
        if isinstance(comparison, Response):
            return comparison
        saved = services.save_comparison(comparison, request.user)
        return Response(
            {
                "id": saved.pk,
                "eventId": saved.event_id,
                "downloadUrl": reverse("api-comparison-event", args=[saved.pk]),
                "event": saved.event,
            },
            status=status.HTTP_201_CREATED,
        )


@method_decorator(login_not_required, name="dispatch")
class EventDownloadView(APIView):
    @extend_schema(responses={200: OpenApiResponse(description="benchmark.comparison.completed event JSON")})
    def get(self, request, pk: int):
        saved = get_object_or_404(SavedComparison, pk=pk)
        response = JsonResponse(saved.event, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = f'attachment; filename="{saved.event_id}.json"'
        return response


@method_decorator(login_not_required, name="dispatch")
class SavedListView(generics.ListAPIView):
    """Saved comparisons, newest first: who saved each, when, the sides and the decision."""

    serializer_class = SavedComparisonSerializer

    def get_queryset(self):
        return saved.saved_list()


@method_decorator(login_not_required, name="dispatch")
class SavedDetailView(APIView):
    """A saved comparison as saved and as it stands now, with the figures that changed since."""

    @extend_schema(responses={200: SavedComparisonDetailSerializer})
    def get(self, request, pk: int):
        row = get_object_or_404(saved.saved_list(), pk=pk)
        then = SavedComparison.objects.values_list("event", flat=True).get(pk=pk)["comparison"]
        body = {**SavedComparisonSerializer(row).data, "saved": then}
        sides = saved.sides_of(row)
        if sides is None:
            return Response({**body, "now": None, "changes": [], "detail": "its sides no longer exist"})
        try:
            now = services.get_or_compute(*sides)
        except services.BrokerUnreachable as exc:
            return broker_unreachable(exc)
        pending = _not_ready(now)
        if pending is not None:
            return pending
        current = now.result["comparison"]
        return Response({**body, "now": current, "changes": saved.changes(then, current)})
