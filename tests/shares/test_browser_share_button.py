"""The Share button in a real browser: it makes a link, shows it with a copy button, and the link opens."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from core import roles
from shares.services import create_share
from tests.builders import PASSWORD, build_side, import_trial_dir, make_user, write_trial

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def reviewer_signed_in(browser, live_server):
    """A browser context signed in, through the login form, as a reviewer (who may share)."""
    make_user("rita", roles.REVIEWER)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/(?!accounts/login).*"))
    return context, page


def test_the_share_button_shows_a_link_that_opens_for_someone_without_an_account(browser, live_server):
    tasks = {f"t{i}": [1.0] for i in range(3)}
    base = build_side("base", tasks, role="baseline")
    cand = build_side("cand", tasks, role="candidate", dataset=base.trials.first().dataset)
    context, page = reviewer_signed_in(browser, live_server)
    page.goto(f"{live_server.url}/comparisons/?baseline={base.pk}&candidate={cand.pk}")
    page.click("#share-button")
    link = page.locator("#share-link")
    expect(link).to_have_value(re.compile("/s/"))  # no string to evaluate: the page's CSP refuses eval
    assert page.locator("#share-box .copy-share").is_visible()
    url = link.input_value()
    context.close()

    visitor = browser.new_context(viewport={"width": 1280, "height": 800})  # no session
    shared = visitor.new_page()
    shared.goto(url)
    shared.locator("[data-rendered=true]").nth(3).wait_for(state="attached", timeout=20_000)  # 4 charts drawn
    assert "decision" in shared.locator("#decision").inner_text().lower()
    assert shared.locator("header nav").count() == 0  # none of the site's navigation
    visitor.close()


def test_the_trial_pages_share_link_opens_on_a_line_of_its_own_below_the_buttons(browser, live_server):
    trial = build_side("base", {"t0": [1.0]}, role="baseline").trials.get()
    context, page = reviewer_signed_in(browser, live_server)
    page.goto(f"{live_server.url}/trials/{trial.pk}/")
    export = page.locator("#export-trial").bounding_box()
    page.click("#share-button")
    expect(page.locator("#share-link")).to_have_value(re.compile("/s/"))
    after = page.locator("#export-trial").bounding_box()
    box = page.locator("#share-box").bounding_box()
    assert after["height"] == export["height"]  # the buttons beside it are not squeezed onto two lines
    assert box["y"] >= after["y"] + after["height"]  # below the buttons, not wedged between them
    context.close()


def test_a_visitor_opens_a_long_steps_whole_text_with_show_all(browser, live_server, tmp_path):
    long = "checked every file; " * 400
    steps = [{"step_id": 1, "source": "user", "message": "go"}, {"step_id": 2, "source": "agent", "message": long}]
    trial = import_trial_dir(write_trial(tmp_path, steps=steps))
    token = create_share(make_user("rita", roles.REVIEWER), trial=trial.pk).token
    visitor = browser.new_context(viewport={"width": 1280, "height": 800})  # no session
    page = visitor.new_page()
    page.goto(f"{live_server.url}/s/{token}/")
    message = page.locator('#step-2 pre[data-field="message"]')
    assert len(message.inner_text()) < len(long)
    page.locator("#step-2 button.expand").click()
    expect(message).to_have_text(long.strip())
    visitor.close()


def test_a_second_share_offers_the_live_link_and_makes_another_only_when_asked(browser, live_server):
    from shares.models import Share

    trial = build_side("base", {"t0": [1.0]}, role="baseline").trials.get()
    context, page = reviewer_signed_in(browser, live_server)
    page.goto(f"{live_server.url}/trials/{trial.pk}/")
    page.select_option("#share-expiry", "30")
    page.click("#share-button")
    expect(page.locator("#share-link")).to_have_value(re.compile("/s/"))
    first = Share.objects.get()
    assert (first.expires_at - first.created_at).days == 30  # the expiry chosen beside the button

    page.reload()
    page.click("#share-button")
    expect(page.locator("#share-box .share-existing")).to_be_visible()
    assert "You already have a live link" in page.locator("#share-box .share-expiry").inner_text()
    assert not page.locator("#share-link").is_visible() and Share.objects.count() == 1
    page.click("[data-share-action=replace]")
    expect(page.locator("#share-link")).to_have_value(re.compile("/s/"))
    assert Share.objects.filter(revoked_at=None).count() == 1 and Share.objects.get(pk=first.pk).revoked_at
    context.close()
