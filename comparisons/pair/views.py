"""The comparison page: picker, headline numbers, validity, decision, matrix, charts.

The page loads static/js/comparison.js, which asks for every chart's figure at once and adds
plotly.js after the load event (`data-plotly-src`), so the first screen is not held; a chart is
drawn when it comes within 200 px of the viewport. plotly.js is our partial bundle of the traces
charts.py draws (scripts/plotly/build.sh), sent brotli or gzip by WhiteNoise. Every comparison
page (pair, grid, trend, saved) starts with the same tabs, templates/comparisons/_views.html.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from comparisons import services
from comparisons.models import Comparison, SavedComparison
from comparisons.pair import charts, figures, saved
from comparisons.pair.table import headline_numbers, metric_rows
from comparisons.statistics.sides import SideError, parse_sides, trials_of
from core import roles
from trials.models import Configuration, Job, Trial
from trials.thresholds import datasets_of, pass_rule

MATRIX_PAGE_SIZE = 100
OUTCOME_ORDER = {"regressed": 0, "flipped": 1, "improved": 2, "unchanged": 3, "no reward": 4}
SORTS = {
    "task": lambda r: r["task"],
    "delta": lambda r: (r["delta"] is None, r["delta"] or 0.0),
    "outcome": lambda r: (OUTCOME_ORDER.get(r["outcome"], 9), r["task"]),
    "baseline": lambda r: (_side_mean(r["baseline"]) is None, _side_mean(r["baseline"]) or 0.0),
    "candidate": lambda r: (_side_mean(r["candidate"]) is None, _side_mean(r["candidate"]) or 0.0),
}
CHART_TITLES = {
    "reward_delta": "Reward delta per task",
    "heatmap": "Task × side heatmap",
    "distribution": "Reward distribution",
    "cost_reward": "Cost vs reward",
    "pass_rate": "Pass rate with intervals",
}


def _side_mean(side: dict[str, Any] | None) -> float | None:
    return side["mean"] if side else None


def _matrix(request, result: dict[str, Any], query: str) -> dict[str, Any]:
    sort = request.GET.get("sort", "delta")
    key = sort.lstrip("-")
    rows = list(result["tasks"])
    outcome = request.GET.get("outcome", "")
    if outcome:
        rows = [r for r in rows if r["outcome"] == outcome]
    flip = request.GET.get("flip", "")
    if flip in figures.FLIPS:
        rows = [r for r in rows if r["flip"] == figures.FLIPS[flip]]
    tasks = request.GET.get("tasks", "")
    if tasks in figures.TASK_SETS:
        rows = [r for r in rows if figures.TASK_SETS[tasks][1](r)]
    if key in SORTS:
        rows.sort(key=SORTS[key], reverse=sort.startswith("-"))
    page = Paginator(rows, MATRIX_PAGE_SIZE).get_page(request.GET.get("page"))
    base_query = f"{query}&outcome={outcome}" if outcome else query
    if flip in figures.FLIPS:
        base_query += f"&flip={flip}"
    if tasks in figures.TASK_SETS:
        base_query += f"&tasks={tasks}"
    links = {k: f"?{base_query}&sort={'-' + k if sort == k else k}" for k in SORTS}
    return {
        "page": page,
        "sort": sort,
        "sort_links": links,
        "outcome": outcome,
        "flip": figures.FLIPS.get(flip, ""),
        "tasks": figures.TASK_SETS[tasks][0] if tasks in figures.TASK_SETS else "",
        "count": len(rows),
        "query": base_query,
    }


def _choices() -> dict[str, Any]:
    """The configurations and jobs that have trials, each with its count of them."""
    return {
        "configurations": _with_trial_counts(Configuration.objects.order_by("role", "key"), "configuration"),
        "jobs": _with_trial_counts(Job.objects.for_list().order_by("-created_at"), "job"),
    }


def _with_trial_counts(rows, field: str) -> list:
    # COUNT(*) grouped by the trial table's own column: PostgreSQL can answer it from that
    # column's index alone, where a join of every trial to its row reads the whole (wide) table.
    counts = dict(Trial.objects.order_by().values_list(field).annotate(n=Count("*")))
    found = list(rows.filter(pk__in=[pk for pk in counts if pk is not None]))
    for row in found:
        row.n_trials = counts[row.pk]
    return found


def _defaults(request, choices: dict[str, Any]) -> dict[str, str]:
    """Preselect the configurations whose role says baseline / candidate: of each, the one with most trials."""
    chosen = {k: request.GET.get(k, "") for k in ("baseline", "candidate", "baseline_job", "candidate_job")}
    if not any(chosen.values()):
        for conf in sorted(choices["configurations"], key=lambda c: -c.n_trials):
            if conf.role in ("baseline", "candidate") and not chosen[conf.role]:
                chosen[conf.role] = str(conf.pk)
    return chosen


@require_safe
def comparison_page(request):
    choices = _choices()
    context: dict[str, Any] = {
        **choices,
        "chosen": _defaults(request, choices),
        "charts": [],
        "pass_rule": pass_rule([]),
    }
    if not any(request.GET.get(k) for k in ("baseline", "candidate", "baseline_job", "candidate_job")):
        return render(request, "comparisons/comparison.html", context)
    try:
        baseline, candidate = parse_sides(request.GET)
    except SideError as exc:
        context["error"] = str(exc)
        return render(request, "comparisons/comparison.html", context, status=400)
    try:
        comparison = services.get_or_compute(baseline, candidate)
    except services.BrokerUnreachable:
        context["broker_unreachable"] = True
        return render(request, "comparisons/comparison.html", context, status=503)
    query = urlencode({**baseline.query("baseline"), **candidate.query("candidate")})
    rule = pass_rule(datasets_of(trials_of([baseline, candidate])))
    context.update({"comparison_row": comparison, "query": query, "pass_rule": rule})
    if comparison.status == Comparison.Status.DONE and comparison.result:
        result = comparison.result
        chart_base = reverse("api-comparison-chart", args=["_"])[:-2]
        links = figures.figure_links(result, query)
        context.update(
            {
                "result": result,
                "c": result["comparison"],
                "numbers": headline_numbers(result),
                "metrics": metric_rows(result, links),
                "matrix": _matrix(request, result, query),
                "links": links,
                "missing": figures.missing_linked(result["comparison"], links),
                "risks": figures.risks_linked(result["comparison"], links),
                # A delta of an invalid comparison is shown only in the "not comparable" box.
                "charts": [
                    {"name": name, "title": CHART_TITLES[name], "url": f"{chart_base}{name}/?{query}"}
                    for name in charts.CHARTS
                    if result["comparison"]["valid"] or name != "reward_delta"
                ],
                "saved": SavedComparison.objects.filter(comparison=comparison)[:10],
                "agentv_outcome": request.GET.get("agentv", ""),
                "agentv_rows": figures.agentv_rows(result, request.GET.get("agentv", "")) if "agentv" in result else [],
                "api_url": f"{reverse('api-comparison')}?{query}",
                "share_json": json.dumps({"comparison": dict(parse_qsl(query))}),  # the Share button's body
            }
        )
    return render(request, "comparisons/comparison.html", context)


@require_POST
@roles.require_right(roles.SAVE_COMPARISON)
def save_comparison(request):
    try:
        baseline, candidate = parse_sides(request.POST)
    except SideError as exc:
        messages.error(request, str(exc))
        return redirect("comparison")
    try:
        comparison = services.get_or_compute(baseline, candidate)
    except services.BrokerUnreachable:
        messages.error(
            request, "The task broker is unreachable: the comparison cannot be computed now. Try again later."
        )
        return redirect(f"{reverse('comparison')}?{request.POST.urlencode()}")
    query = urlencode({**baseline.query("baseline"), **candidate.query("candidate")})
    if comparison.status != Comparison.Status.DONE:
        messages.error(request, "The comparison is still being computed; save it when it is ready.")
    else:
        recorded = services.save_comparison(comparison, request.user)
        messages.success(request, f"Saved as event {recorded.event_id}.")
    return redirect(f"{reverse('comparison')}?{query}")


P0_PAGE_SIZE = 200
SAVED_PAGE_SIZE = 50


@require_safe
def p0_regressions_page(request):
    """What the candidate's P0 QC gate regression count adds up: its QC items and trials."""
    try:
        baseline, candidate = parse_sides(request.GET)
    except SideError as exc:
        return render(request, "comparisons/p0.html", {"error": str(exc)}, status=400)
    items, trials = figures.p0_regressions(candidate)
    item_page = Paginator(items, P0_PAGE_SIZE).get_page(request.GET.get("page"))
    query = urlencode({**baseline.query("baseline"), **candidate.query("candidate")})
    context = {
        "candidate_label": candidate.label(),
        "candidate_trials_url": candidate.trials_url(),
        "items": item_page,
        "trials": trials,
        "total": item_page.paginator.count + sum(n for _, n in trials),
        "comparison_url": f"{reverse('comparison')}?{query}",
    }
    return render(request, "comparisons/p0.html", context)


