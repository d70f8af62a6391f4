"""The digests' endpoints: `/trials/<pk>.md`, `/qc/clusters/<pk>.md`, `/comparisons/digest.md?…`, and
the pages themselves answering `Accept: text/markdown` (or `?format=md`) through `negotiated`.

They are DRF views, so a script or an agent reads them with the API's token as well as a browser's
session, with the API's rule (`core.roles.RolePermission`: any signed-in user reads, nobody else);
the MCP server's `digest` tool calls them too (trials/mcp/through_api.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import renderers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from comparisons import services
from comparisons.models import Comparison
from comparisons.statistics.sides import SideError, parse_sides
from trials.digests.cluster import cluster_digest
from trials.digests.comparison import comparison_digest
from trials.digests.trial import trial_digest
from trials.models import Trial
from trials.models.qc import FailureCluster

MARKDOWN = "text/markdown"


def markdown_answers(**others: str) -> dict[Any, Any]:
    """The schema's answers of a digest: its Markdown, and the other statuses it may answer, in words."""
    answers: dict[Any, Any] = {(200, MARKDOWN): OpenApiResponse(OpenApiTypes.STR, description="the digest")}
    for status, words in others.items():
        answers[(int(status.removeprefix("s")), MARKDOWN)] = OpenApiResponse(OpenApiTypes.STR, description=words)
    return answers


class MarkdownRenderer(renderers.BaseRenderer):
    media_type = MARKDOWN
    format = "md"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, str):
            return data.encode()
        detail = data.get("detail", data) if isinstance(data, dict) else data  # an error: DRF's {"detail": …}
        return f"**Error:** {detail}\n".encode()


class AlwaysMarkdown(BaseContentNegotiation):
    """A digest is Markdown whatever the Accept header asks (a browser's text/html included)."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class DigestView(APIView):
    renderer_classes = [MarkdownRenderer]
    content_negotiation_class = AlwaysMarkdown

    def absolute(self, url: str) -> str:
        return self.request.build_absolute_uri(url)


class TrialDigest(DigestView):
    """A trial's outcome, cause, configuration, figures and the steps around its failure (`?t=`: a trajectory)."""

    @extend_schema(responses=markdown_answers(s404="no such trial"))
    def get(self, request, pk: int) -> Response:
        trial = get_object_or_404(Trial.objects.for_list(), pk=pk)
        return Response(trial_digest(trial, self.absolute, request.query_params.get("t")))


class ClusterDigest(DigestView):
    """A failure cluster's class, cause, signature, count, facets and newest trials (filters as its page's)."""

    @extend_schema(responses=markdown_answers(s404="no such cluster"))
    def get(self, request, pk: int) -> Response:
        cluster = get_object_or_404(FailureCluster, pk=pk)
        return Response(cluster_digest(cluster, self.absolute, request.query_params))


class ComparisonDigest(DigestView):
    """The comparison's decision, reasons, headline figures and per-task deltas (sides as the page's)."""

    @extend_schema(
        responses=markdown_answers(
            s202="being computed: ask again",
            s400="the sides are missing or wrong",
            s500="the comparison failed to compute",
            s503="the task broker is unreachable",
        )
    )
    def get(self, request) -> Response:
        try:
            baseline, candidate = parse_sides(request.query_params)
        except SideError as exc:
            return Response(f"**Error:** {exc}\n", status=400)
        try:
            comparison = services.get_or_compute(baseline, candidate)
        except services.BrokerUnreachable:
            return Response("The task broker is unreachable: ask again later.\n", status=503)
        if comparison.status == Comparison.Status.FAILED:
            return Response("The comparison failed to compute.\n", status=500)
        if comparison.status != Comparison.Status.DONE or not comparison.result:
            return Response("The comparison is being computed: ask again in a few seconds.\n", status=202)
        query = urlencode({**baseline.query("baseline"), **candidate.query("candidate")})
        page, api = f"{reverse('comparison')}?{query}", f"{reverse('api-comparison')}?{query}"
        return Response(comparison_digest(comparison.result, page, api, self.absolute))


def wants_markdown(request: HttpRequest) -> bool:
    """Accept prefers text/markdown to HTML (a browser's `*/*` does not), or `?format=md` says so."""
    if request.GET.get("format") == "md":
        return True
    return request.get_preferred_type(["text/html", MARKDOWN]) == MARKDOWN


def negotiated(page: Callable[..., HttpResponseBase], digest: type[DigestView]) -> Callable[..., HttpResponseBase]:
    """`page`, or its digest when the request asks for Markdown. Sign-in stays the page's (the site's
    LoginRequiredMiddleware reads this wrapper, which keeps the page's marks)."""
    digest_view = digest.as_view()

    @wraps(page)
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = digest_view(request, *args, **kwargs) if wants_markdown(request) else page(request, *args, **kwargs)
        patch_vary_headers(response, ["Accept"])
        return response

    return view
