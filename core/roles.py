"""Roles and rights: the one place that says which group may do what.

Groups (created by migrations 0003 and 0022): viewer (read-only), runner (reads, imports
packs and reports live trials: trials/live/), reviewer (reads, comments, imports packs, saves
comparisons, runs the runner commands), triager (reviewer + files and edits QC items,
assigns), approver (triager + grants waivers, decides promotions). Superusers have every
right. Any logged-in user may read.

Three doors use the same mapping:
- `require_right` for page views,
- `RolePermission` for DRF views (set `required_right` on the view for unsafe methods: without
  one they are refused),
- `WriteAccessMiddleware`, which refuses every unsafe request of a user who has no
  writing right at all (a viewer), whatever view it reaches, so a new view can't forget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import F, Q
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.utils.functional import SimpleLazyObject
from drf_spectacular.drainage import set_override
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token
from rest_framework.permissions import SAFE_METHODS, BasePermission

VIEWER, REVIEWER, TRIAGER, APPROVER = "viewer", "reviewer", "triager", "approver"
RUNNER = "runner"  # a benchmark runner's account: reports live trials (migration 0022)
GROUPS = (REVIEWER, TRIAGER, APPROVER, VIEWER, RUNNER)

READ = "read"
COMMENT = "comment"
IMPORT = "import"  # upload trial packs
SAVE_COMPARISON = "save_comparison"
FILE_QC = "file_qc"  # file and edit QC items, import scenarios from a manifest
ASSIGN = "assign"
WAIVE = "waive"  # grant waivers
PROMOTE = "promote"  # decide candidate promotions
SHARE = "share"  # share links for people without an account (shares/)
RUN = "run"  # the runner commands: start trials, send their events, rewards, completions, compare

_REVIEWER = {READ, COMMENT, IMPORT, SAVE_COMPARISON, RUN, SHARE}
_TRIAGER = _REVIEWER | {FILE_QC, ASSIGN}
_APPROVER = _TRIAGER | {WAIVE, PROMOTE}
GROUP_RIGHTS: dict[str, frozenset[str]] = {
    VIEWER: frozenset({READ}),
    REVIEWER: frozenset(_REVIEWER),
    TRIAGER: frozenset(_TRIAGER),
    APPROVER: frozenset(_APPROVER),
    RUNNER: frozenset({READ, RUN, IMPORT}),  # benchviewer-push: live trials, and finished folders
}
ALL_RIGHTS = frozenset(_APPROVER)
WRITE_RIGHTS = ALL_RIGHTS - {READ}

# Unsafe requests the middleware always lets through (a viewer must be able to log out).
ALWAYS_ALLOWED_URL_NAMES = {"login", "logout", "api-token"}  # a viewer may fetch their own API token
# A user's own saved queries (trials/queries/): they change nothing anyone else sees, so a viewer keeps theirs.
ALWAYS_ALLOWED_URL_NAMES |= {"saved-queries", "saved-query-delete", "api-saved-queries", "api-saved-query"}
# Pages open without an account: a share link's token is the visitor's only credential (shares/);
# `benchviewer view`'s one-time sign-in link is its own (core/signin_link.py).
PUBLIC_URL_NAMES = {"share", "share-step", "share-step-full", "signin-link"}


def user_rights(user) -> frozenset[str]:
    if user is None or not user.is_authenticated:
        return frozenset()
    if user.is_superuser:
        return ALL_RIGHTS
    cached = getattr(user, "_benchviewer_rights", None)
    if cached is None:  # (a token's request has them from its query: TokenAuthentication)
        cached = _rights_of_groups(list(user.groups.values_list("name", flat=True)))
        user._benchviewer_rights = cached
    return cached


def _rights_of_groups(names: list[str]) -> frozenset[str]:
    rights: set[str] = {READ}
    for name in names:
        rights |= GROUP_RIGHTS.get(name, frozenset())
    return frozenset(rights)


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's, with the user's groups read in the token's query (a row a group): a token request (a
    runner's OTLP export, every API call) makes one query to authenticate and know its rights, not two."""

    def authenticate_credentials(self, key: str):
        rows = list(Token.objects.select_related("user").filter(key=key).annotate(group=F("user__groups__name")))
        if not rows:
            raise exceptions.AuthenticationFailed("Invalid token.")
        token, user = rows[0], cast(Any, rows[0].user)
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        user._benchviewer_rights = _rights_of_groups([row.group for row in rows if row.group])
        return user, token


TOKENS_KEPT = 1000  # a process's known tokens, forgotten all at once past this (a few runners' tokens in practice)
_known_tokens: dict[str, tuple[float, Any, Token]] = {}  # key -> (known until, user, token), this process's


class CachedTokenAuthentication(TokenAuthentication):
    """TokenAuthentication whose answer a process keeps OTLP_TOKEN_CACHE_SECONDS: an exporter's batches (dozens
    a second) then make no token query each. A token deleted or its user changed (deactivated, regrouped) stops
    working at once in the process that changed it (`forget_tokens`), within that time in the others."""

    def authenticate_credentials(self, key: str):
        known = _known_tokens.get(key)
        if known is not None and time.monotonic() < known[0]:
            return known[1], known[2]
        user, token = super().authenticate_credentials(key)  # (an unknown key is never kept: asked each time)
        if settings.OTLP_TOKEN_CACHE_SECONDS > 0:
            if len(_known_tokens) >= TOKENS_KEPT:
                _known_tokens.clear()
            _known_tokens[key] = (time.monotonic() + settings.OTLP_TOKEN_CACHE_SECONDS, user, token)
        return user, token


