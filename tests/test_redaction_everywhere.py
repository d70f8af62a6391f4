"""A redacted context value is in the stored pack and nowhere else: not in a page, an API
response, an export, a search result or a log line."""

from __future__ import annotations

import logging

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

from tests.viewer_packs import demo_jobs
from trials.demo import SECRET
from trials.models import ContextRecord, Import, Trial

pytestmark = pytest.mark.django_db


def every_get_url(trial: Trial, imp: Import) -> list[str]:
    """Every URL pattern of the site, with this trial and import filled in."""
    values = {"pk": trial.pk, "number": 1, "artifact_pk": 0}
    urls = []

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if not route.startswith("admin"):
                    walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                urls.append(route)

    walk(get_resolver().url_patterns, "")
    filled = []
    for route in urls:
        url = "/" + route.lstrip("^").rstrip("$")
        if "<uuid:pk>" in url:
            url = url.replace("<uuid:pk>", str(imp.pk))
        for name, value in values.items():
            url = url.replace(f"<int:{name}>", str(value))
        if "<" not in url:
            filled.append(url)
    return filled


def test_the_secret_is_only_in_the_raw_pack(client, tmp_path, caplog, capsys, django_user_model):
    admin = django_user_model.objects.create_superuser("admin", password="pw-admin-1")
    client.force_login(admin)
    caplog.set_level(logging.DEBUG)
    call_command("import_packs", str(demo_jobs(tmp_path)), "--no-progress")
    assert SECRET in (next(tmp_path.rglob("context-events.jsonl"))).read_text()  # it was in the pack
    assert ContextRecord.objects.filter(redaction_state="masked").exists()

    trial = Trial.objects.filter(context_records__redaction_state="masked").first()
    imp = Import.objects.first()
    responses = {}
    for url in every_get_url(trial, imp):
        responses[url] = client.get(url)
    tabs = ["trajectory", "context", "permissions", "verifier", "artifacts", "logs", "exception", "config", "events"]
    for tab in tabs:
        responses[f"tab {tab}"] = client.get(f"/trials/{trial.pk}/", {"tab": tab})
    responses["search page"] = client.get(f"/trials/{trial.pk}/", {"q": "sk-demo"})  # a prefix: no echo of it all
    responses["search api"] = client.get(f"/api/trials/{trial.pk}/search/", {"q": "sk-demo"})
    responses["qc export"] = client.get("/api/qc/export/")
    responses["context api"] = client.get(f"/api/trials/{trial.pk}/context/")
    for number in range(1, trial.step_count + 1):
        responses[f"step {number}"] = client.get(f"/api/trials/{trial.pk}/steps/{number}/")

    assert sum(1 for r in responses.values() if r.status_code == 200) > 40  # the walk really read pages
    for name, response in responses.items():
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert SECRET.encode() not in body, name
    for record in caplog.records:
        assert SECRET not in record.getMessage()
    captured = capsys.readouterr()
    assert SECRET not in captured.out and SECRET not in captured.err
