"""What a share shows: the trial page's and the comparison page's own renderers, read-only.

Each builder returns a template context. The visitor's links stay inside the share: step
permalinks and pages of steps point at the share's address, everything else is plain text.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from django.core.paginator import Paginator
from django.http import Http404, QueryDict
from django.urls import reverse

from comparisons import services
from comparisons.computing.cache import points_for
from comparisons.families import charts as family_charts
from comparisons.families.grid import get_or_compute_grid, parse_grid, present_tasks
from comparisons.models import Comparison
from comparisons.pair import charts
from comparisons.pair.figures import figure_links, missing_linked, risks_linked
from comparisons.pair.table import headline_numbers, metric_rows
from comparisons.pair.views import CHART_TITLES, _matrix
from comparisons.statistics.sides import parse_sides, trials_of
from shares.models import Share
from shares.services import comparison_query
from trials.models import QCItem, Step, Trial
from trials.reading import steps, tabs
from trials.thresholds import datasets_of, pass_rule
from trials.triage.evidence_links import evidence_links

GRID_TASKS = 100
REPORT_STEPS = 1_000  # a trial report holds its first 1,000 steps and says how many it leaves out


def _no_link(pk: int) -> str:
    return ""  # a chart point opens nothing for a visitor: the trials behind it are not shared


def trial_context(
    trial: Trial, base: str, wanted_t: str | None, number: int | None, page: str | None
) -> dict[str, Any]:
    """The trial page's header facts and a window of its trajectory, permalinks within the share at `base`."""
    trajectories = list(trial.trajectories.order_by("position", "pk"))
    trajectory = steps.pick_trajectory(trial, trajectories, wanted_t)
    context: dict[str, Any] = {
        "trial": trial,
        "trajectories": trajectories,
        "trajectory": trajectory,
        "facts": tabs.header_facts(trial, trajectories),
        "completeness": tabs.trial_completeness(trial),
        "focus": number,
    }
    if trajectory is None:
        return context
    main = steps.main_trajectory(trial, trajectories)
    if number is not None:
        if number < 1 or number > max(trajectory.step_count, 1):
            raise Http404("no such step")
        start = steps.window_start(number)
    else:
        last = steps.window_start(max(trajectory.step_count, 1))
        start = min((steps.requested_page(page) - 1) * steps.STEP_WINDOW, last)
    window = steps.step_window(trial, trajectory, start, trajectories)
    suffix = "" if trajectory == main else f"?t={trajectory.pk}"
    _within(window.steps, base, suffix)
    context |= {"window": window, "t_query": suffix, "is_main": trajectory == main}
    return context


def _within(step_views: list, base: str, suffix: str) -> None:
    for view in step_views:
        view.permalink = f"{base}steps/{view.number}/{suffix}"
        view.images = []  # the pack's media are served to signed-in users only


def report_steps(trial: Trial) -> dict[str, Any]:
    """The main trajectory's first REPORT_STEPS steps, window by window, anchored in the file itself."""
    trajectories = list(trial.trajectories.order_by("position", "pk"))
    main = steps.main_trajectory(trial, trajectories)
    if main is None:
        return {"report_steps": [], "left_out": 0}
    shown: list = []
    for start in range(0, min(main.step_count, REPORT_STEPS), steps.STEP_WINDOW):
        shown += steps.step_window(trial, main, start, trajectories).steps
    shown = shown[:REPORT_STEPS]
    for view in shown:
        view.permalink = f"#step-{view.number}"
        view.images = []
    return {"report_steps": shown, "left_out": max(0, main.step_count - len(shown)), "report_trajectory": main}


def qc_item_context(
    item: QCItem, base: str, wanted_t: str | None, number: int | None, page: str | None
) -> dict[str, Any]:
    """The item's facts and evidence, and its trial opened at the step it cites."""
    evidence = evidence_links(item.trial, item.evidence_refs, item.step_id)
    if number is None and page is None and item.step_id:
        cited = Step.objects.filter(trial=item.trial, step_id=item.step_id).order_by("trajectory__position").first()
        number = cited.index + 1 if cited else None
        wanted_t = str(cited.trajectory_id) if cited else wanted_t
    return {"item": item, "evidence": evidence} | trial_context(item.trial, base, wanted_t, number, page)


def comparison_context(share: Share, request: Any | None) -> dict[str, Any]:
    """The comparison page's decision, CIs, figures, per-task table and charts (figures inline)."""
    baseline, candidate = parse_sides(comparison_query(share.params))
    comparison = services.get_or_compute(baseline, candidate)
    if comparison.status != Comparison.Status.DONE or not comparison.result:
        return {"comparison_row": comparison}
    result = comparison.result
    query = ""
    figures = [
        {
            "name": name,
            "id": f"figure-{name}",
            "title": title,
            "figure": charts.build(name, result, points_for(comparison) if name == "cost_reward" else {}, _no_link),
        }
        for name, title in CHART_TITLES.items()
        if result["comparison"]["valid"] or name != "reward_delta"
    ]
    matrix = _matrix(request or SimpleNamespace(GET=QueryDict()), result, query)
    links = figure_links(result, query)  # the page's own; the share's template makes them plain text (`unlinked`)
    return {
        "comparison_row": comparison,
        "result": result,
        "c": result["comparison"],
        "numbers": headline_numbers(result),
        "links": links,
        "missing": missing_linked(result["comparison"], links),
        "risks": risks_linked(result["comparison"], links),
        "metrics": metric_rows(result, links),
        # the page's own sorts and pages of tasks: its links are relative ("?sort=…"), so they stay in the share
        "matrix": matrix,
        "matrix_rows": matrix["page"] if request is not None else result["tasks"],  # a report holds every task
        "figures": figures,
        "pass_rule": pass_rule(datasets_of(trials_of([baseline, candidate]))),  # (stated as the page states it)
    }


def grid_context(share: Share, page: str | None) -> dict[str, Any]:
    sides, reference = parse_grid(comparison_query(share.params))
    stored = get_or_compute_grid(sides, reference)
    result = stored.result
    figure = family_charts.grid_sides(result)
    tasks = Paginator(range(result["task_count"]), GRID_TASKS).get_page(page)
    return {
        "grid": result,
        "grid_page": tasks,
        "grid_tasks": present_tasks(result, stored.task_rows(list(tasks.object_list))),  # (only the page decoded)
        "figures": [{"name": "grid", "id": "figure-grid", "title": "Mean reward per side, CI95", "figure": figure}],
        "pass_rule": pass_rule(datasets_of(trials_of(sides))),
    }


def share_base(token: str) -> str:
    return reverse("share", args=[token])
