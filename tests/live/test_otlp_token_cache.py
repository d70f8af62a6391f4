"""`POST /v1/traces` keeps a token's answer OTLP_TOKEN_CACHE_SECONDS in each web process (core/roles.py
CachedTokenAuthentication), so an exporter's batches make no token query each; a token revoked in the
process that answers stops working on its next batch, and one revoked elsewhere (another gunicorn
worker, the admin's process, SQL) within those seconds."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from core import roles
from tests.live.helpers import runner_client

pytestmark = pytest.mark.django_db


def export(client: APIClient) -> int:
    """An empty ExportTraceServiceRequest (JSON): authenticated and answered, nothing stored."""
    return client.post("/v1/traces", b"{}", content_type="application/json").status_code


def token_queries(client: APIClient) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert export(client) == 200
    return sum("authtoken_token" in q["sql"] for q in queries.captured_queries)


def test_an_exporters_next_batches_make_no_token_query(settings):
    settings.OTLP_TOKEN_CACHE_SECONDS = 10
    client, _ = runner_client()
    assert token_queries(client) == 1
    assert token_queries(client) == 0 and token_queries(client) == 0
    with CaptureQueriesContext(connection) as queries:  # (the API's other views still ask each time)
        assert client.get("/api/trials/").status_code == 200
    assert sum("authtoken_token" in q["sql"] for q in queries.captured_queries) == 1


def test_a_token_deleted_or_its_user_changed_in_this_process_is_refused_on_the_next_batch(settings):
    settings.OTLP_TOKEN_CACHE_SECONDS = 600
    client, key = runner_client()
    assert export(client) == 200
    Token.objects.filter(key=key).delete()
    assert export(client) == 401

    client, key = runner_client(name="runner-2")
    user = Token.objects.get(key=key).user
    assert export(client) == 200
    user.groups.clear()  # (out of the runner group: no `run` right)
    assert export(client) == 403
    roles.add_to_group(user, roles.RUNNER)
    assert export(client) == 200
    user.is_active = False
    user.save()
    assert export(client) == 401


def test_a_token_revoked_elsewhere_stops_working_within_the_cache_seconds(settings):
    settings.OTLP_TOKEN_CACHE_SECONDS = 1
    client, key = runner_client()
    assert export(client) == 200
    with connection.cursor() as cursor:  # (no signal here: as another process's DELETE looks to this one)
        cursor.execute("DELETE FROM authtoken_token WHERE key = %s", [key])
    started = time.monotonic()
    answers = [export(client)]
    while answers[-1] == 200 and time.monotonic() - started < 5:
        time.sleep(0.1)
        answers.append(export(client))
    assert answers[0] == 200 and answers[-1] == 401  # (kept until its second was up, then asked again)
    assert time.monotonic() - started < 1.5


def test_with_no_cache_seconds_every_batch_asks_the_database(settings):
    settings.OTLP_TOKEN_CACHE_SECONDS = 0
    client, key = runner_client()
    assert token_queries(client) == 1 and token_queries(client) == 1
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM authtoken_token WHERE key = %s", [key])
    assert export(client) == 401
