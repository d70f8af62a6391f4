"""A Terminal-Bench 1 trial page in a real browser: the agent's command as the step, and an arrow key
pressed inside the terminal recording's player stays there (it does not leave for the next trial)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import expect

from tests.builders import REFERENCE, import_path
from trials.models import Trial

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)

SUBMISSION = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"


@pytest.fixture
def page(browser, live_server, transactional_db):
    client = Client()
    client.force_login(get_user_model().objects.create_user("reviewer", password="pw-reviewer-1"))
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    context.close()


def shot(page, tmp_path: Path, name: str) -> None:
    """A 1280x800 screenshot, in SCREENSHOT_DIR when set (to look at), else the test's folder."""
    page.screenshot(path=str(Path(os.environ.get("SCREENSHOT_DIR") or tmp_path) / name))


def test_an_arrow_key_inside_the_recording_stays_in_the_player_and_outside_it_moves_on(page, tmp_path):
    import_path(SUBMISSION)
    trial = Trial.objects.get(task__name="heterogeneous-dates")
    page.goto(trial.get_absolute_url())
    expect(page.locator("#steps article.step")).to_have_count(1)  # the agent's one command, not the harness's 9
    expect(page.locator("#steps")).to_contain_text("mini -m anthropic/claude-sonnet-4-20250514")
    shot(page, tmp_path, "tb1-page.png")
    page.goto(f"{trial.get_absolute_url()}?tab=agent-logs")
    expect(page.locator("#tab-agent-logs")).to_contain_text("Saved trajectory to")
    shot(page, tmp_path, "tb1-agent-logs.png")
    page.goto(f"{trial.get_absolute_url()}?tab=artifacts")
    key = "ArrowRight" if page.locator("#next-trial").count() else "ArrowLeft"
    # The trial link the key follows points into this page: following it changes the hash at once.
    page.evaluate(f"document.querySelector('.trial-nav a[data-key={key}]').href = '#followed'")
    player = page.locator(".cast-player").first
    expect(player.locator(".ap-term")).to_be_visible()
    player.locator(".ap-overlay-start").click()
    player.locator(".ap-wrapper").focus() if player.locator(".ap-wrapper").count() else player.click()
    assert page.evaluate("document.activeElement.closest('.cast-player') !== null")
    page.keyboard.press(key)
    assert page.evaluate("location.hash") != "#followed"  # the player kept the key
    page.locator("h1").first.click()  # focus leaves the player
    page.keyboard.press(key)
    assert page.evaluate("location.hash") == "#followed"  # the page's key, outside the player
    player.scroll_into_view_if_needed()
    shot(page, tmp_path, "tb1-recording.png")
    assert page.errors == []
