"""The one-time sign-in link `benchviewer view` prints, the way Jupyter prints its token.

The token lives in the memory of the process that printed it, never in the database or a
file: the link signs its person in once, and is useless once used or once that process has
ended (another process, `benchviewer serve` say, holds no token and answers 404).
"""

from __future__ import annotations

import secrets
import threading

from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET

_held: dict[str, int] = {}  # token -> the pk of the user it signs in
_lock = threading.Lock()


def issue(user_pk: int) -> str:
    """A new token for this process: the path of the link that signs `user_pk` in once."""
    token = secrets.token_urlsafe(32)
    with _lock:
        _held[token] = user_pk
    return token


def redeem(token: str) -> int | None:
    """The user the token signs in, and the token gone; None for a token this process does not hold."""
    with _lock:
        for held in list(_held):
            if secrets.compare_digest(held, token):
                return _held.pop(held)
    return None


@login_not_required  # the token is the credential
@require_GET
def sign_in(request: HttpRequest, token: str) -> HttpResponse:
    user_pk = redeem(token)
    if user_pk is None:
        raise Http404("no such sign-in link (each works once, while its benchviewer view runs)")
    user = get_user_model().objects.get(pk=user_pk)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    target = request.GET.get("next", "")  # where `benchviewer view` opens the browser: a page of this site only
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=False):
        return redirect(target)
    return redirect("home")
