"""The N-sides grid page and the trend page (their JSON: comparisons/families/api.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from html import escape
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import Count
from django.http import QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe

from comparisons.families.grid import get_or_compute_grid, grid_query, parse_grid, present_tasks
from comparisons.families.trend import get_or_compute_trend, parse_trend
from comparisons.models import GridResult
from comparisons.statistics.sides import Side, SideError, trials_of
from trials.models import Configuration, Dataset, Job, Trial
from trials.thresholds import datasets_of, pass_rule

TASK_PAGE_SIZE = 100
SIDE_SORTS = {"side": "label", "mean": "mean_reward", "delta": "delta_vs_reference", "p": "mcnemar_p_holm"}


def _datasets_of(column: str) -> dict[int, list[dict[str, Any]]]:
    """For each configuration (or job): the datasets its trials ran on, with their counts. One query."""
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = (
        Trial.objects.order_by()
        .exclude(**{column: None})
        .values_list(column, "dataset__name", "dataset__version")
        .annotate(n=Count("*"))
    )
    for pk, name, version, n in rows:
        found[pk].append({"name": f"{name}@{version}" if version else (name or "(no dataset)"), "n": n})
    return found


def _picker(kind: str) -> list[Any]:
    column, rows = (
        ("configuration_id", Configuration.objects.order_by("key"))
        if kind == "configuration"
        else ("job_id", Job.objects.for_list().order_by("-created_at"))
    )
    datasets = _datasets_of(column)
    picked = list(rows.filter(pk__in=list(datasets)))
    for row in picked:
        row.datasets = datasets[row.pk]
        row.n_trials = sum(d["n"] for d in row.datasets)
    return picked


def _grid_params(get: QueryDict) -> QueryDict:
    """The picker's checkboxes (`side`, `side_job`) and radios, read as the API's parameters."""
    params = get.copy()
    if get.getlist("side"):
        params["sides"] = ",".join(get.getlist("side"))
    elif get.getlist("side_job"):
        params["side_jobs"] = ",".join(get.getlist("side_job"))
        params["reference"] = get.get("reference_job", "")
    return params


def _cell_class(mean: float | None) -> str:
    if mean is None or not 0 <= mean <= 1:
        return ""
    return f"heat-{min(4, int(mean * 5))}"


def _cell_html(cell: dict[str, Any]) -> str:
    """One grid cell as HTML: 10 sides x 100 tasks a page, where the template engine's
    lookups and filters cost about 0.3 s, format_html 0.08 s. Everything in it is a number
    formatted here but the link, which is escaped."""
    if not cell["n"]:
        return '<td><span class="muted">—</span></td>'
    mean = "—" if cell["mean_reward"] is None else f"{cell['mean_reward']:.3f}"
    detail = f"{cell['passes']}/{cell['decided']}"
    detail += f" · {cell['unscored']} unscored" if cell.get("unscored") else ""
    detail += f" · {cell['infra']} infra" if cell.get("infra") else ""
    detail += " · ⚑" if cell.get("ended_with_reward") else ""
    detail += "" if cell["cost_usd"] is None else f" · ${cell['cost_usd']:.3f}"
    return (
        f'<td class="{_cell_class(cell["mean_reward"])}"><a class="cell-link" href="{escape(cell["url"])}" '
        f'title="{cell["n"]} attempt(s): mean of the scored ones, passed / decided'
        f'{"; ⚑ a run that did not end normally still has a reward" if cell.get("ended_with_reward") else ""}">'
        f"{mean} <small>{detail}</small></a></td>"
    )


def _task_rows(request, stored: GridResult, query: str) -> dict[str, Any]:
    """The task grid: sorted by task or by one side's mean (`?sort=side-<id>`), 100 tasks a page
    (only the page's rows are decoded: GridResult.task_rows)."""
    result = stored.result
    sort = request.GET.get("sort", "task")
    ids = [s["id"] for s in result["sides"]]
    means = result["task_means"]
    rows = list(range(result["task_count"]))
    key = sort.lstrip("-")
    if sort.startswith("-"):
        rows.reverse()
    if key.startswith("side-") and key[5:].isdigit() and int(key[5:]) in ids:
        at = ids.index(int(key[5:]))
        rows.sort(key=lambda r: means[r][at] or 0.0, reverse=sort.startswith("-"))
        rows.sort(key=lambda r: means[r][at] is None)  # stable: tasks the side lacks last
    page: Any = Paginator(rows, TASK_PAGE_SIZE).get_page(request.GET.get("page"))
    page.object_list = present_tasks(result, stored.task_rows(list(page.object_list)))
    for row in page.object_list:
        # Safe: _cell_html escapes the link, and the rest is numbers it formats.
        row["cells_html"] = mark_safe("".join(_cell_html(cell) for cell in row["cells"]))
    columns = []
    for side in result["sides"]:
        best_first = f"-side-{side['id']}"  # the first click; the next, worst first
        columns.append({"side": side, "link": f"?{query}&sort={best_first[1:] if sort == best_first else best_first}"})
    task_link = f"?{query}&sort={'-task' if sort == 'task' else 'task'}"
    return {"page": page, "sort": sort, "columns": columns, "task_link": task_link}


def _side_rows(request, result: dict[str, Any], query: str) -> dict[str, Any]:
    sort = request.GET.get("side_sort", "")
    sides = list(result["sides"])
    if sort.lstrip("-") in SIDE_SORTS:
        field = SIDE_SORTS[sort.lstrip("-")]
        sides.sort(key=lambda s: s[field].lower() if field == "label" else s[field] or 0.0, reverse=sort[0] == "-")
        sides.sort(key=lambda s: s[field] is None)  # stable: sides without the figure last, either way
    reference_url = next(s["trials_url"] for s in sides if s["is_reference"])
    for side in sides:
        delta, ci = side["delta_vs_reference"], side["delta_ci95"]
        side["delta_text"] = "" if delta is None else f"{delta:+.3f}"
        side["delta_ci_text"] = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
        side["reference_trials_url"] = reference_url  # a difference opens both sides' trials
    links = {k: f"?{query}&side_sort={'-' + k if sort == k else k}" for k in SIDE_SORTS}
    holm = sum(1 for s in sides if s["mcnemar_p"] is not None) >= 2
    return {"rows": sides, "links": links, "holm": holm}


@require_safe
def grid_page(request):
    """The picker (no sides yet, `?pick=1`, or a bad choice), else the grid. The picker reads every
    trial's configuration and dataset, so a page showing a grid leaves it out and links to it."""
    params = _grid_params(request.GET)
    context: dict[str, Any] = {}
    if not (params.get("sides") or params.get("side_jobs")):
        return render(request, "comparisons/grid.html", _with_picker(context))
    try:
        sides, reference = parse_grid(params)
    except SideError as exc:
        context["error"] = str(exc)
        return render(request, "comparisons/grid.html", _with_picker(context), status=400)
    context.update({"chosen": {s.id for s in sides}, "reference": reference})
    if params.get("pick"):
        return render(request, "comparisons/grid.html", _with_picker(context))
    stored = get_or_compute_grid(sides, reference)
    result = stored.result
    reference = Side(sides[0].kind, result["reference"])  # (the default one, when none was named)
    context["reference"] = reference
    query = urlencode(grid_query(sides, reference))
    for side, row in zip(sides, result["sides"], strict=True):
        row["reference_link"] = "?" + urlencode(grid_query(sides, side))  # "make this the reference"
    context.update(
        {
            "result": result,
            "query": query,
            "reference_label": next(s["label"] for s in result["sides"] if s["is_reference"]),
            "side_table": _side_rows(request, result, query),
            "tasks": _task_rows(request, stored, query),
            "chart_url": f"{reverse('api-comparison-grid-chart')}?{query}",
            "api_url": f"{reverse('api-comparison-grid')}?{query}",
            "share_json": json.dumps({"comparison": grid_query(sides, reference)}),  # the Share button's body
            "pass_rule": pass_rule(datasets_of(trials_of(sides))),
        }
    )
    return render(request, "comparisons/grid.html", context)


def _with_picker(context: dict[str, Any]) -> dict[str, Any]:
    return {**context, "picker": True, "configurations": _picker("configuration"), "jobs": _picker("job")}


@require_safe
def trend_page(request):
    datasets = list(Dataset.objects.annotate(n=Count("trial")).filter(n__gt=0).order_by("name", "version"))
    context: dict[str, Any] = {"datasets": datasets, "chosen": request.GET.get("dataset", "")}
    params = request.GET.copy()
    if request.GET.getlist("configuration"):
        params["configurations"] = ",".join(request.GET.getlist("configuration"))
    if not params.get("dataset"):
        return render(request, "comparisons/trend.html", context)
    try:
        dataset, configurations = parse_trend(params)
    except SideError as exc:
        context["error"] = str(exc)
        return render(request, "comparisons/trend.html", context, status=400)
    query = {"dataset": dataset.pk, **({"configurations": params["configurations"]} if configurations else {})}
    on_dataset = Trial.objects.filter(dataset=dataset).order_by().values("configuration_id").distinct()
    context.update(
        {
            "dataset": dataset,
            "chosen": str(dataset.pk),
            "trend": get_or_compute_trend(dataset, configurations),
            "pass_rule": pass_rule([dataset]),
            "family": Configuration.objects.filter(pk__in=on_dataset).order_by("key"),
            "picked": set(configurations or []),
            "chart_url": f"{reverse('api-comparison-trend-chart')}?{urlencode(query)}",
            "api_url": f"{reverse('api-comparison-trend')}?{urlencode(query)}",
        }
    )
    return render(request, "comparisons/trend.html", context)
