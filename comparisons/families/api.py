"""JSON API of the N-sides grid and the trend, each with its chart endpoint.

Authentication is DRF's (token, basic or session), as in comparisons/pair/api.py.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.utils.decorators import method_decorator
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from comparisons.families import charts
from comparisons.families.grid import get_or_compute_grid, parse_grid, present_tasks
from comparisons.families.trend import get_or_compute_trend, parse_trend
from comparisons.statistics.sides import SideError
from core.pagination import PageNumberPagination

GRID_PARAMETERS = [
    OpenApiParameter("sides", str, description="2 to 12 configuration ids, comma-separated"),
    OpenApiParameter("side_jobs", str, description="2 to 12 job ids, comma-separated (instead of sides)"),
    OpenApiParameter("reference", int, description="the side the others are compared with (default: the first)"),
]
TREND_PARAMETERS = [
    OpenApiParameter("dataset", str, required=True, description="dataset id, or name@version"),
    OpenApiParameter("configurations", str, description="configuration ids, comma-separated (default: every one)"),
]


class GridTaskPages(PageNumberPagination):
    page_size = 100


def _bad_request(exc: Exception) -> Response:
    return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)


@method_decorator(login_not_required, name="dispatch")
class GridView(APIView):
    """Per side: mean reward and CI95, delta vs the reference with CI95, McNemar p and Holm's p,
    validity; per task (100 a page, `?page=`): one cell per side, with its trial ids."""

    @extend_schema(
        parameters=[*GRID_PARAMETERS, OpenApiParameter("page", int)],
        responses={200: OpenApiResponse(description="sides and a page of tasks")},
    )
    def get(self, request):
        try:
            sides, reference = parse_grid(request.query_params)
        except SideError as exc:
            return _bad_request(exc)
        stored = get_or_compute_grid(sides, reference)
        result = stored.result
        paginator = GridTaskPages()
        # the tasks are rows of one stored result: a range of their positions is what is paged
        shown: list[int] = paginator.paginate_queryset(range(result["task_count"]), request, view=self) or []  # type: ignore[arg-type]
        tasks = present_tasks(result, stored.task_rows(shown))
        pages = {
            "count": result["task_count"],
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
        }
        sides_part = {k: v for k, v in result.items() if k not in ("task_means", "task_count")}
        return Response({**pages, **sides_part, "tasks": tasks})


@method_decorator(login_not_required, name="dispatch")
class GridChartView(APIView):
    @extend_schema(parameters=GRID_PARAMETERS, responses={200: OpenApiResponse(description="Plotly figure JSON")})
    def get(self, request):
        try:
            sides, reference = parse_grid(request.query_params)
        except SideError as exc:
            return _bad_request(exc)
        return Response(charts.grid_sides(get_or_compute_grid(sides, reference).result))


@method_decorator(login_not_required, name="dispatch")
class TrendView(APIView):
    """One point per configuration of the dataset (or those named), ordered by first trial."""

    @extend_schema(parameters=TREND_PARAMETERS, responses={200: OpenApiResponse(description="trend points")})
    def get(self, request):
        try:
            dataset, configurations = parse_trend(request.query_params)
        except SideError as exc:
            return _bad_request(exc)
        return Response(get_or_compute_trend(dataset, configurations))


@method_decorator(login_not_required, name="dispatch")
class TrendChartView(APIView):
    @extend_schema(parameters=TREND_PARAMETERS, responses={200: OpenApiResponse(description="Plotly figure JSON")})
    def get(self, request):
        try:
            dataset, configurations = parse_trend(request.query_params)
        except SideError as exc:
            return _bad_request(exc)
        return Response(charts.trend(get_or_compute_trend(dataset, configurations)))
