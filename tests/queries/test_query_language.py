"""The trials query language (`?q=`): the API and the list page answer what the raw files say, a bad
query is a 400 naming where and what was expected, and no query string ever answers 500."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import REFERENCE, import_path, tool_step, write_trial

pytestmark = pytest.mark.django_db

OPUS = REFERENCE / "public-runs-2" / "tb1-droid-5x2" / "20250923_droid_claude-4-1-opus"


def _rows(folder):
    return [row for path in sorted(folder.glob("*/results.json")) for row in orjson.loads(path.read_bytes())["results"]]


def _count(client, q: str) -> int:
    response = client.get("/api/trials/", {"q": q})
    assert response.status_code == 200, response.content
    return response.json()["count"]


def test_queries_on_a_real_run_count_what_its_results_files_say(client_logged_in):
    import_path(OPUS)
    rows = _rows(OPUS)
    resolved = sum(row["is_resolved"] is True for row in rows)
    unresolved = sum(row["is_resolved"] is False for row in rows)
    unscored = sum(row["is_resolved"] is None for row in rows)
    assert unscored == 9  # the shared README's count for opus
    assert _count(client_logged_in, "reward = 1") == resolved
    assert _count(client_logged_in, "reward = None") == unscored
    assert _count(client_logged_in, "not (reward = None) and reward < 1") == unresolved
    assert _count(client_logged_in, "reward = 1 or reward = None") == resolved + unscored
    run_1 = [row for row in rows if row["trial_name"].endswith(".tb_rc2_opus_1")]
    tasks = sorted({row["task_id"] for row in run_1})[:3]
    listed = ", ".join(f'"{t}"' for t in tasks)
    assert _count(client_logged_in, f'job ~ "opus_1" and task in ({listed})') == len(tasks)
    timeouts = sum(row["failure_mode"] == "agent_timeout" and row["is_resolved"] is not True for row in rows)
    assert _count(client_logged_in, 'reward != 1 and cause ~ "agent_timeout"') == timeouts


def test_calls_of_one_tool_are_counted_per_trial(client_logged_in, tmp_path):
    job = tmp_path / "job"
    many = [tool_step(i, "bash", {"cmd": f"echo {i}"}) for i in range(1, 8)] + [tool_step(8, "edit", {"path": "a"})]
    write_trial(job, "task-a__AAAAAAA", steps=many)
    write_trial(job, "task-b__BBBBBBB", steps=[tool_step(1, "edit", {"path": "b"})])
    import_path(job)
    names = lambda q: sorted(t["name"] for t in client_logged_in.get("/api/trials/", {"q": q}).json()["results"])  # noqa: E731
    assert names("calls.bash > 5") == ["task-a__AAAAAAA"]
    assert names("calls.bash = 0") == ["task-b__BBBBBBB"]  # never called: a count of 0
    assert names("calls.bash < 7 and calls.edit = 1") == ["task-b__BBBBBBB"]
    assert names("tool_calls = 8 and steps = 8") == ["task-a__AAAAAAA"]
    assert names('not (calls.bash in (7, 8)) and model = "test-model"') == ["task-b__BBBBBBB"]


@pytest.mark.parametrize(
    ("q", "column", "said"),
    [
        ("status =", 9, "expected"),
        ('status = "failed" and', 22, "a field name"),
        ("reward >", 9, "a number"),
        ("status $ 1", 8, "Illegal character"),
        ("colour = 1", 1, "Unknown field: colour"),
        ('reward = 1 and reward = "high"', 16, "floating point numbers"),
    ],
)
def test_a_bad_query_is_a_400_naming_the_column_and_what_was_expected(client_logged_in, q, column, said):
    response = client_logged_in.get("/api/trials/", {"q": q})
    assert response.status_code == 400
    [message] = response.json()["q"]
    assert f"column {column}:" in message and said in message, message


def test_the_list_page_filters_by_the_query_and_lists_nothing_for_a_bad_one(client_logged_in, tmp_path):
    job = tmp_path / "job"
    write_trial(job, "task-a__AAAAAAA", steps=[tool_step(1, "bash", {"cmd": "ls"})])
    write_trial(job, "task-b__BBBBBBB", steps=[tool_step(1, "edit", {"path": "b"})])
    import_path(job)
    page = client_logged_in.get("/trials/", {"q": "calls.bash = 1"}).content.decode()
    assert 'name="q"' in page and "task-a__AAAAAAA" in page and "task-b__BBBBBBB" not in page
    bad = client_logged_in.get("/trials/", {"q": "calls.bash =="}).content.decode()
    assert "column 13:" in bad and "task-a__AAAAAAA" not in bad


WORDS = st.sampled_from(
    [
        "status",
        "reward",
        "calls.bash",
        "calls",
        "job.name",
        "task",
        "class",
        "flag",
        "tokens",
        "started",
        "and",
        "or",
        "not",
        "in",
        "(",
        ")",
        ",",
        "=",
        "!=",
        "~",
        "!~",
        ">",
        "<=",
        "None",
        "True",
        '"x"',
        "'\\u0000'",
        "1",
        "-0",
        "1.5e999",
        "99999999999999999999",
        '"2026-13-45"',
        "startswith",
        "\\",
        '"',
        "\n",
    ]
)


@pytest.fixture
def one_trial(tmp_path):
    import_path(write_trial(tmp_path / "job", "task-a__AAAAAAA", steps=[tool_step(1, "bash", {"cmd": "ls"})]).parent)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.lists(WORDS, max_size=12).map(" ".join), st.text(max_size=40)))
def test_no_query_string_answers_500(client_logged_in, one_trial, q):
    response = client_logged_in.get("/api/trials/", {"q": q})
    assert response.status_code in (200, 400), (q, response.content[:300])
