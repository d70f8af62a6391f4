"""`{% saved_queries_box %}`: the trial list's saved queries of the user, and the form that saves one."""

from __future__ import annotations

from django import template

from trials.models import SavedQuery

register = template.Library()


@register.inclusion_tag("trials/_saved_queries.html", takes_context=True)
def saved_queries_box(context) -> dict:
    request = context["request"]
    return {
        "saved": SavedQuery.objects.filter(user=request.user) if request.user.is_authenticated else [],
        "current": request.GET.get("q", "").strip(),
        "back": request.get_full_path(),
    }
