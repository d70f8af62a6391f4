"""Saved queries: a user (a viewer too: it changes nothing shared) saves the trial list's query under a
name, sees their own under the list, opens each as `?q=`, deletes one; the same through /api/saved-queries/."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import orjson
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.builders import REFERENCE, import_path, make_user
from trials.models import SavedQuery

pytestmark = pytest.mark.django_db

RUN = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet" / "2025-08-07__20-46-16"
SAVE = "/trials/saved-queries/"
API = "/api/saved-queries/"


def _listed(response) -> int:
    """The trial list's count, as its heading shows it."""
    found = re.search(r"<h1>Trials <span class=\"muted\">\((\d+)\)</span>", response.content.decode())
    assert found, response.content[:500]
    return int(found.group(1))


def _logged_in(name: str, group: str) -> Client:
    client = Client()
    client.force_login(make_user(name, group))
    return client


def test_a_viewer_saves_the_lists_query_opens_it_and_deletes_it():
    import_path(RUN.parent)
    metadata = orjson.loads((RUN / "run_metadata.json").read_bytes())
    rows = orjson.loads((RUN / "results.json").read_bytes())["results"]
    resolved = sum(row["is_resolved"] is True for row in rows)
    text = f'model = "{metadata["model_name"]}" and reward = 1'
    viewer = _logged_in("vera", "viewer")

    page = viewer.get("/trials/", {"q": text})
    assert _listed(page) == resolved
    assert b'id="save-query"' in page.content and b"js/query_complete.js" in page.content

    saved = viewer.post(SAVE, {"name": "resolved sonnet", "query": text})
    assert saved.status_code == 302 and saved["Location"] == f"/trials/?{urlencode({'q': text})}"
    assert _listed(viewer.get(saved["Location"])) == resolved
    listing = viewer.get("/trials/").content.decode()
    link = f'href="/trials/?{urlencode({"q": text})}"'.replace("&", "&amp;")
    assert "resolved sonnet" in listing and link in listing
    assert "resolved sonnet" in viewer.get(SAVE).content.decode()

    other = _logged_in("otto", "reviewer")
    assert "resolved sonnet" not in other.get("/trials/").content.decode()  # one's own, nobody else's
    mine = SavedQuery.objects.get(name="resolved sonnet")
    assert other.post(f"{SAVE}{mine.pk}/delete/").status_code == 404
    assert viewer.post(f"{SAVE}{mine.pk}/delete/", {"next": "/trials/"})["Location"] == "/trials/"
    assert not SavedQuery.objects.exists()
    # still read-only elsewhere: the viewer's exception is their own queries
    assert viewer.post("/imports/", {}).status_code == 403


def test_a_query_that_cannot_run_is_not_saved_and_a_name_is_replaced():
    client = _logged_in("rita", "reviewer")
    bad = client.post(SAVE, {"name": "broken", "query": 'status = "failed" and'})
    assert bad.status_code == 400 and "column 22" in bad.content.decode()
    assert not SavedQuery.objects.exists()
    assert client.post(SAVE, {"name": "mine", "query": "reward = 1"}).status_code == 302
    assert client.post(SAVE, {"name": "mine", "query": "reward = 0"}).status_code == 302
    assert list(SavedQuery.objects.values_list("name", "query")) == [("mine", "reward = 0")]
    hostile = "<script>alert(1)</script>"
    client.post(SAVE, {"name": hostile, "query": f'task = "{hostile}"'})
    page = client.get("/trials/").content.decode()
    assert hostile not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_api_lists_saves_and_deletes_the_callers_own_queries():
    viewer, other = make_user("vic", "viewer"), make_user("olga", "viewer")
    api = Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=viewer).key}")
    timeouts = 'cause ~ "timeout"'
    made = api.post(API, {"name": "timeouts", "query": timeouts}, content_type="application/json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["url"] == "/trials/?" + urlencode({"q": timeouts})
    again = api.post(API, {"name": "timeouts", "query": "reward = 1"}, content_type="application/json")
    assert again.status_code == 400 and "name" in again.json()
    bad = api.post(API, {"name": "bad", "query": "reward >"}, content_type="application/json")
    assert bad.status_code == 400 and "column" in bad.json()["query"][0]
    SavedQuery.objects.create(user=other, name="hers", query="reward = 0")
    assert [q["name"] for q in api.get(API).json()["results"]] == ["timeouts"]
    hers = SavedQuery.objects.get(name="hers")
    assert api.delete(f"{API}{hers.pk}/").status_code == 404
    assert api.delete(f"{API}{body['id']}/").status_code == 204
    assert list(SavedQuery.objects.values_list("name", flat=True)) == ["hers"]
    assert Client().get(API).status_code == 401
