"""A Terminal-Bench trial's terminal recording plays on the trial page, in a real browser,
from our static files and under the site's Content-Security-Policy."""

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
    page.console_errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    yield page
    context.close()


def shot(page, tmp_path: Path, name: str) -> None:
    """A 1280x800 screenshot, in SCREENSHOT_DIR when set (to look at), else the test's folder."""
    page.screenshot(path=str(Path(os.environ.get("SCREENSHOT_DIR") or tmp_path) / name))


def test_a_terminal_bench_recording_plays_on_the_trial_page(page, tmp_path):
    import_path(SUBMISSION)
    trial = Trial.objects.get(task__name="heterogeneous-dates")
    page.goto(f"{trial.get_absolute_url()}?tab=artifacts")
    player = page.locator(".cast-player").first
    expect(player.locator(".ap-term")).to_be_visible()  # the player drew its terminal (its WASM ran)
    player.locator(".ap-overlay-start").click()  # play
    expect(player.locator(".ap-term")).to_contain_text("install-agent.sh", timeout=20_000)
    assert page.errors == [] and not [e for e in page.console_errors if "Content Security Policy" in e]
    player.scroll_into_view_if_needed()
    shot(page, tmp_path, "tb1-trial-recording.png")


def test_a_terminal_bench_trials_commands_read_as_steps(page, tmp_path):
    import_path(SUBMISSION)
    trial = Trial.objects.get(task__name="crack-7z-hash.hard")
    page.goto(trial.get_absolute_url())
    expect(page.locator("body")).to_contain_text("asciinema rec --stdin /logs/agent.cast <Enter>")
    expect(page.locator("body")).to_contain_text("/tests/run-tests.sh")
    shot(page, tmp_path, "tb1-trial-steps.png")
