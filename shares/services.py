"""Every write of a share: create, revoke, record a view. Each create and revoke is audited."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.http import Http404, QueryDict
from django.urls import reverse
from django.utils import timezone

from comparisons.families.grid import parse_grid
from comparisons.statistics.sides import SideError, parse_sides
from core.ids import parse_pk
from shares.models import Share, ShareEvent, ShareView, token_hash
from trials.models import QCItem, Trial

DEFAULT_LIFETIME = timedelta(days=7)
MAX_LIFETIME = timedelta(days=90)
# What the Share control offers (days); the API takes any whole number of days up to MAX_LIFETIME.
LIFETIME_CHOICES = (1, 7, 30, 90)
IF_EXISTS = ("offer", "new", "replace")
PAIR_KEYS = ("baseline", "candidate", "baseline_job", "candidate_job")
GRID_KEYS = ("sides", "side_jobs", "reference")


class ShareError(ValueError):
    """Bad input: `field` names what is wrong (`expires_at`, `comparison`, …)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class NotFound(LookupError):
    """What the caller asked to share does not exist (or they may not see it)."""


class AlreadyShared(Exception):
    """The caller already has a live link to this (409): its token was shown once, so it is named, not repeated."""

    def __init__(self, live: list[Share]):
        super().__init__("you already have a live link to this")
        self.live = live


class Gone(Exception):
    """The share expired (410)."""


@dataclass
class Created:
    share: Share
    token: str  # shown once, to its creator; only its hash is stored

    @property
    def path(self) -> str:
        return reverse("share", args=[self.token])


def comparison_query(params: dict) -> QueryDict:
    """A comparison's stored sides as the query the comparison and grid pages read."""
    query = QueryDict(mutable=True)
    for key, value in params.items():
        if value is None:
            continue
        query[key] = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
    return query


def _comparison_params(value: object) -> tuple[str, dict]:
    if not isinstance(value, dict):
        shapes = '{"baseline": id, "candidate": id} or {"sides": [ids], "reference": id}'
        raise ShareError("comparison", f"comparison: give {shapes}")
    if "sides" in value or "side_jobs" in value:
        params = {k: value[k] for k in GRID_KEYS if value.get(k) is not None}
        try:
            parse_grid(comparison_query(params))
        except SideError as exc:
            raise NotFound(f"comparison: {exc}") from exc
        return Share.Kind.GRID, params
    params = {k: value[k] for k in PAIR_KEYS if value.get(k) is not None}
    try:
        parse_sides(comparison_query(params))
    except SideError as exc:
        raise NotFound(f"comparison: {exc}") from exc
    return Share.Kind.COMPARISON, params


def expiry(value: datetime | None, now: datetime, days: int | None = None) -> datetime:
    """When a new share expires: `expires_at`, or `days` from now, or DEFAULT_LIFETIME; at most MAX_LIFETIME."""
    if value is not None and days is not None:
        raise ShareError("expires_in_days", "give expires_at or expires_in_days, not both")
    if days is not None:
        if not 1 <= days <= MAX_LIFETIME.days:
            raise ShareError(
                "expires_in_days", f"expires_in_days: a whole number of days from 1 to {MAX_LIFETIME.days}"
            )
        return now + timedelta(days=days)
    if value is None:
        return now + DEFAULT_LIFETIME
    if value <= now:
        raise ShareError("expires_at", "expires_at: must be in the future")
    if value - now > MAX_LIFETIME:
        raise ShareError("expires_at", f"expires_at: at most {MAX_LIFETIME.days} days from now")
    return value


def build_target(*, trial: int | None = None, comparison: object = None, qc_item: int | None = None) -> Share:
    """An unsaved share of exactly one thing. Raises ShareError (400) or NotFound (404)."""
    if sum(x is not None for x in (trial, comparison, qc_item)) != 1:
        raise ShareError("non_field_errors", 'give exactly one of "trial", "comparison" or "qc_item"')
    share = Share()
    if trial is not None:
        share.kind, share.trial = Share.Kind.TRIAL, Trial.objects.filter(pk=trial).first()
        if share.trial is None:
            raise NotFound(f"trial: no trial {trial}")
    elif qc_item is not None:
        share.kind, share.qc_item = Share.Kind.QC_ITEM, QCItem.objects.filter(pk=qc_item).first()
        if share.qc_item is None:
            raise NotFound(f"qc_item: no QC item {qc_item}")
    else:
        share.kind, share.params = _comparison_params(comparison)
    return share


