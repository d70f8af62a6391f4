"""Errors the API documents: a query integer that is not one is a 400; with the database
unreachable every answer is the JSON error body with a 503 (a page, a 503 page), never
Django's HTML 500; the schema lists 414, 500 and 503 for every operation."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.test import Client

from core import errors
from tests.builders import build_side
from tests.factories import TrialFactory


def integer_query_parameters(schema: dict) -> Iterator[tuple[str, str]]:
    """(path, name) of every GET operation's integer query parameter."""
    for path, operations in schema["paths"].items():
        for parameter in operations.get("get", {}).get("parameters", ()):
            if parameter.get("in") == "query" and parameter.get("schema", {}).get("type") == "integer":
                yield path, parameter["name"]


@pytest.mark.django_db
def test_every_integer_query_parameter_refuses_a_value_that_is_not_a_whole_number(client_logged_in):
    schema = client_logged_in.get("/api/schema/?format=json").json()
    trial = TrialFactory()
    base, cand = build_side("b", {"t": [1.0]}), build_side("c", {"t": [1.0]})
    sides = {"baseline": base.pk, "candidate": cand.pk}
    checked = []
    for path, name in integer_query_parameters(schema):
        url = path.replace("{id}", str(trial.pk)).replace("{other}", str(trial.pk)).replace("{chart}", "heatmap")
        params = {**(sides if "comparisons" in path else {}), name: "x"}
        if name.endswith("_job"):  # a job side instead of a configuration side
            params.pop(name.removesuffix("_job"), None)
        answer = client_logged_in.get(url, params)
        assert answer.status_code == 400, (path, name, answer.status_code, answer.content[:200])
        assert answer["Content-Type"] == "application/json"
        checked.append((path, name))
    assert ("/api/trials/", "page") in checked and ("/api/trials/{id}/trajectory/", "trajectory") in checked


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["", "0", "-1", "1.5", "²"])
def test_a_page_that_is_not_a_whole_number_from_one_is_refused_not_read_as_page_one(client_logged_in, value):
    answer = client_logged_in.get("/api/trials/", {"page": value})
    assert answer.status_code == 400 and "page" in answer.json()


@pytest.mark.django_db
def test_the_schema_lists_414_500_and_503_for_every_operation(client_logged_in):
    schema = client_logged_in.get("/api/schema/?format=json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert {"414", "500", "503"} <= set(operation["responses"]), (method, path)


def unreachable_client() -> Client:
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "x" * 32  # a session key: the session is read from the database first
    return client


def test_with_the_database_unreachable_the_api_answers_a_json_503_and_a_page_a_503_page(
    user, database_unreachable, fresh_outage
):
    client = unreachable_client()
    for url in ("/api/trials/", "/api/trials/1/steps/", "/api/comparisons/?baseline=1&candidate=2", "/api/qc/items/"):
        answer = client.get(url)
        assert answer.status_code == 503, url
        assert answer["Content-Type"] == "application/json" and answer["Retry-After"] == "1"  # it has just begun
        assert "unreachable" in answer.json()["detail"]
    page = client.get("/trials/")
    assert page.status_code == 503 and b'id="server-error"' in page.content and b"unreachable" in page.content


def test_retry_after_grows_with_the_outage_and_starts_again_after_it(user, database_unreachable, fresh_outage):
    client = unreachable_client()
    assert client.get("/api/trials/")["Retry-After"] == "1"
    time.sleep(2.2)
    assert client.get("/api/trials/")["Retry-After"] == "3"  # down 2.2 s so far: about as long again
    time.sleep(3 + errors.OUTAGE_GAP_SECONDS + 0.2)  # no failure for longer than advised: it was over
    assert client.get("/api/trials/")["Retry-After"] == "1"
