"""schemathesis against the OpenAPI schema, in process (WSGI): every operation, as a superuser and as
a runner, answers no 5xx, only statuses the schema lists, and bodies of the shapes it documents.

Examples per operation are few (MAX_EXAMPLES) so the walk stays short on a shared machine; the
demo job is imported first, so some generated ids name real trials, jobs and configurations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from core import roles
from tests.builders import import_demo, make_user

MAX_EXAMPLES = 6
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


@pytest.fixture(params=["superuser", "runner"])
def token(request, db, tmp_path) -> str:
    """The role's API token, with the demo job imported."""
    import_demo(tmp_path)
    if request.param == "superuser":
        user = get_user_model().objects.create_superuser("admin-walk", password="pw-admin-walk-1")
    else:
        user = make_user("runner-walk", roles.RUNNER)
    return Token.objects.create(user=user).key


@pytest.fixture
def api_schema(token) -> Iterator[Any]:
    """The schema the API serves, answered in process by Django's WSGI application."""
    # As Django's test client does: a request's end must not close the test's database connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi(
            "/api/schema/?format=json", get_wsgi_application(), headers={"Authorization": f"Token {token}"}
        )
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def test_every_operation_answers_as_its_schema_says(api_schema, token):
    """Each operation in turn (schemathesis's pytest plugin does not run on pytest 9: its own loop here);
    valid and invalid requests alike; every failure is collected, then listed."""
    headers = {"Authorization": f"Token {token}"}
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    for operation in operations:
        cases = st.one_of([operation.as_strategy(generation_mode=mode) for mode in GenerationMode])

        @given(case=cases)
        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def answers_as_documented(case) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            answers_as_documented()
        except (Exception, BaseExceptionGroup) as failure:  # each is reported; the walk goes on
            failures.append(f"{operation.label}: {failure}")
    assert len(operations) > 40
    assert not failures, "\n\n".join(failures)
