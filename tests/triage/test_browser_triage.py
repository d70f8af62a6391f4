"""Triage in a real browser: a triager logs in, files a P0 release blocker on a failed trial
citing a step, and sees it at the top of the blockers board."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from tests.builders import PASSWORD, import_demo, make_user
from trials.models.qc import QCItem

# Playwright's sync API runs an event loop in this thread; Django's ORM calls are still sync.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = pytest.mark.browser


def test_a_triager_files_a_p0_blocker_from_the_trial_page_and_sees_it_on_the_board(
    browser, live_server, transactional_db, tmp_path, settings
):
    trial = import_demo(tmp_path)[0]
    step_id = trial.steps.order_by("index").first().step_id
    make_user("tina", "triager")
    page = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto("/accounts/login/")
    page.fill("input[name=username]", "tina")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("header .logout")).to_contain_text("tina")

    page.goto(f"/trials/{trial.pk}/")
    page.get_by_role("link", name="File QC feedback").click()
    expect(page.locator("h1")).to_contain_text(trial.name)
    expect(page.locator("#prefill-source")).to_contain_text("benchmark.trial.failed")

    page.check("input[name=kind][value=release-blocker]")
    expect(page.locator("fieldset[data-kind=waiver]")).to_be_hidden()
    page.select_option("select[name=severity]", "P0")
    page.select_option("select[name=step_id]", step_id)
    page.check(f"input[name=evidence_refs][value='step:{step_id}']")
    page.fill("textarea[name=note]", "stream never resumed after the tool result")
    page.click("#file-qc")

    item = QCItem.objects.get()
    expect(page).to_have_url(f"{live_server.url}{item.get_absolute_url()}")
    expect(page.locator("#history")).to_contain_text("filed")

    page.goto("/qc/blockers/")
    first = page.locator("#blocker-rows tr").first
    expect(first).to_contain_text(item.label)
    expect(first).to_contain_text("P0")
    expect(first).to_contain_text(trial.name)
    assert (item.severity, item.kind, item.step_id) == ("P0", "release-blocker", step_id)
    assert errors == []
