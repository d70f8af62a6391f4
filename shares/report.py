"""The report that travels: one HTML file with its styles, data and charts inside.

The share's own template renders it with `report` set: the stylesheets, plotly.js (our
partial bundle) and the drawing script are read from static/ and inlined, so the file
opened from disk asks no server for anything.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from shares import pages
from shares.models import Share

STATIC = Path(settings.STATICFILES_DIRS[0])  # static/, in the clone or the installed package
TEMPLATES: dict[str, str] = {
    Share.Kind.TRIAL: "shares/trial.html",
    Share.Kind.QC_ITEM: "shares/qc_item.html",
    Share.Kind.COMPARISON: "shares/comparison.html",
    Share.Kind.GRID: "shares/grid.html",
}


@cache
def _inlined(*names: str) -> SafeString:
    # Our own static files, read once; "</" is escaped so no file can close its <script> or <style> early.
    return mark_safe("\n".join((STATIC / n).read_text(encoding="utf-8").replace("</", "<\\/") for n in names))


def context(share: Share) -> dict:
    """The share's page context, with the whole trajectory (up to REPORT_STEPS) instead of one window."""
    if share.trial is not None:
        return pages.trial_context(share.trial, "#", None, None, None) | pages.report_steps(share.trial)
    if share.qc_item is not None:
        item = share.qc_item
        return pages.qc_item_context(item, "#", None, None, None) | pages.report_steps(item.trial)
    if share.kind == Share.Kind.COMPARISON:
        return pages.comparison_context(share, None)
    return pages.grid_context(share, None)


def download(share: Share) -> HttpResponse:
    body = render_to_string(
        TEMPLATES[share.kind],
        {
            "share": share,
            "report": True,
            "styles": _inlined("css/app.css", "css/comparisons.css", "css/shares.css"),
            "scripts": _inlined("plotly/plotly-benchviewer.min.js", "js/share.js"),
        }
        | context(share),
    )
    response = HttpResponse(body, content_type="text/html; charset=utf-8")
    name = f"benchviewer-{share.kind}-{share.trial_id or share.qc_item_id or 'report'}.html".replace("_", "-")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
