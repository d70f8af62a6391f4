"""The query box's suggestions (`/trials/query/suggest/?q=<text before the cursor>`): the query schema's
field names, and the values of a field read from what was imported (a real Terminal-Bench 1 run), through
an index, each one inserted as a string the query language reads back."""

from __future__ import annotations

import orjson
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.builders import REFERENCE, import_path, tool_step, write_trial
from tests.factories import ConfigurationFactory, TrialFactory
from trials import query, search
from trials.models import Trial
from trials.queries.suggest import MAX_SUGGESTIONS

pytestmark = pytest.mark.django_db

SUBMISSION = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
RUN = SUBMISSION / "2025-08-07__20-46-16"
URL = "/trials/query/suggest/"


def _suggest(client, before: str) -> dict:
    response = client.get(URL, {"q": before})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()


def _labels(client, before: str) -> list[str]:
    return [item["label"] for item in _suggest(client, before)["items"]]


def _typed(before: str, item: dict, answer: dict) -> str:
    """The query's text once the item is chosen, as the page's script does it."""
    return before[: len(before) - len(answer["prefix"])] + item["insert"]


def test_the_field_names_are_the_query_schemas(client_logged_in):
    schema = query.TrialSchema(Trial)
    trial_fields = schema.models[schema.model_label(Trial)]
    for name in trial_fields:  # every field of the schema, found by its own name
        answer = _suggest(client_logged_in, f"reward > 1 and {name}")
        assert answer["scope"] == "field" and name in [i["label"] for i in answer["items"]], (name, answer)
    assert set(_labels(client_logged_in, "st")) == {n for n in trial_fields if n.startswith("st")}
    job_fields = {f"job.{sub}" for sub in schema.models[schema.model_label(query.Job)]}
    assert set(_labels(client_logged_in, "job.")) == job_fields
    assert "calls." in _labels(client_logged_in, "not (ca")
    assert _labels(client_logged_in, "nosuchfield") == []


def test_operators_follow_a_field_and_and_or_follow_a_value(client_logged_in):
    assert _labels(client_logged_in, "reward ")[:6] == ["=", "!=", ">", ">=", "<", "<="]
    assert "~" in _labels(client_logged_in, "task ") and "~" not in _labels(client_logged_in, "reward ")
    assert _labels(client_logged_in, 'status = "failed" ') == ["and", "or"]
    assert _labels(client_logged_in, "reward > 0.5 o") == ["or"]


def test_values_are_read_from_a_real_run(client_logged_in):
    import_path(SUBMISSION)
    metadata = orjson.loads((RUN / "run_metadata.json").read_bytes())
    model, agent, tasks = metadata["model_name"], metadata["agent_name"], metadata["task_ids"]
    assert model in _labels(client_logged_in, "model = ")
    assert model in _labels(client_logged_in, f'model ~ "{model.split("/")[-1][:6]}')  # part of the name
    assert _labels(client_logged_in, f'agent = "{agent[:4]}') == [agent]
    hetero = sorted(t for t in tasks if t.startswith("heter"))
    assert _labels(client_logged_in, 'task in ("crack-7z-hash.hard", "heter') == hetero
    assert _labels(client_logged_in, "configuration.model = ") == [model]
    modes = {row["failure_mode"] for row in orjson.loads((RUN / "results.json").read_bytes())["results"]}
    timeouts = {m for m in modes if m.startswith("agent_")}
    assert timeouts and set(_labels(client_logged_in, 'category = "agent_')) == timeouts
    assert set(_labels(client_logged_in, 'cause ~ "Agent')) >= timeouts  # any case: a lower-case category too
    statuses = [value for value, _ in Trial.Status.choices]
    assert _labels(client_logged_in, "status = ") == statuses[:MAX_SUGGESTIONS]
    assert _labels(client_logged_in, "class != ") == ["infrastructure", "task_quality", "capability"]
    assert _labels(client_logged_in, "flagged = ") == ["True", "False"]
    assert _labels(client_logged_in, "reward = ") == []  # numbers: nothing to suggest


