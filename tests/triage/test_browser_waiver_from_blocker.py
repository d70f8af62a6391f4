"""In a real browser: the feedback form marks what the kind picked requires before a submit, and an
approver grants a waiver from a release blocker's page (the browser refuses it without an expiry)."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from tests.builders import PASSWORD, good_steps, import_path, make_user, write_trial
from trials.models import Trial
from trials.models.qc import QCItem
from trials.triage import services
from trials.triage.forms import FeedbackForm

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop in this thread
pytestmark = pytest.mark.browser


def test_required_fields_follow_the_kind_and_an_approver_waives_a_blocker_from_its_page(
    browser, live_server, transactional_db, tmp_path
):
    import_path(write_trial(tmp_path, steps=good_steps()))
    trial = Trial.objects.get()
    approver = make_user("ann", "approver")
    form = FeedbackForm(
        data={"kind": "release-blocker", "category": "runtime", "severity": "P0", "evidence_refs": ["step:2"]},
        trial=trial,
        user=approver,
    )
    assert form.is_valid(), form.errors
    blocker = services.file_item(approver, trial, form.cleaned_data)
    page = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")

    page.goto(f"/trials/{trial.pk}/feedback/")
    page.check("input[name=kind][value=waiver]")
    expect(page.locator("input[name=expires_at]")).to_have_attribute("required", "")
    expect(page.locator("#field-expires_at .required-mark")).to_be_visible()
    expect(page.locator("#field-evidence_refs .required-mark")).to_be_hidden()
    page.check("input[name=kind][value=release-blocker]")
    assert page.locator("input[name=expires_at]").get_attribute("required") is None
    expect(page.locator("#field-evidence_refs .required-mark")).to_be_visible()

    page.goto(blocker.get_absolute_url())
    page.fill("#waive-form input[name=scope]", "beta")
    page.fill("#waive-form textarea[name=reason]", "known flake")
    page.click("#waive-form button[type=submit]")  # no expiry: the browser does not send it
    assert page.locator("#waive-form input[name=expires_at]").evaluate("e => e.validity.valueMissing")
    assert page.url == f"{live_server.url}{blocker.get_absolute_url()}"  # (a sent form answers at …/waive/)
    assert not QCItem.objects.filter(kind=QCItem.Kind.WAIVER).exists()
    page.fill("#waive-form input[name=expires_at]", "2999-01-01T12:00")
    page.click("#waive-form button[type=submit]")
    expect(page.locator(".message")).to_contain_text("Granted")
    waiver = QCItem.objects.get(kind=QCItem.Kind.WAIVER)
    assert (waiver.waived_item, waiver.approver, waiver.scope) == (blocker, approver, "beta")
    expect(page.locator("#evidence-refs a.evidence-link")).to_have_attribute("href", f"/trials/{trial.pk}/steps/2/")
    assert errors == []
