"""What a live trial's page polls: its status, counts and the steps after the last it has."""

from __future__ import annotations

from django.db.models import Count
from django.db.models.functions import Substr
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.ids import parse_pk
from trials.live import trajectories
from trials.models import Trial
from trials.reading.text import scrub

LIVE_STEPS = 500  # steps one poll (every 2 s) returns at most; the rest come with the next


class TrialLive(APIView):
    """What a live trial's page polls: its status, counts, and the steps after `?after=` (a step number)."""

    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="the last step number the page has")],
        responses={200: OpenApiResponse(description="status, counts, stalled, and up to 500 new steps")},
    )
    def get(self, request: Request, pk: int) -> Response:
        trial = get_object_or_404(Trial.objects.only("status", "live_seen_at", "step_count"), pk=pk)
        wanted = request.query_params.get("after", "0")
        if (after := parse_pk(wanted)) is None:
            raise ValidationError({"after": [f"a step number (a whole number), not {wanted!r}"]})
        trajectory = trial.trajectories.filter(path=trajectories.TRAJECTORY_PATH).first()
        rows = []
        if trajectory is not None:
            rows = list(
                trajectory.steps.filter(index__gte=after)
                .order_by("index")
                .annotate(head=Substr("message_text", 1, 300))
                .values("index", "source", "head", "tool_call_count")[:LIVE_STEPS]
            )
        events = trial.events.aggregate(n=Count("pk"))
        return Response(
            {
                "status": trial.status,
                "stalled": trial.is_stalled,
                "last_seen": trial.live_seen_at,
                "step_count": trial.step_count,
                "event_count": events["n"],
                "steps": [
                    {
                        "number": r["index"] + 1,
                        "source": r["source"],
                        "message": scrub(r["head"]),
                        "tool_calls": r["tool_call_count"],
                    }
                    for r in rows
                ],
            }
        )
