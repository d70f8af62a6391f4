"""The signed-in pages of one's share links: the list (views, expiry, state) and its Revoke button."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from core import roles
from core.ids import parse_pk
from shares.models import Share, ShareView
from shares.services import comparison_query, revoke_share
from trials.models import Configuration, Job

PAGE_SIZE = 50
KIND_WORDS = {"trial": "trial", "comparison": "comparison", "grid": "grid", "qc_item": "QC item"}


@dataclass
class Row:
    share: Share
    label: str
    url: str
    views: int
    last_view: datetime | None

    @property
    def state(self) -> str:
        if self.share.revoked_at:
            return "revoked"
        return "expired" if self.share.is_expired else "live"

    @property
    def kind(self) -> str:
        return KIND_WORDS[self.share.kind]

    @property
    def badge(self) -> str:
        """The stylesheet's existing badge of the same sense."""
        return {"live": "pass", "expired": "muted", "revoked": "deny"}[self.state]


def _sharing_on() -> None:
    if not settings.SHARING_ENABLED:
        raise Http404("sharing is turned off (SHARING_ENABLED=false)")


def _params(share: Share) -> dict[str, str]:
    """A comparison's stored sides as the query its page reads, one text value a key."""
    return {key: str(value) for key, value in comparison_query(share.params).items()}


def _side_names(shares: list[Share]) -> dict[tuple[str, str], str]:
    """The names of every configuration and job the page's comparisons name: two queries for the page."""
    wanted: dict[str, set[int]] = {"configuration": set(), "job": set()}
    for share in shares:
        for key, value in _params(share).items():
            kind = "job" if key.endswith("job") or key == "side_jobs" else "configuration"
            if key == "reference":
                kind = "job" if "side_jobs" in share.params else "configuration"
            wanted[kind] |= {pk for v in value.split(",") if (pk := parse_pk(v)) is not None}
    confs = Configuration.objects.filter(pk__in=wanted["configuration"]).values_list("pk", "key")
    jobs = Job.objects.filter(pk__in=wanted["job"]).values_list("pk", "name")
    return {("configuration", str(pk)): key for pk, key in confs} | {("job", str(pk)): name for pk, name in jobs}


def _what(share: Share, names: dict[tuple[str, str], str]) -> tuple[str, str]:
    """What a share is of, in words, and the signed-in page of it."""
    if share.trial is not None:
        return share.trial.name, share.trial.get_absolute_url()
    if share.qc_item is not None:
        return share.qc_item.label, share.qc_item.get_absolute_url()
    query = _params(share)
    link = urlencode(query)

    def name(kind: str, pk: str) -> str:
        return names.get((kind, pk), f"{kind} {pk}")

    if share.kind == Share.Kind.GRID:
        kind = "job" if query.get("side_jobs") else "configuration"
        sides = (query.get("side_jobs") or query.get("sides") or "").split(",")
        label = ", ".join(name(kind, pk) for pk in sides if pk)
        return label, f"{reverse('comparison-grid')}?{link}"
    baseline = (
        name("job", query["baseline_job"])
        if query.get("baseline_job")
        else name("configuration", query.get("baseline", ""))
    )
    candidate = (
        name("job", query["candidate_job"])
        if query.get("candidate_job")
        else name("configuration", query.get("candidate", ""))
    )
    return f"{baseline} → {candidate}", f"{reverse('comparison')}?{link}"


def rows_of(shares: list[Share]) -> list[Row]:
    """The page's rows: view counts and last views read for these shares only, so a page costs O(page)."""
    stats = {
        row["share"]: row
        for row in ShareView.objects.filter(share__in=[s.pk for s in shares])
        .values("share")
        .annotate(count=Count("pk"), last=Max("at"))
    }
    names = _side_names([s for s in shares if s.params])
    rows = []
    for share in shares:
        label, url = _what(share, names)
        seen = stats.get(share.pk, {})
        rows.append(Row(share, label, url, seen.get("count", 0), seen.get("last")))
    return rows


@roles.require_right(roles.READ)
def share_list(request: HttpRequest) -> HttpResponse:
    """The caller's share links (an administrator's: everyone's), newest first; revoked ones stay listed."""
    _sharing_on()
    number = max(1, parse_pk(request.GET.get("page") or "1") or 1)
    start = (number - 1) * PAGE_SIZE
    shares = Share.objects.visible_to(request.user).select_related("trial", "qc_item", "created_by", "revoked_by")
    # One more than a page tells whether there is a next, without counting every share.
    window = list(shares.order_by("-created_at", "-pk")[start : start + PAGE_SIZE + 1])
    context = {
        "rows": rows_of(window[:PAGE_SIZE]),
        "page_number": number,
        "has_next": len(window) > PAGE_SIZE,
        "everyone": request.user.is_superuser,
    }
    return render(request, "shares/list.html", context)


@roles.require_right(roles.READ, write=roles.SHARE)
@require_POST
def share_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of the caller's links (an administrator's: anyone's) at once; it stays listed as revoked."""
    _sharing_on()
    share = get_object_or_404(Share.objects.visible_to(request.user), pk=pk)
    revoke_share(cast(User, request.user), share)  # require_right let no anonymous caller in
    messages.success(request, f"Share {share.pk} revoked: its link answers 404 from now on.")
    back = request.POST.get("page")
    return redirect(f"{reverse('share-list')}?page={parse_pk(back) or 1}")