def test_a_chosen_value_reads_back_as_the_same_value(client_logged_in):
    hostile = 'ev"il\\ <b>model</b>'
    trial = TrialFactory(configuration=ConfigurationFactory(model_name=hostile))
    before = 'model = "ev'
    answer = _suggest(client_logged_in, before)
    assert answer["prefix"] == '"ev' and [i["label"] for i in answer["items"]] == [hostile]
    text = _typed(before, answer["items"][0], answer)
    assert list(query.parse(text).filter(Trial.objects.all())) == [trial]
    in_list = _suggest(client_logged_in, 'model in ("x", ')
    assert in_list["items"][0]["insert"] == in_list["items"][0]["insert"].rstrip()  # a list goes on with `,`


def test_tool_names_follow_calls(client_logged_in, tmp_path):
    job = tmp_path / "job"
    write_trial(job, "task-a__AAAAAAA", steps=[tool_step(1, "bash", {"cmd": "ls"}), tool_step(2, "edit", {})])
    write_trial(job, "task-b__BBBBBBB", steps=[tool_step(1, "bash", {"cmd": "pwd"})])
    import_path(job)
    assert _labels(client_logged_in, "calls.") == ["calls.bash", "calls.edit"]
    answer = _suggest(client_logged_in, "steps > 1 and calls.b")
    assert [i["insert"] for i in answer["items"]] == ["calls.bash "]
    text = _typed("steps > 1 and calls.b", answer["items"][0], answer) + "= 1"
    assert [t.name for t in query.parse(text).filter(Trial.objects.all())] == ["task-a__AAAAAAA"]


@pytest.mark.sqlite_only("reads SQLite's EXPLAIN QUERY PLAN")
def test_values_of_the_trials_columns_come_from_an_index_a_few_seeks_each(client_logged_in):
    for n in range(30):  # more distinct values than a list shows, each on several trials
        for _ in range(3):
            TrialFactory(failure_category=f"cat_{n:02d}", exception_type=f"Error{n:02d}")
    with CaptureQueriesContext(connection) as captured:
        found = _labels(client_logged_in, 'category = "cat_')
    assert found == [f"cat_{n:02d}" for n in range(MAX_SUGGESTIONS)]
    scans = [q["sql"] for q in captured.captured_queries if "trials_trial" in q["sql"]]
    assert len(scans) <= MAX_SUGGESTIONS + 1  # one seek per value (and one that finds none), not per trial
    with connection.cursor() as cursor:
        for sql in scans:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
            assert "USING COVERING INDEX trial_category_idx" in plan, plan
    assert _labels(client_logged_in, 'exception = "error1') == [f"Error{n}" for n in range(10, 20)]


def test_suggestions_need_a_login_and_odd_text_answers_nothing(client_logged_in):
    response = Client().get(URL, {"q": "st"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    for odd in ("\x00", "reward = 1.5e", 'task = "a" "b', "#", "(((", "calls.", "x" * 1900, "model = '"):
        assert client_logged_in.get(URL, {"q": odd}).status_code == 200


def test_the_search_page_narrows_to_the_trials_of_a_query(client_logged_in, tmp_path):
    job = tmp_path / "job"
    write_trial(job, "task-a__AAAAAAA", steps=[tool_step(1, "bash", {"cmd": "echo zebra"})])
    write_trial(job, "task-b__BBBBBBB", steps=[tool_step(1, "bash", {"cmd": "echo zebra"})])
    import_path(job)
    assert search.index_pending() == 2  # the word index, as the worker builds it
    found = client_logged_in.get("/api/search/", {"q": "zebra", "where": 'task = "task-b"'}).json()["results"]
    assert {hit["trial"]["name"] for hit in found} == {"task-b__BBBBBBB"}
    everywhere = client_logged_in.get("/api/search/", {"q": "zebra"}).json()["results"]
    assert {hit["trial"]["name"] for hit in everywhere} == {"task-a__AAAAAAA", "task-b__BBBBBBB"}
    bad = client_logged_in.get("/api/search/", {"q": "zebra", "where": "task ="})
    assert bad.status_code == 400 and "column 7" in bad.json()["where"][0]
    page = client_logged_in.get("/search/", {"q": "zebra", "where": "task ="}).content.decode()
    assert 'id="where-error"' in page and "column 7" in page
    page = client_logged_in.get("/search/", {"q": "zebra", "where": 'task = "task-b"'}).content.decode()
    assert "task-b__BBBBBBB" in page and "task-a__AAAAAAA" not in page
    assert 'data-inputs="#search-form input[name=where]"' in page
