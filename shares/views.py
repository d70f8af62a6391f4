"""The visitor's pages (no account: `login_not_required`) and the signed-in report download."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from comparisons.statistics.sides import SideError
from core import roles
from shares import pages, report
from shares.models import Share
from shares.services import Gone, NotFound, ShareError, open_share, record_view, share_target
from trials.reading import steps


def shared_context(share: Share, request: HttpRequest, base: str, number: int | None = None) -> dict[str, Any]:
    t, page = request.GET.get("t"), request.GET.get("page")
    if share.trial is not None:
        return pages.trial_context(share.trial, base, t, number, page)
    if share.qc_item is not None:
        return pages.qc_item_context(share.qc_item, base, t, number, page)
    if number is not None:
        raise Http404("a comparison has no steps")
    if share.kind == Share.Kind.COMPARISON:
        return pages.comparison_context(share, request)
    return pages.grid_context(share, page)


@login_not_required
@require_GET
def shared(request: HttpRequest, token: str, number: int | None = None) -> HttpResponse:
    """A share as its visitor sees it: read-only, exactly what was shared; `?download=html` the report."""
    try:
        share = open_share(token)
    except Gone:
        return render(request, "shares/gone.html", status=410)
    record_view(share, request.META.get("REMOTE_ADDR", ""))
    if request.GET.get("download") == "html":
        return report.download(share)
    base = pages.share_base(token)
    context = {"share": share, "share_url": base} | shared_context(share, request, base, number)
    return render(request, report.TEMPLATES[share.kind], context)


@login_not_required
@require_GET
def shared_step(request: HttpRequest, token: str, number: int) -> JsonResponse:
    """One step of the shared trial in full, for its "show all": what the API gives a signed-in user."""
    try:
        share = open_share(token)
    except Gone:
        return JsonResponse({"detail": "this share has expired"}, status=410)
    trial = share.trial or (share.qc_item.trial if share.qc_item else None)
    if trial is None:
        raise Http404("a comparison has no steps")
    trajectory, _ = steps.named_trajectory(trial, request.GET.get("t"))
    return JsonResponse(steps.step_detail(get_object_or_404(trajectory.steps.all(), index=number - 1)))


@require_GET
@roles.require_right(roles.READ)
def download_report(request: HttpRequest) -> HttpResponse:
    """The same report for a signed-in user, of what the query names (`trial`, `qc_item`, a comparison's sides);
    refused, as every share is, when sharing is turned off."""
    if not settings.SHARING_ENABLED:
        raise Http404("sharing is turned off (SHARING_ENABLED=false)")
    try:
        target = share_target(request.GET)
    except (ShareError, NotFound, SideError) as exc:
        raise Http404(str(exc)) from exc
    return report.download(target)
