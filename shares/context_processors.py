"""`share_lifetimes` in every template: the expiry choices the Share control offers, the default marked."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from shares.services import DEFAULT_LIFETIME, LIFETIME_CHOICES


def share_lifetimes(request: HttpRequest) -> dict[str, Any]:
    """(days, words, chosen) for each choice; the API's default is the one chosen."""
    choices = [
        (days, "1 day" if days == 1 else f"{days} days", days == DEFAULT_LIFETIME.days) for days in LIFETIME_CHOICES
    ]
    return {"share_lifetimes": choices}
