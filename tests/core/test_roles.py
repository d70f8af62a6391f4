"""Role matrix: every URL in the URLconf, for anonymous, viewer, reviewer, triager and approver.

The walk is generic so it keeps passing as URLs are added: by default every logged-in
role may GET every URL (a URL that needs query parameters may answer 400 or 404, never
500), anonymous users are sent to the login page (pages) or refused (API), and a viewer's
POST is refused everywhere. URLs that write are listed in WRITES with the roles allowed.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

from core import roles
from tests.builders import PASSWORD, REFERENCE, ROLES, import_demo, import_path, make_user
from trials.models import Artifact, Document, Import, Trial
from trials.models.qc import QCItem, QCScenario
from trials.triage import scenario_manifests, services
from trials.triage.forms import FeedbackForm

pytestmark = pytest.mark.django_db

ANONYMOUS = "anonymous"
CONVERTER = re.compile(r"<(?:(?P<conv>\w+):)?(?P<name>\w+)>")
# Pages whose GET shows a write form: only roles that may write there can open them.
GET_RIGHTS = {"triage-feedback": roles.FILE_QC, "api-trial-feedback": roles.FILE_QC, "triage-add": roles.FILE_QC}
GET_RIGHTS |= {"api-shares": roles.SHARE, "api-share": roles.SHARE}  # who may share lists their shares


@dataclass
class World:
    ids: dict[str, Any]
    users: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def world(tmp_path) -> World:
    failed = import_demo(tmp_path)
    import_path(REFERENCE / "lime-app" / "agent-qc-scenarios.manifest.json")
    manifest = Document.objects.get(kind=scenario_manifests.MANIFEST_KIND)
    users = {name: make_user(name, name) for name in ROLES}
    trial = failed[0]
    form = FeedbackForm(
        data={
            "kind": "release-blocker",
            "category": "runtime",
            "severity": "P0",
            "evidence_refs": [f"trial:{trial.key}"],
        },
        trial=trial,
        user=users["triager"],
    )
    assert form.is_valid(), form.errors
    item = services.file_item(users["triager"], trial, form.cleaned_data)
    scenario_manifests.import_manifest(users["triager"], manifest)
    ids = {
        "trial": trial.pk,
        "other_trial": failed[1].pk,
        "job": trial.job_id,
        "import": Import.objects.first().pk,
        "artifact": Artifact.objects.filter(trial=trial).first().pk if Artifact.objects.filter(trial=trial) else 1,
        "item": item.pk,
        "scenario": QCScenario.objects.first().pk,
        "manifest": manifest.pk,
    }
    return World(ids=ids, users=users)


def walk(resolver: URLResolver, prefix: str = "", namespace: str = ""):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            ns = pattern.namespace or namespace
            yield from walk(pattern, prefix + str(pattern.pattern), ns)
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.name or "", namespace


def fill(route: str, ids: dict[str, Any]) -> str:
    """A concrete URL for a route, with ids of real objects where the route names them."""

    def value(match: re.Match) -> str:
        conv, name = match.group("conv") or "str", match.group("name")
        before = route[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        if conv == "uuid":
            return str(ids["import"] if before == "imports" else uuid.uuid4())
        if conv == "int":
            by_segment = {
                "trials": ids["trial"],
                "jobs": ids["job"],
                "scenarios": ids["scenario"],
                "items": ids["item"],
                "blockers": ids["item"],
                "waivers": ids["item"],
            }
            if name == "artifact_pk":
                return str(ids["artifact"])
            if name == "number":
                return "1"
            return str(by_segment.get(before, 1))
        return "reward"  # str/slug/path: a plausible word

    return "/" + CONVERTER.sub(value, route)


def site_urls(ids: dict[str, Any]) -> list[tuple[str, str]]:
    urls = []
    for route, name, namespace in walk(get_resolver()):
        if namespace == "admin" or route.startswith("admin/"):
            continue
        assert "(?P" not in route and not route.startswith("^"), f"regex route outside admin: {route}"
        urls.append((fill(route, ids), name))
    return urls


def _login(client, world: World, role: str) -> None:
    client.logout()
    if role != ANONYMOUS:
        client.force_login(world.users[role])


def test_the_walk_sees_the_triage_urls_and_fills_them(world):
    urls = dict((name, url) for url, name in site_urls(world.ids))
    assert urls["triage-feedback"] == f"/trials/{world.ids['trial']}/feedback/"
    assert urls["qc-item"] == f"/qc/items/{world.ids['item']}/"
    assert urls["import-detail"] == f"/imports/{world.ids['import']}/"
    assert {"qc-blockers", "api-qc-export", "triage-queue", "trial-detail", "home"} <= set(urls)


def test_anonymous_users_are_sent_to_login_or_refused_everywhere(client, world):
    for url, name in site_urls(world.ids):
        if name in roles.ALWAYS_ALLOWED_URL_NAMES:
            continue
        response = client.get(url)
        if name in roles.PUBLIC_URL_NAMES:  # a share link: its token is the credential, and "reward" is none
            assert response.status_code == 404, (url, response.status_code)
        # (/v1/: OTLP; a .md digest takes the API's token) the API docs are for people
        elif (url.startswith(("/api/", "/v1/", "/mcp/")) or url.split("?")[0].endswith(".md")) and name != "api-docs":
            assert response.status_code == 401, (url, response.status_code)
        else:
            assert response.status_code == 302, (url, response.status_code)
            assert response["Location"].startswith("/accounts/login/"), url


@pytest.mark.parametrize("role", ROLES)
def test_every_logged_in_role_may_read_every_url(client, world, role):
    _login(client, world, role)
    user = world.users[role]
    for url, name in site_urls(world.ids):
        if name == "logout":
            continue
        response = client.get(url)
        assert response.status_code != 500, url
        if name in GET_RIGHTS and not roles.has_right(user, GET_RIGHTS[name]):
            assert response.status_code == 403, (role, url, response.status_code)
        else:
            assert response.status_code not in (401, 403), (role, url, response.status_code)


def test_a_viewer_may_post_nowhere_but_logout(client, world):
    _login(client, world, "viewer")
    for url, name in site_urls(world.ids):
        if name in roles.ALWAYS_ALLOWED_URL_NAMES:
            continue
        response = client.post(url, {})
        assert response.status_code == 403, (url, response.status_code)
    assert client.post(reverse("logout")).status_code == 302


# (url name, kwargs, data, json?, roles that may) — one row per write the triage issue defines.
def writes(ids: dict[str, Any], users: dict[str, Any]) -> list[tuple[str, dict, dict, bool, set[str]]]:
    blocker = {
        "kind": "release-blocker",
        "category": "runtime",
        "severity": "P1",
        "evidence_refs": [f"trial:{ids['trial']}"],
    }
    trial = {"pk": ids["trial"]}
    return [
        ("triage-feedback", trial, blocker, False, {"triager", "approver"}),
        ("api-trial-feedback", trial, blocker, True, {"triager", "approver"}),
        ("triage-comment", trial, {"text": "looks like a stuck stream"}, False, {"reviewer", "triager", "approver"}),
        (
            "triage-assign",
            {},
            {"trials": [ids["other_trial"]], "assignee": users["triager"].pk},
            False,
            {"triager", "approver"},
        ),
        ("qc-scenario-import", {}, {"document": ids["manifest"]}, False, {"triager", "approver"}),
        ("qc-scenario-status", {"pk": ids["scenario"]}, {"status": "fixed"}, False, {"triager", "approver"}),
        (
            "qc-item",
            {"pk": ids["item"]},
            {"status": "open", "severity": "P0", "note": "edited"},
            False,
            {"triager", "approver"},
        ),
        (
            "api-trial-feedback",
            trial,
            {
                "kind": "waiver",
                "waived_item": ids["item"],
                "approver": users["approver"].pk,
                "reason": "accepted",
                "scope": "beta",
                "expires_at": "2999-01-01T00:00:00Z",
            },
            True,
            {"approver"},
        ),
        (
            "qc-item-waive",
            {"pk": ids["item"]},
            {"reason": "accepted", "scope": "beta", "expires_at": "2999-01-01T00:00"},
            False,
            {"approver"},
        ),
        ("imports", {}, {}, False, {"reviewer", "triager", "approver"}),
        ("api-imports", {}, {}, False, {"reviewer", "triager", "approver"}),
    ]


@pytest.mark.parametrize("role", ROLES)
def test_who_may_write_where(client, world, role):
    _login(client, world, role)
    for name, kwargs, data, as_json, allowed in writes(world.ids, world.users):
        if name == "triage-feedback" or (name == "api-trial-feedback" and data["kind"] != "waiver"):
            data = data | {"evidence_refs": [f"trial:{QCItem.objects.get(pk=world.ids['item']).trial.key}"]}
        url = reverse(name, kwargs=kwargs)
        response = client.post(url, data, content_type="application/json") if as_json else client.post(url, data)
        assert response.status_code != 500, url
        if role in allowed:
            assert response.status_code not in (401, 403), (role, name, response.status_code)
            assert response.status_code in (200, 201, 202, 302, 400), (role, name, response.status_code)
        else:
            assert response.status_code == 403, (role, name, response.status_code)


def test_filing_works_for_the_roles_that_may(client, world):
    _login(client, world, "approver")
    before = QCItem.objects.count()
    trial_key = QCItem.objects.get(pk=world.ids["item"]).trial.key
    data = {"kind": "release-blocker", "category": "runtime", "severity": "P1", "evidence_refs": [f"trial:{trial_key}"]}
    response = client.post(reverse("api-trial-feedback", kwargs={"pk": world.ids["trial"]}), data, "application/json")
    assert response.status_code == 201
    assert QCItem.objects.count() == before + 1


def test_admin_refuses_everyone_but_staff(client, world):
    for role in ROLES:
        _login(client, world, role)
        response = client.get("/admin/")
        assert response.status_code == 302 and "/admin/login/" in response["Location"], role


def test_superusers_may_do_everything(client, world):
    from django.contrib.auth import get_user_model

    boss = get_user_model().objects.create_superuser("boss", password=PASSWORD)
    assert roles.user_rights(boss) == roles.ALL_RIGHTS
    client.force_login(boss)
    assert client.get("/admin/").status_code == 200
    assert client.get(reverse("triage-feedback", kwargs={"pk": world.ids["trial"]})).status_code == 200


def test_rights_per_group_are_cumulative(world):
    rights = {role: roles.user_rights(world.users[role]) for role in ROLES}
    assert rights["viewer"] == {roles.READ}
    assert rights["viewer"] < rights["reviewer"] < rights["triager"] < rights["approver"]
    assert roles.WAIVE in rights["approver"] and roles.WAIVE not in rights["triager"]
    assert roles.COMMENT in rights["reviewer"] and roles.FILE_QC not in rights["reviewer"]


def test_create_user_puts_a_user_in_a_group_without_prompting(db, monkeypatch, client):
    monkeypatch.setenv("BENCHVIEWER_PASSWORD", "from-the-env-1")
    call_command("create_user", "pm", "--group", "viewer")
    call_command("create_user", "ann", "--group", "approver", "--password", "flag-pw-123")
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    assert list(users.get(username="pm").groups.values_list("name", flat=True)) == ["viewer"]
    assert client.login(username="pm", password="from-the-env-1")
    assert client.login(username="ann", password="flag-pw-123")
    assert roles.has_right(users.get(username="ann"), roles.WAIVE)


@pytest.mark.parametrize("role", ROLES)
def test_pages_show_only_the_write_buttons_a_role_may_press(client, world, role):
    _login(client, world, role)
    user = world.users[role]
    trial_page = client.get(reverse("trial-detail", kwargs={"pk": world.ids["trial"]})).content.decode()
    assert ('id="file-feedback"' in trial_page) is roles.has_right(user, roles.FILE_QC)
    assert ('class="step-feedback"' in trial_page) is roles.has_right(user, roles.FILE_QC)
    imports = client.get(reverse("imports")).content.decode()
    assert ('enctype="multipart/form-data"' in imports) is roles.has_right(user, roles.IMPORT)
    trial = Trial.objects.get(pk=world.ids["trial"])
    comparison = client.get(
        reverse("comparison"), {"baseline": trial.configuration_id, "candidate": trial.configuration_id}
    )
    assert comparison.status_code == 200
    html = comparison.content.decode()
    assert (reverse("comparison-save") in html) is roles.has_right(user, roles.SAVE_COMPARISON)


def test_a_reviewer_comments_on_the_trial_page_and_sees_the_comment_there(client, world):
    _login(client, world, "reviewer")
    url = reverse("trial-detail", kwargs={"pk": world.ids["trial"]})
    page = client.get(url).content.decode()
    assert 'id="comments"' in page and reverse("triage-comment", kwargs={"pk": world.ids["trial"]}) in page
    assert "QC items on this trial" in page and QCItem.objects.get(pk=world.ids["item"]).label in page
    response = client.post(
        reverse("triage-comment", kwargs={"pk": world.ids["trial"]}), {"text": "a stuck stream?", "next": url}
    )
    assert response.status_code == 302
    assert "a stuck stream?" in client.get(url).content.decode()
    _login(client, world, "viewer")
    seen = client.get(url).content.decode()
    assert "a stuck stream?" in seen and reverse("triage-comment", kwargs={"pk": world.ids["trial"]}) not in seen


def role_refusal(response) -> bool:
    """A 403 that says the role may not (not one about the object, such as another runner's trial)."""
    return response.status_code == 403 and b"your role" in response.content.lower()


def test_every_write_route_names_its_right_and_refuses_every_role_without_it(client, world):
    """Each route is POSTed by a superuser: one that does not answer 405 writes, so its view must name a
    right (roles.write_right_of); then every role, the runner too, is refused there unless it holds it."""
    boss = get_user_model().objects.create_superuser("boss", password=PASSWORD)
    users = {**world.users, "runner": make_user("runner", roles.RUNNER), "superuser": boss}
    checked = []
    for url, name in site_urls(world.ids):
        if name in roles.ALWAYS_ALLOWED_URL_NAMES:
            continue
        client.force_login(boss)
        if client.post(url, {}).status_code == 405:
            continue  # it only reads
        right = roles.write_right_of(resolve(url).func)
        assert right is not None, f"{url} ({name}) writes but its view names no right"
        if right == roles.READ:
            continue  # the API's catch-all 404 for any address: it writes nothing
        for role, user in users.items():
            client.force_login(user)
            response = client.post(url, {})
            assert response.status_code != 500, (role, url)
            assert role_refusal(response) is not roles.has_right(user, right), (role, url, response.status_code)
        checked.append(name)
    assert {"api-comparison-save", "comparison-save", "api-trial-events", "imports", "qc-item"} <= set(checked)


def test_a_runner_may_not_save_a_comparison(client, world):
    client.force_login(make_user("runner", roles.RUNNER))
    trial = Trial.objects.get(pk=world.ids["trial"])
    sides = {"baseline": trial.configuration_id, "candidate": trial.configuration_id}
    assert role_refusal(client.post(f"/api/comparisons/save/?{urlencode(sides)}"))
    assert role_refusal(client.post(reverse("comparison-save"), sides))