@require_safe
def saved_list_page(request):
    page = Paginator(saved.saved_list(), SAVED_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [saved.side_summary(s) for s in page]
    return render(request, "comparisons/saved_list.html", {"page": page, "rows": rows})


@require_safe
def saved_detail_page(request, pk: int):
    """A saved comparison as saved (its event) and as it stands now, with what changed since."""
    row = get_object_or_404(SavedComparison.objects.select_related("created_by", "comparison"), pk=pk)
    context: dict[str, Any] = {"saved": row, "summary": saved.side_summary(row), "then": row.event["comparison"]}
    context["then_rows"] = saved.figures(context["then"])
    sides = saved.sides_of(row)
    if sides is None:
        context["now_missing"] = "its sides no longer exist"
        return render(request, "comparisons/saved_detail.html", context)
    try:
        now = services.get_or_compute(*sides)
    except services.BrokerUnreachable:
        context["now_missing"] = "the task broker is unreachable; reload in a minute"
        return render(request, "comparisons/saved_detail.html", context, status=503)
    if now.status == Comparison.Status.DONE and now.result:
        context["changes"] = [
            {**change, **{when: saved.shown(change[when], change["figure"]) for when in ("saved", "now")}}
            for change in saved.changes(context["then"], now.result["comparison"])
        ]
    else:
        context["now_missing"] = f"the comparison is being computed ({now.status}); this page reloads by itself"
        context["pending"] = now.status != Comparison.Status.FAILED
    return render(request, "comparisons/saved_detail.html", context)
