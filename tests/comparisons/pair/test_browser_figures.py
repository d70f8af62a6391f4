"""In a real browser, a headline figure of the comparison page opens the trials it counts."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from tests.builders import ERRORED, build_side

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_clicking_the_errored_figure_opens_exactly_the_errored_trials(live_server, browser):
    base = build_side("baseline-v1", {f"task-{i}": [1.0, 1.0] for i in range(4)}, role="baseline")
    cand = build_side("candidate-v2", {f"task-{i}": [1.0, ERRORED if i % 2 else 0.0] for i in range(4)})
    errored = set(cand.trials.filter(status="errored").values_list("pk", flat=True))
    get_user_model().objects.create_user("pm", password="pw-browser-1")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(20_000)
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "pm")
        page.fill("input[name=password]", "pw-browser-1")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/(?!accounts/login).*"))
        page.goto(f"{live_server.url}/comparisons/?baseline={base.pk}&candidate={cand.pk}")

        assert page.text_content("#figure-errored").strip() == f"{len(errored)} errored" == "2 errored"
        page.click("#figure-errored")
        page.wait_for_url(re.compile(rf".*/trials/\?configuration={cand.pk}&status=errored$"))
        links = page.eval_on_selector_all("a.trial-link", "links => links.map(a => a.getAttribute('href'))")
        shown = {int(re.match(r"/trials/(\d+)/", href).group(1)) for href in links}
        assert shown == errored
    finally:
        page.close()
