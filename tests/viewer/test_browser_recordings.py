"""A Terminal-Bench trial's terminal recording plays on the trial page, in a real browser,
from our static files and under the site's Content-Security-Policy."""

from __future__ import annotations

import json
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


def test_one_recording_is_open_and_another_plays_once_opened(page, tmp_path):
    import_path(SUBMISSION)
    trial = Trial.objects.get(task__name="heterogeneous-dates")
    assert trial.artifacts.filter(kind="asciicast").count() == 2
    casts: list[str] = []
    page.on("request", lambda request: "/recording/" in request.url and casts.append(request.url))
    page.goto(f"{trial.get_absolute_url()}?tab=artifacts")
    first, second = page.locator(".cast-player").all()
    expect(first.locator(".ap-term")).to_be_visible()
    second_url = second.get_attribute("data-cast-src")
    assert second.locator(".ap-term").count() == 0  # closed: no player made
    page.locator("tr.artifact-preview summary").nth(1).click()
    expect(second.locator(".ap-term")).to_be_visible()
    assert not [url for url in casts if url.endswith(second_url)]  # (the player fetches its cast on play)
    second.locator(".ap-overlay-start").click()
    expect(second.locator(".ap-term")).to_contain_text("$", timeout=20_000)
    assert [url for url in casts if url.endswith(second_url)]
    assert page.errors == []
    shot(page, tmp_path, "tb1-trial-second-recording.png")


def test_a_terminal_bench_trials_commands_read_as_steps(page, tmp_path):
    import_path(SUBMISSION)
    trial = Trial.objects.get(task__name="crack-7z-hash.hard")
    page.goto(trial.get_absolute_url())
    expect(page.locator("#steps")).to_contain_text("mini -m anthropic/claude-sonnet-4-20250514")
    expect(page.locator("#steps")).not_to_contain_text("asciinema rec")  # (the harness's: listed apart)
    expect(page.locator("#harness-keys")).to_contain_text("/tests/run-tests.sh")
    shot(page, tmp_path, "tb1-trial-steps.png")
    page.goto(trial.job.get_absolute_url())
    expect(page.locator("#job-accuracy")).to_contain_text("0.1375")
    expect(page.locator("#published-accuracy")).to_have_text("0.1375")
    shot(page, tmp_path, "tb1-job.png")


def test_a_harbor_jobs_check_report_reads_on_its_page(page, tmp_path):
    job = tmp_path / "job"
    (job / "hello__AAA" / "agent").mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": "checked", "agents": [], "concurrency_group": "gpu-a"}))
    (job / "result.json").write_text(json.dumps({"id": "job-1", "n_total_trials": 1, "stats": {}}))
    trial = {"id": "t-1", "task_name": "org/hello", "trial_name": "hello__AAA", "config": {},
             "verifier_result": {"rewards": {"reward": 1.0}}}  # fmt: skip
    (job / "hello__AAA" / "result.json").write_text(json.dumps(trial))
    checks = {"instruction_clarity": {"outcome": "pass", "explanation": "The goal and output path are stated."},
              "tests_match_instruction": {"outcome": "fail", "explanation": "A test checks a port never stated."},
              "solution_exists": {"outcome": "not_applicable", "explanation": "No oracle in this task."}}  # fmt: skip
    (job / "check_report.json").write_text(json.dumps({"tasks": {"hello": {"checks": checks}}}))
    import_path(job)
    page.goto(Trial.objects.get().job.get_absolute_url())
    expect(page.locator("#check-report")).to_contain_text("A test checks a port never stated.")
    expect(page.locator("#task-results .task-checks")).to_contain_text("tests_match_instr")
    page.locator("#check-report").scroll_into_view_if_needed()
    shot(page, tmp_path, "job-check-report.png")


def test_a_recording_fills_the_page_width_goes_full_screen_and_keeps_its_arrow_keys(page, tmp_path):
    import_path(SUBMISSION)
    trial = Trial.objects.get(task__name="heterogeneous-dates")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{trial.get_absolute_url()}?tab=artifacts")
    player = page.locator(".cast-player").first
    expect(player.locator(".ap-term")).to_be_visible()
    card = page.locator("#artifacts").bounding_box()
    assert card is not None and player.bounding_box()["width"] > 0.9 * card["width"]  # fit to the page's width
    expect(page.locator(".cast-fullscreen").first).to_be_visible()
    player.locator(".ap-overlay-start").click()
    player.locator(".ap-wrapper").focus() if player.locator(".ap-wrapper").count() else player.click()
    page.evaluate("window.__stayed = true")  # gone if the page is left
    page.keyboard.press("ArrowRight")  # the player's seek, not the next trial
    page.wait_for_load_state()
    expect(player.locator(".ap-term")).to_be_visible()
    assert page.evaluate("window.__stayed === true") and "?tab=artifacts" in page.url
    page.locator(".cast-fullscreen").first.click()
    page.wait_for_function("document.fullscreenElement !== null")
    assert page.evaluate("document.fullscreenElement.classList.contains('cast-player')")
    assert page.errors == []
