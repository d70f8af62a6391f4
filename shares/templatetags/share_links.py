"""`{% share_lifetimes %}`: the expiry choices the Share control offers, with the default marked."""

from __future__ import annotations

from django import template

from shares.services import DEFAULT_LIFETIME, LIFETIME_CHOICES

register = template.Library()


@register.simple_tag
def share_lifetimes() -> list[tuple[int, str, bool]]:
    """(days, words, chosen) for each choice; the API's default is the one chosen."""
    return [
        (days, "1 day" if days == 1 else f"{days} days", days == DEFAULT_LIFETIME.days) for days in LIFETIME_CHOICES
    ]
