"""The trial list's query box in Chromium: typing `model = ` lists the real run's model (read from its
run_metadata.json), the keyboard chooses it, the list runs the query, and the query is saved from there."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.builders import PASSWORD, REFERENCE, import_path, make_user

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop in this thread
pytestmark = pytest.mark.browser

RUN = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet" / "2025-08-07__20-46-16"


def test_typing_a_query_suggests_the_runs_model_and_the_keyboard_chooses_it(
    browser, live_server, transactional_db, tmp_path
):
    import_path(RUN.parent)
    model = orjson.loads((RUN / "run_metadata.json").read_bytes())["model_name"]
    trials = len(orjson.loads((RUN / "results.json").read_bytes())["results"])
    make_user("vera", "viewer")
    page = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800}).new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto("/trials/")

    box = page.locator("#trial-filters input[name=q]")
    box.click()
    box.press_sequentially("mod")
    options = page.locator(".query-suggestions [role=option]")
    options.filter(has_text="model").first.wait_for()
    assert box.get_attribute("aria-expanded") == "true"
    box.press("ArrowDown")
    box.press("Enter")  # the only field starting with `mod`: chosen, the form not sent
    assert box.input_value() == "model "
    box.press_sequentially("= ")
    suggestion = options.filter(has_text=model)
    suggestion.wait_for()
    page.screenshot(path=str(Path(os.environ.get("SCREENSHOT_DIR") or tmp_path) / "autocomplete.png"))
    assert page.url.endswith("/trials/")  # still typing: nothing was submitted
    while page.locator(".query-suggestions [aria-selected=true]").all_inner_texts() != [suggestion.inner_text()]:
        box.press("ArrowDown")
    box.press("Tab")
    assert box.input_value() == f'model = "{model}" '
    assert page.evaluate("document.activeElement.name") == "q"  # the focus stays in the box
    options.filter(has_text="and").wait_for()  # what may follow a value
    box.press("Escape")
    assert page.locator(".query-suggestions").is_hidden()
    box.press("Enter")
    page.wait_for_url("**/trials/?*")
    assert f"({trials})" in page.locator("h1").inner_text()

    page.fill("#id_saved_name", "sonnet")
    page.click("#save-query button[type=submit]")
    page.wait_for_url("**/trials/?q=*")
    assert page.locator("#saved-queries a", has_text="sonnet").count() == 1
