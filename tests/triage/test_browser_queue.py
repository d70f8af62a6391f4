"""The triage queue in a real browser: "n" claims the next untriaged trial; a cluster is filed
from its page in one submit."""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect

from tests.builders import PASSWORD, make_user
from tests.factories import TrialFactory
from trials.models.qc import QCItem, TriageAssignment
from trials.triage import signatures

# Playwright's sync API runs an event loop in this thread; Django's ORM calls are still sync.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = pytest.mark.browser


def test_a_triager_takes_the_next_trial_by_key_and_files_its_cluster(browser, live_server, transactional_db):
    trials = [
        TrialFactory(status="errored", reward=None, exception_type="OSError", exception_message=f"disk full: /d/{n}")
        for n in range(3)
    ]
    signatures.sign_trials(t.pk for t in trials)
    cluster_id = trials[0].__class__.objects.get(pk=trials[0].pk).cluster_id
    tina = make_user("tina", "triager")
    page = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "tina")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")

    page.goto("/triage/")
    expect(page.locator("#queue-table tbody tr")).to_have_count(3)
    page.keyboard.press("n")
    expect(page).to_have_url(f"{live_server.url}/trials/{trials[0].pk}/feedback/")
    assert TriageAssignment.objects.get(trial=trials[0]).assignee == tina

    page.goto("/triage/")
    page.get_by_role("link", name=f"C-{cluster_id}").first.click()
    page.check("input[name=kind][value=replay-fixture]")
    expect(page.locator("fieldset[data-kind=failure-mode]")).to_be_hidden()
    page.fill("input[name=target_name]", "disk-full")
    page.click("#file-cluster")
    item = QCItem.objects.get()
    # (the form posts to #cluster-form, so an error comes back scrolled to it; the redirect keeps it)
    expect(page).to_have_url(re.compile(re.escape(f"{live_server.url}{item.get_absolute_url()}") + "(#cluster-form)?$"))
    assert item.cited_trials.count() == 3
    page.goto("/triage/")
    expect(page.locator("#queue-table tbody tr")).to_have_count(1)  # the "nothing left" row
    assert errors == []
