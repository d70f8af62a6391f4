"""The grid and trend pages in a real browser: their charts draw, a cell and a point open trials."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model

from tests.builders import REFERENCE, build_side, import_path
from trials.models import Configuration

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def browser_page(browser, live_server):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(20_000)
    get_user_model().objects.create_user("pm", password="pw-browser-1")
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "pm")
    page.fill("input[name=password]", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/(?!accounts/login).*"))
    yield page
    page.close()


def _click_first_point(page, chart: str) -> None:
    point = page.locator(f"#{chart} g.points path.point").first  # scatter markers
    point.wait_for(state="attached")
    point.scroll_into_view_if_needed()  # mouse events only reach what is in the viewport
    box = point.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)  # Plotly finds the clicked point from the hover it computed
    page.wait_for_selector(f"#{chart} .hovertext", state="attached")
    page.mouse.click(x, y)


def test_picking_three_sides_shows_the_grid_and_a_cell_opens_its_trials(live_server, browser_page):
    page = browser_page
    tasks = {f"task-{i}": [1.0, 0.0] for i in range(4)}
    a, b = build_side("side-a", tasks), build_side("side-b", {t: [1.0, 1.0] for t in tasks})
    build_side("side-c", {"task-0": [0.0]})  # not ticked
    page.goto(f"{live_server.url}/comparisons/")
    page.click("#more-sides a:text('Compare 2 to 12 sides')")
    page.check(f"input[name=side][value='{a.pk}']")
    page.check(f"input[name=side][value='{b.pk}']")
    page.check(f"input[name=reference][value='{a.pk}']")
    page.click("#grid-picker button[type=submit]")

    page.wait_for_selector("#chart-grid-sides .main-svg", state="attached")
    assert page.locator("#grid-sides tbody tr").count() == 2
    assert "+0.500" in page.text_content(f"#grid-sides tr[data-side='{b.pk}']")
    interval = page.locator(f"#grid-sides tr[data-side='{b.pk}'] small.interval")
    line = page.locator(f"#grid-sides tr[data-side='{b.pk}'] td:nth-child(2) small").first.bounding_box()
    assert interval.bounding_box()["height"] <= line["height"] * 1.2  # the Δ's [low, high] on one line
    page.click(f'#task-grid a.cell-link[href="/trials/?configuration={b.pk}&task=task-2"]')
    page.wait_for_url(re.compile(rf".*/trials/\?configuration={b.pk}&task=task-2$"))
    shown = page.locator("table.trial-rows tbody tr td.task").all_text_contents()
    assert shown == ["task-2", "task-2"]


def test_a_trend_point_opens_that_configurations_trials(live_server, browser_page):
    page = browser_page
    day = lambda n: datetime(2026, 3, n, tzinfo=UTC)  # noqa: E731
    v1 = build_side("agent-v1", {"t0": [0.0], "t1": [1.0]}, trial_kwargs={"started_at": day(1)})
    build_side("agent-v2", {"t0": [1.0], "t1": [1.0]}, trial_kwargs={"started_at": day(2)})
    dataset = v1.trials.first().dataset
    page.goto(f"{live_server.url}/comparisons/trend/")
    page.select_option("#id_dataset", str(dataset.pk))
    page.click("#trend-picker button[type=submit]")
    page.wait_for_selector("#chart-trend .main-svg", state="attached")
    assert page.locator("#trend-points tbody tr").count() == 2
    _click_first_point(page, "chart-trend")  # the oldest: agent-v1
    page.wait_for_url(re.compile(rf".*/trials/\?configuration={v1.pk}&dataset={dataset.pk}&job=\d+$"))  # its run


def test_the_grid_of_the_four_tb1_configurations_fits_1280_px_with_each_name_whole_in_its_title(
    live_server, browser_page
):
    page = browser_page
    import_path(REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet")
    import_path(REFERENCE / "public-runs-2" / "tb1-droid-5x2")
    import_path(REFERENCE / "public-runs-2" / "tb1-goose-flat")
    keys = dict(Configuration.objects.values_list("pk", "key"))
    assert len(keys) == 4
    query = "&".join(f"side={pk}" for pk in keys)
    page.goto(f"{live_server.url}/comparisons/grid/?{query}")
    page.wait_for_selector("#grid-sides table.sides")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    last = page.locator("#grid-sides table.sides thead th").last
    assert last.text_content().strip() == "Comparable"
    box = last.bounding_box()
    assert box["x"] + box["width"] <= 1280  # the Comparable column is not cut off
    for pk, key in keys.items():
        link = page.locator(f"#grid-sides tr[data-side='{pk}'] th a").first
        assert link.get_attribute("title") == key