# The same bearer token on the wire as TokenAuthentication: one "tokenAuth" scheme in the API schema, not two.
set_override(CachedTokenAuthentication, "suppress_collision_warning", True)


def forget_tokens(**kwargs: Any) -> None:
    """Every known token asked again: any change to a token, a user, or what their groups and permissions are."""
    _known_tokens.clear()


_User = get_user_model()
for _model in (Token, _User):
    post_save.connect(forget_tokens, sender=_model, dispatch_uid="core.roles.forget_tokens")
    post_delete.connect(forget_tokens, sender=_model, dispatch_uid="core.roles.forget_tokens")
for _through in (_User.groups.through, _User.user_permissions.through, Group.permissions.through):
    m2m_changed.connect(forget_tokens, sender=_through, dispatch_uid="core.roles.forget_tokens")


def has_right(user, right: str) -> bool:
    return right in user_rights(user)


def can_write(user) -> bool:
    return bool(user_rights(user) & WRITE_RIGHTS)


def template_rights(request) -> dict[str, object]:
    """Context processor: `rights.<name>` in every template, so pages show only the buttons a user may press."""

    def flags() -> dict[str, object]:
        held = user_rights(request.user)
        if not settings.SHARING_ENABLED:  # sharing turned off: no page shows a share control
            held = held - {SHARE}
        return {right: right in held for right in ALL_RIGHTS} | {"role": role_of(request.user)}

    return {"rights": SimpleLazyObject(flags)}  # evaluated only by a template that asks


def role_of(user) -> str:
    """The strongest group of a user, for display ("superuser" for superusers)."""
    if user.is_authenticated and user.is_superuser:
        return "superuser"
    names = set(user.groups.values_list("name", flat=True)) if user.is_authenticated else set()
    for name in (APPROVER, TRIAGER, REVIEWER, RUNNER, VIEWER):
        if name in names:
            return name
    return "none"


def users_with_right(right: str):
    """Users (active) who hold `right` through a group, or as superusers."""
    groups = [name for name, rights in GROUP_RIGHTS.items() if right in rights]
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name__in=groups))
        .distinct()
        .order_by("username")
    )


def add_to_group(user, group_name: str) -> None:
    if group_name not in GROUP_RIGHTS:
        raise ValueError(f"unknown group {group_name!r}; one of {', '.join(GROUPS)}")
    group, _ = Group.objects.get_or_create(name=group_name)
    user.groups.add(group)
    user.__dict__.pop("_benchviewer_rights", None)


def require_right(right: str, *, write: str | None = None) -> Callable:
    """Page views: anonymous -> login page; logged in without the right -> 403.

    `right` is needed for every method; `write`, when given, for POST and the other unsafe
    methods instead (a page that lists on GET and uploads on POST). A page that only reads
    (`READ`, no `write`) answers 405 to an unsafe method. The wrapped view keeps the
    right a write needs in `required_right`, as a DRF view does (tests/core/test_roles.py walks them).
    """
    to_write = write or right

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if request.method not in SAFE_METHODS and write is None and right == READ:
                return HttpResponseNotAllowed(["GET", "HEAD"])  # a page that only reads
            needed = right if request.method in SAFE_METHODS else to_write
            if not has_right(request.user, needed):
                raise PermissionDenied(f"your role may not do this ({needed.replace('_', ' ')})")
            return view(request, *args, **kwargs)

        wrapped.required_right = to_write  # type: ignore[attr-defined]
        return wrapped

    return decorator


def write_right_of(view_func: Callable) -> str | None:
    """The right a view names for writing: `required_right` of a DRF view or of a `require_right` page."""
    owner = getattr(view_func, "cls", None) or getattr(view_func, "view_class", None) or view_func
    return getattr(owner, "required_right", None)


class RolePermission(BasePermission):
    """DRF: reading needs a login (or the view's `read_right`); an unsafe method needs the view's
    `required_right`. A view that names none refuses every unsafe method: a new view can't forget.
    """

    message = "Your role may not do this."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        if request.method in SAFE_METHODS:
            return has_right(user, getattr(view, "read_right", READ))
        if not hasattr(view, request.method.lower()):
            return True  # DRF answers 405: the view writes nothing
        right = getattr(view, "required_right", None)
        return right is not None and has_right(user, right)


class WriteAccessMiddleware:
    """Refuse POST/PUT/PATCH/DELETE from a logged-in user who may not write anything (viewer).

    Put it after AuthenticationMiddleware. Anonymous requests pass through: the login
    middleware and DRF's authentication turn them away. Token-authenticated API calls are
    seen as anonymous here; `RolePermission` checks them in the view.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> HttpResponse | None:
        if request.method in SAFE_METHODS:
            return None
        user = getattr(request, "user", AnonymousUser())
        if not user.is_authenticated or can_write(user):
            return None
        match = request.resolver_match
        if match is not None and (match.url_name in ALWAYS_ALLOWED_URL_NAMES or match.app_name == "admin"):
            return None  # the admin checks staff status and model permissions itself
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": "Your role is read-only."}, status=403)
        raise PermissionDenied("your role is read-only")