def share_target(query: QueryDict) -> Share:
    """What a signed-in report download names: `trial`, `qc_item`, a pair's or a grid's sides."""
    if query.get("trial"):
        return build_target(trial=parse_pk(query["trial"]) or 0)
    if query.get("qc_item"):
        return build_target(qc_item=parse_pk(query["qc_item"]) or 0)
    if query.get("sides") or query.get("side_jobs"):
        return build_target(comparison={k: v for k, v in query.items() if k in GRID_KEYS})
    return build_target(comparison={k: v for k, v in query.items() if k in PAIR_KEYS})


@transaction.atomic
def create_share(
    user: User,
    *,
    trial: int | None = None,
    comparison: object = None,
    qc_item: int | None = None,
    expires_at: datetime | None = None,
    expires_in_days: int | None = None,
    if_exists: str = "new",
) -> Created:
    """A new share of exactly one thing, audited. Raises ShareError (400) or NotFound (404).

    `if_exists` says what to do when the user already has a live link to it: "offer" raises
    AlreadyShared naming it, "replace" revokes it first, "new" makes another beside it.
    """
    now = timezone.now()
    share = build_target(trial=trial, comparison=comparison, qc_item=qc_item)
    if if_exists not in IF_EXISTS:
        raise ShareError("if_exists", f"if_exists: one of {', '.join(IF_EXISTS)}")
    if if_exists != "new" and (live := live_shares_of(user, share)):
        if if_exists == "offer":
            raise AlreadyShared(live)
        for old in live:
            revoke_share(user, old)
    share.created_by, share.created_at = user, now
    share.expires_at = expiry(expires_at, now, expires_in_days)
    token = secrets.token_urlsafe(32)
    share.token_hash = token_hash(token)
    share.save()
    ShareEvent.objects.create(
        share=share, actor=user, at=now, action=ShareEvent.Action.CREATED, changes=describe(share)
    )
    return Created(share=share, token=token)


def live_shares_of(user: User, target: Share) -> list[Share]:
    """The user's own live (not revoked, not expired) shares of the same thing as `target`, newest first."""
    live = Share.objects.filter(
        created_by=user, kind=target.kind, revoked_at=None, expires_at__gt=timezone.now()
    ).with_view_counts()
    if target.trial_id:
        return list(live.filter(trial_id=target.trial_id))
    if target.qc_item_id:
        return list(live.filter(qc_item_id=target.qc_item_id))
    # A comparison's sides compared as the query they make ("3" and 3 alike); a user has few live ones.
    wanted = comparison_query(target.params).dict()
    return [s for s in live.filter(trial=None, qc_item=None) if comparison_query(s.params).dict() == wanted]


def describe(share: Share) -> dict:
    """What a share is of, for its audit entry and the API."""
    what: dict = {"kind": share.kind, "expires_at": share.expires_at.isoformat()}
    if share.trial_id:
        what["trial"] = share.trial_id
    if share.qc_item_id:
        what["qc_item"] = share.qc_item_id
    if share.params:
        what["comparison"] = share.params
    return what


@transaction.atomic
def revoke_share(user: User, share: Share) -> Share:
    """Revoked at once: the next request for its token answers 404. Revoking twice changes nothing."""
    if share.revoked_at is None:
        share.revoked_at, share.revoked_by = timezone.now(), user
        share.save(update_fields=["revoked_at", "revoked_by"])
        ShareEvent.objects.create(share=share, actor=user, at=share.revoked_at, action=ShareEvent.Action.REVOKED)
    return share


def open_share(token: str) -> Share:
    """The live share behind a token, or Http404 (never issued, revoked, sharing off) / Gone (expired).

    Looked up by the hash of the token: an indexed equality on a value the visitor cannot
    steer, so a near miss and a far one take the same time.
    """
    if not settings.SHARING_ENABLED:
        raise Http404("sharing is turned off")
    share = Share.objects.filter(token_hash=token_hash(token), revoked_at=None).first()
    if share is None:
        raise Http404("no such share")
    if share.is_expired:
        raise Gone()
    return share


def record_view(share: Share, address: str) -> None:
    # Keyed with the site's secret: the hash tells visits apart without being reversible to an address.
    digest = hmac.new(settings.SECRET_KEY.encode(), address.encode(), hashlib.sha256).hexdigest()
    ShareView.objects.create(share=share, address_hash=digest)
