"""Saved comparisons: listed (page and API) with who, when, the sides and the decision; each
reopened as saved and as it stands now, with the figures that changed since."""

from __future__ import annotations

import re

import pytest

from comparisons.computing.events import EVENT_FIELDS
from comparisons.models import SavedComparison
from comparisons.pair.saved import FIGURE_LABELS
from tests.builders import build_side, make_user
from tests.factories import TrialFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def saved(client_logged_in, user):
    base = build_side("base", {f"t{i}": [0.0] for i in range(12)})
    cand = build_side("cand", {f"t{i}": [1.0] for i in range(12)})
    response = client_logged_in.post(f"/api/comparisons/save/?baseline={base.pk}&candidate={cand.pk}")
    assert response.status_code == 201
    return {"row": SavedComparison.objects.get(), "base": base, "cand": cand, "user": user}


VIEWS = {
    "/comparisons/": "Baseline vs candidate",
    "/comparisons/grid/": "Compare 2 to 12 sides",
    "/comparisons/trend/": "Trend over time",
    "/comparisons/saved/": "Saved comparisons",
}


@pytest.mark.parametrize("path", VIEWS)
def test_every_comparison_page_links_the_other_views_and_marks_its_own(client_logged_in, path):
    html = client_logged_in.get(path).content.decode()
    nav = re.search(r'<nav class="subnav" id="more-sides".*?</nav>', html, re.S).group(0)
    assert f'<strong aria-current="page">{VIEWS[path]}</strong>' in nav
    for other, label in VIEWS.items():
        if other != path:
            assert f'<a href="{other}"' in nav and f">{label}</a>" in nav


def test_the_saved_list_api_says_who_saved_when_the_sides_and_the_decision(client_logged_in, saved):
    body = client_logged_in.get("/api/comparisons/saved/").json()
    assert body["count"] == 1
    [row] = body["results"]
    assert row["savedBy"] == saved["user"].username
    assert row["savedAt"].startswith(saved["row"].created_at.strftime("%Y-%m-%dT%H:%M"))
    assert row["decision"] == "promote"
    assert row["baseline"] == {"kind": "configuration", "id": saved["base"].pk, "label": "base"}
    assert row["candidate"] == {"kind": "configuration", "id": saved["cand"].pk, "label": "cand"}
    assert row["eventId"] == saved["row"].event_id
    assert row["nowUrl"] == f"/comparisons/?baseline={saved['base'].pk}&candidate={saved['cand'].pk}"


def test_the_saved_list_page_links_each_saved_comparison(client_logged_in, saved):
    html = client_logged_in.get("/comparisons/saved/").content.decode()
    table = re.search(r'<table id="saved-comparisons".*?</table>', html, re.S).group(0)
    assert f'href="/comparisons/saved/{saved["row"].pk}/"' in table
    assert saved["user"].username in table and "promote" in table
    assert 'href="/comparisons/saved/"' in client_logged_in.get("/comparisons/").content.decode()


def test_a_saved_comparison_reopens_unchanged_while_its_data_is_the_same(client_logged_in, saved):
    body = client_logged_in.get(f"/api/comparisons/saved/{saved['row'].pk}/").json()
    assert body["saved"]["decision"] == body["now"]["decision"] == "promote"
    assert body["changes"] == []
    html = client_logged_in.get(f"/comparisons/saved/{saved['row'].pk}/").content.decode()
    assert 'id="unchanged"' in html
    as_saved = re.search(r'<section class="card" id="as-saved">.*?</section>', html, re.S).group(0)
    assert "<th>Valid</th><td><div>yes</div>" in as_saved and "True" not in as_saved and "False" not in as_saved


def test_a_saved_comparison_shows_what_changed_since_it_was_saved(client_logged_in, saved):
    cand = saved["cand"]
    for trial in cand.trials.order_by("pk")[:6]:  # six tasks now fail on the candidate too
        TrialFactory(configuration=cand, job=trial.job, task=trial.task, reward=0.0, status="failed")
    body = client_logged_in.get(f"/api/comparisons/saved/{saved['row'].pk}/").json()
    changed = {c["figure"]: c for c in body["changes"]}
    assert changed["meanRewardDelta"]["saved"] == pytest.approx(1.0)
    assert changed["meanRewardDelta"]["now"] == pytest.approx(0.75)
    assert "decision" not in changed  # still promote: the delta is still positive
    assert body["saved"] == saved["row"].event["comparison"]
    html = client_logged_in.get(f"/comparisons/saved/{saved['row'].pk}/").content.decode()
    assert 'data-figure="meanRewardDelta"' in html
    row = re.search(r'<tr class="changed" data-figure="meanRewardDelta">.*?</tr>', html, re.S).group(0)
    assert "<div>+1.000</div>" in row and "<div>+0.750</div>" in row  # as the comparison page writes a delta


def test_a_viewer_may_read_saved_comparisons_and_anonymous_may_not(client, saved):
    client.logout()
    assert client.get("/api/comparisons/saved/").status_code == 401
    assert client.get("/comparisons/saved/").status_code == 302
    client.force_login(make_user("vera", "viewer"))
    assert client.get("/api/comparisons/saved/").json()["count"] == 1
    assert client.get(f"/comparisons/saved/{saved['row'].pk}/").status_code == 200


def test_every_figure_of_the_event_is_compared_when_reopened():
    assert set(FIGURE_LABELS) == set(EVENT_FIELDS)
