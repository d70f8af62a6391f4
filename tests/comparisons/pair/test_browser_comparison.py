"""The comparison page in a real browser: charts render from our own plotly.js, cells lead to trials."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from django.contrib.auth import get_user_model

from tests.builders import build_side

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHARTS = ("reward_delta", "heatmap", "distribution", "cost_reward", "pass_rate")


@pytest.fixture
def browser_page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(20_000)
    yield page
    page.close()


def _login(page, base_url: str) -> None:
    get_user_model().objects.create_user("pm", password="pw-browser-1")
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", "pm")
    page.fill("input[name=password]", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/(?!accounts/login).*"))


def test_the_comparison_page_renders_its_charts_and_a_cell_opens_its_trials(live_server, browser_page):
    page = browser_page
    base = build_side("baseline-v1", {f"task-{i:02d}": [0.0 if i % 3 else 1.0, 1.0] for i in range(8)}, role="baseline")
    cand = build_side(
        "candidate-v2",
        {f"task-{i:02d}": [1.0, 1.0 if i % 4 else 0.0] for i in range(8)},
        role="candidate",
        trial_kwargs={"cost_usd": 0.2},
    )
    scripts: list[str] = []
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
    _login(page, live_server.url)

    page.goto(f"{live_server.url}/comparisons/?baseline={base.pk}&candidate={cand.pk}")
    for chart in CHARTS:
        page.locator(f"#chart-{chart}").scroll_into_view_if_needed()  # charts are drawn as they near the viewport
        page.wait_for_selector(f"#chart-{chart} .main-svg", state="attached")
    assert page.locator(".chart .main-svg").count() >= len(CHARTS)
    assert page.text_content("#decision .value").strip() in {"promote", "hold", "revert"}

    plotly = [u for u in scripts if u.endswith("plotly-benchviewer.min.js")]
    assert plotly == [f"{live_server.url}/static/plotly/plotly-benchviewer.min.js"]
    assert all(urlparse(u).netloc == urlparse(live_server.url).netloc for u in scripts)

    # Follow the candidate cell of one task to the trials list, filtered to that task.
    page.click(f'#matrix a.cell-link[href="/trials/?configuration={cand.pk}&task=task-03"]')
    page.wait_for_url(re.compile(r".*/trials/\?configuration=\d+&task=task-03$"))
    tasks_shown = page.locator("table.trial-rows tbody tr td.task").all_text_contents()
    assert tasks_shown and set(tasks_shown) == {"task-03"}
    assert len(tasks_shown) == cand.trials.filter(task__name="task-03").count()


# Each chart's id, whether it lies over 200 px below the viewport, and whether it is drawn.
CHART_STATES_JS = """() => Array.from(document.querySelectorAll("[data-chart-url]")).map((el) => ({
  id: el.id,
  far: el.getBoundingClientRect().top > window.innerHeight + 200,
  drawn: el.querySelector(".main-svg") !== null,
}))"""


def test_charts_far_below_the_viewport_are_drawn_only_when_scrolled_near(live_server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 600})
    page.set_default_timeout(20_000)
    base = build_side("baseline-v1", {"t1": [0.0, 1.0], "t2": [1.0, 1.0]}, role="baseline")
    cand = build_side("candidate-v2", {"t1": [1.0, 1.0], "t2": [0.0, 1.0]}, role="candidate")
    _login(page, live_server.url)
    page.goto(f"{live_server.url}/comparisons/?baseline={base.pk}&candidate={cand.pk}", wait_until="networkidle")
    page.locator(f"#chart-{CHARTS[0]}").scroll_into_view_if_needed()
    page.wait_for_selector(f"#chart-{CHARTS[0]} .main-svg", state="attached")  # plotly.js ran, figures came

    far = [chart for chart in page.evaluate(CHART_STATES_JS) if chart["far"]]
    assert far, "the test needs a chart well below the viewport"
    assert not any(chart["drawn"] for chart in far)
    for chart in far:
        page.locator(f"#{chart['id']}").scroll_into_view_if_needed()
        page.wait_for_selector(f"#{chart['id']} .main-svg", state="attached")
    page.close()


def test_clicking_a_bar_opens_the_trials_behind_it(live_server, browser_page):
    page = browser_page
    base = build_side("baseline-v1", {"only-task": [0.0, 0.0]}, role="baseline")
    cand = build_side("candidate-v2", {"only-task": [1.0, 1.0]}, role="candidate")
    _login(page, live_server.url)
    page.goto(f"{live_server.url}/comparisons/?baseline={base.pk}&candidate={cand.pk}")
    page.locator("#chart-reward_delta").scroll_into_view_if_needed()  # drawn as it nears the viewport
    page.wait_for_selector("#chart-reward_delta .main-svg", state="attached")
    bar = page.locator("#chart-reward_delta g.point path").first
    bar.wait_for(state="attached")
    bar.scroll_into_view_if_needed()  # mouse events only reach what is in the viewport
    box = bar.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)  # Plotly finds the clicked point from the hover it computed
    page.wait_for_selector("#chart-reward_delta .hovertext", state="attached")
    assert "only-task" in page.text_content("#chart-reward_delta .hovertext")
    page.mouse.click(x, y)
    page.wait_for_url(re.compile(rf".*/trials/\?configuration={cand.pk}&task=only-task$"))


TICKS_INSIDE_JS = """(id) => {
  const svg = document.querySelector(`#${id} .main-svg`).getBoundingClientRect();
  return [...document.querySelectorAll(`#${id} .xtick text`)].map((t) => {
    const r = t.getBoundingClientRect();
    const inside = r.left >= svg.left - 1 && r.right <= svg.right + 1 && r.bottom <= svg.bottom + 1;
    return {text: t.textContent, inside};
  });
}"""


@pytest.mark.parametrize("width,height", [(1280, 800), (1440, 900)])
def test_side_names_on_the_side_charts_read_apart_inside_the_chart(live_server, browser, width, height):
    # Keys that differ only at their end, as the TB1 submissions do (..._claude-4-sonnet / ..._claude-4-1-opus),
    # beside 80 long task names, as a TB1 run's, that widen the heatmap's left margin.
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(20_000)
    keys = ("20250923_droid_claude-4-sonnet", "20250923_droid_claude-4-1-opus")
    tasks = [f"decommissioning-service-with-sensitive-data-{i}" for i in range(80)]
    base = build_side(keys[0], {t: [float(i % 2)] for i, t in enumerate(tasks)}, role="baseline")
    cand = build_side(keys[1], {t: [1.0] for t in tasks}, role="candidate")
    _login(page, live_server.url)
    page.goto(f"{live_server.url}/comparisons/?baseline={base.pk}&candidate={cand.pk}", wait_until="networkidle")
    for chart in ("heatmap", "distribution", "pass_rate"):
        page.locator(f"#chart-{chart}").scroll_into_view_if_needed()
        page.wait_for_selector(f"#chart-{chart} .xtick text", state="attached")
        ticks = page.evaluate(TICKS_INSIDE_JS, f"chart-{chart}")
        # (their shared head, "20250923_droid_", is said once, as the axis's title)
        assert [t["text"] for t in ticks] == ["…claude-4-sonnet", "…claude-4-1-opus"], chart
        assert all(t["inside"] for t in ticks), (chart, ticks)
        assert page.text_content(f"#chart-{chart} .xtitle") == "20250923_droid_…", chart
    page.close()


# A chart's card and its drawing: how tall each is, and the task ticks drawn with their text.
CARD_FIT_JS = """([id, ticksOf]) => {
  const chart = document.getElementById(id);
  const card = chart.closest("figure").getBoundingClientRect();
  const svg = chart.querySelector(".main-svg").getBoundingClientRect();
  const ticks = [...chart.querySelectorAll(ticksOf)];
  const inside = (t) => {
    const r = t.getBoundingClientRect();
    return r.left >= svg.left - 1 && r.right <= svg.right + 1 && r.bottom <= svg.bottom + 1;
  };
  return {card: card.height, svg: svg.height, ticks: ticks.map((t) => t.textContent), inside: ticks.every(inside)};
}"""


@pytest.mark.parametrize("width,height", [(1280, 800), (1440, 900)])
def test_the_delta_chart_fills_its_card_and_ticks_every_task_by_both_ends(live_server, browser, width, height):
    # 80 tasks, as a TB1 run, whose long names differ only at their end.
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(20_000)
    tasks = [f"decommissioning-service-with-sensitive-data-{i:02d}" for i in range(80)]
    base = build_side("baseline-v1", {t: [float(i % 2)] for i, t in enumerate(tasks)}, role="baseline")
    cand = build_side("candidate-v2", {t: [1.0] for t in tasks}, role="candidate")
    _login(page, live_server.url)
    page.goto(f"{live_server.url}/comparisons/?baseline={base.pk}&candidate={cand.pk}", wait_until="networkidle")
    for chart, axis in (("reward_delta", ".xtick text"), ("heatmap", ".ytick text")):
        page.locator(f"#chart-{chart}").scroll_into_view_if_needed()
        page.wait_for_selector(f"#chart-{chart} .main-svg", state="attached")
        fit = page.evaluate(CARD_FIT_JS, [f"chart-{chart}", axis])
        assert fit["card"] - fit["svg"] < 90, (chart, fit["card"], fit["svg"])  # the chart, its caption, padding
        assert sorted(fit["ticks"]) == [f"{t[:12]}…{t[-13:]}" for t in tasks] == sorted(set(fit["ticks"])), chart
        assert fit["inside"], chart
    page.close()
