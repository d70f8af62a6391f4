"""A visitor holding a share sees the share and nothing else; the report draws its charts from disk."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from core import roles
from tests.builders import build_side

pytestmark = pytest.mark.django_db
CONVERTER = re.compile(r"<(?:(\w+):)?\w+>")
A_UUID = "6f1c7c52-5d0c-4d43-9a8e-0d6f3c1f1e11"


def every_route() -> list[tuple[str, str]]:
    """(url, name) for every route of the site, each parameter filled with a plausible value."""
    found = []

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                url = CONVERTER.sub(lambda m: A_UUID if m.group(1) == "uuid" else "1", route)
                found.append(("/" + url, pattern.name or ""))

    walk(get_resolver().url_patterns, "")
    return found


@pytest.fixture
def comparison_share(client, user):
    tasks = {f"t{i}": [1.0, 0.0] for i in range(12)}
    base = build_side("base", tasks, role="baseline")
    cand = build_side("cand", {**tasks, "t0": [0.0, 0.0]}, role="candidate", dataset=base.trials.first().dataset)
    client.force_login(user)
    body = {"comparison": {"baseline": base.pk, "candidate": cand.pk}}
    made = client.post("/api/shares/", body, content_type="application/json").json()
    return made["url"].removeprefix("http://testserver")


def test_a_visitor_holding_a_share_may_open_nothing_else(comparison_share):
    visitor = Client()
    assert visitor.get(comparison_share).status_code == 200
    assert "sessionid" not in visitor.cookies  # opening a share logs no one in
    routes = every_route()
    assert len(routes) > 60
    for url, name in routes:
        if name in roles.ALWAYS_ALLOWED_URL_NAMES or url.startswith("/admin/"):
            continue
        response = visitor.get(url)
        if name in roles.PUBLIC_URL_NAMES:
            assert response.status_code == 404, url  # "1" is no token
        # (/v1/: OTLP; /mcp/: agents; a .md digest takes the API's token)
        elif (url.startswith(("/api/", "/v1/", "/mcp/")) or url.split("?")[0].endswith(".md")) and name != "api-docs":
            assert response.status_code == 401, (url, response.status_code)
        else:
            assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    assert visitor.get("/admin/").status_code == 302


@pytest.mark.browser
def test_the_downloaded_report_draws_its_charts_from_disk_with_the_network_blocked(comparison_share, browser, tmp_path):
    report = Client().get(comparison_share, {"download": "html"})
    path = tmp_path / "report.html"
    path.write_bytes(report.content)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    asked: list[str] = []

    def refuse(route) -> None:  # everything but the file itself is refused, and noted
        if route.request.url == path.as_uri():
            route.continue_()
            return
        asked.append(route.request.url)
        route.abort()

    context.route("**/*", refuse)
    page = context.new_page()
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelectorAll('[data-rendered=true]').length === 5", timeout=20_000)
    assert page.locator("#decision").inner_text().strip().startswith("Decision")
    assert page.locator(".chart .main-svg").count() >= 5  # Plotly drew every chart
    assert asked == []
    page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
    context.close()
