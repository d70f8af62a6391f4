"""The triage queue and the trial list fit a 1280 px window with long names: no sideways
scrolling of the page nor of a table inside its card; a cut name keeps its whole text in its title."""

from __future__ import annotations

import os

import pytest

from tests.builders import PASSWORD, make_user
from tests.factories import ConfigurationFactory, JobFactory, TaskFactory, TrialFactory
from trials.triage import signatures

# Playwright's sync API runs an event loop in this thread; Django's ORM calls are still sync.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = pytest.mark.browser

LONG = "terminal-bench-2.0-hard-subset-with-a-very-long-run-name-and-more"
# The page's width and the window's, and how many tables make their container scroll sideways.
OVERFLOW = """[document.scrollingElement.scrollWidth, innerWidth, [...document.querySelectorAll("table")]
  .filter(t => t.parentElement.scrollWidth > t.parentElement.clientWidth).length]"""


def test_the_queue_and_the_trial_list_fit_1280_pixels_with_long_names(browser, live_server, transactional_db):
    job = JobFactory(key="job-long", name=f"{LONG}-job")
    configuration = ConfigurationFactory(key=f"{LONG}-configuration", role="candidate")
    trials = [
        TrialFactory(
            name=f"{LONG}-trial__{n}",
            job=job,
            configuration=configuration,
            task=TaskFactory(name=f"{LONG}-task-{n}"),
            status="errored",
            reward=1.0 if n else None,  # an errored trial with a reward: flagged
            exception_type="AgentEnvironmentSetupTimeoutErrorWithAVeryLongName",
            exception_message=f"setup timed out {n}",
        )
        for n in range(3)
    ]
    signatures.sign_trials(t.pk for t in trials)
    make_user("tina", "triager")
    page = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800}).new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "tina")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")

    page.goto("/triage/")
    headers = page.locator("#queue-table thead th").all_inner_texts()
    for column in ("cluster", "category", "job", "configuration", "task", "assignee", "flag", "reasons"):
        assert any(column in h for h in headers), (column, headers)
    assert page.locator(f'#queue-table td[title="{trials[0].name}"]').count() == 1
    scroll_width, width, wide_tables = page.evaluate(OVERFLOW)
    assert scroll_width <= width and wide_tables == 0, (scroll_width, width, wide_tables)

    page.goto("/trials/")
    assert "Job" in page.locator("table.trial-rows thead").inner_text()
    assert page.locator(f'table.trial-rows td[title="{job.name}"]').count() == 3
    scroll_width, width, wide_tables = page.evaluate(OVERFLOW)
    assert scroll_width <= width and wide_tables == 0, (scroll_width, width, wide_tables)


# Each job and configuration cell of the queue: its text, its height in lines of its font, and whether
# any of it is hidden (cut off below its last line).
CELL_LINES = """[...document.querySelectorAll("#queue-table td.name-cut .two-lines")].map(s =>
  [s.innerText, s.getBoundingClientRect().height / parseFloat(getComputedStyle(s).lineHeight),
   s.scrollHeight > s.clientHeight + 1])"""


@pytest.mark.parametrize("width,height", [(1280, 800), (1440, 900)])
def test_the_queues_long_names_take_two_lines_at_most_and_read_apart(
    browser, live_server, transactional_db, width, height
):
    # (the shared TB1 runs' names: one agent, two models, run names alike but for their end)
    keys = ["20250923_droid_claude-4-sonnet", "20250923_droid_claude-4-1-opus"]
    tasks = ["blind-maze-explorer-5x5", "blind-maze-explorer-algorithm"]  # (TB1 tasks alike but for their end)
    for key, model, task in zip(keys, ("claude-4-sonnet", "claude-4-1-opus"), tasks, strict=True):
        job = JobFactory(
            key=f"job-{model}", name=f"reference/agentv/compare-{model}-results.jsonl@2025-01-15T10:0{len(model)}Z"
        )
        configuration = ConfigurationFactory(key=key, model_name=model)
        TrialFactory(job=job, configuration=configuration, status="failed", reward=0.0, task=TaskFactory(name=task))
    make_user("tina", "triager")
    page = browser.new_context(base_url=live_server.url, viewport={"width": width, "height": height}).new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "tina")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto("/triage/")
    cells = page.evaluate(CELL_LINES)
    # (four cells a row: name, task, job and configuration)
    assert len(cells) == 8 and all(lines <= 2.05 and not hidden for _, lines, hidden in cells), cells
    assert {text for text, _, _ in cells if "droid" in text} == set(keys), cells  # whole: their models differ
    shown = [text for text, _, _ in cells if "maze" in text]  # the ends that tell them apart, whole
    assert [any(text.endswith(end) for text in shown) for end in ("5x5", "algorithm")] == [True, True], shown
    for key in keys:
        assert page.locator(f'#queue-table td[title="{key}"]').count() == 1
