"""Search across trials (`/search/`, `GET /api/search/`): steps of every trial through the word index.

Runs on SQLite (FTS5) and, with DATABASE_URL, on PostgreSQL (StepWords' tsvector)."""

from __future__ import annotations

import re

import orjson
import pytest
from django.test import Client

from tests.builders import good_steps, import_path, write_trial
from tests.factories import ConfigurationFactory, JobFactory
from trials import search
from trials.models import Task, Trial
from trials.reading import search_hits

pytestmark = pytest.mark.django_db


def tool_step(step_id: int, tool: str, command: str, output: str) -> dict:
    return {
        "step_id": step_id,
        "source": "agent",
        "message": f"calling {tool}",
        "tool_calls": [{"tool_call_id": f"c{step_id}", "function_name": tool, "arguments": {"cmd": command}}],
        "observation": {"results": [{"source_call_id": f"c{step_id}", "content": output}]},
    }


@pytest.fixture
def trials(tmp_path):
    """Three trials in two jobs and two configurations; "zebrafish" is in one step of each."""
    specs = [
        ("fix-git-hooks__A", tool_step(3, "bash", "git commit -m zebrafish", "ok")),
        ("fix-git-hooks__B", tool_step(3, "python", "print(1)", "Zebrafish <script>alert(1)</script> done")),
        ("parse-logs__C", {"step_id": 3, "source": "agent", "message": "the zebrafish-42 answer"}),
    ]
    for name, step in specs:
        import_path(write_trial(tmp_path / name, name=name, steps=[*good_steps(), step]))
    assert search.index_pending() == 3
    by_name = {t.name: t for t in Trial.objects.all()}
    alpha, beta = JobFactory(name="nightly-alpha"), JobFactory(name="nightly-beta")
    base, cand = ConfigurationFactory(key="claude-base"), ConfigurationFactory(key="claude-cand")
    Trial.objects.filter(pk=by_name["fix-git-hooks__A"].pk).update(job=alpha, configuration=base)
    Trial.objects.filter(pk=by_name["fix-git-hooks__B"].pk).update(job=alpha, configuration=cand)
    Trial.objects.filter(pk=by_name["parse-logs__C"].pk).update(job=beta, configuration=cand)
    return by_name


def api(client, **params) -> dict:
    response = client.get("/api/search/", params)
    assert response.status_code == 200, response.content
    return response.json()


def hit_trials(answer: dict) -> set[str]:
    return {hit["trial"]["name"] for hit in answer["results"]}


def test_a_word_is_found_in_every_trial_in_messages_arguments_and_outputs(client_logged_in, trials):
    answer = api(client_logged_in, q="zebrafish")
    assert hit_trials(answer) == set(trials)
    assert {hit["step"] for hit in answer["results"]} == {3}
    assert answer["has_more"] is False and answer["pending_trials"] == 0
    assert api(client_logged_in, q="ZEBRA")["results"]  # case-insensitive, the last word a prefix
    assert api(client_logged_in, q="commit -m zebra")["results"][0]["trial"]["name"] == "fix-git-hooks__A"
    assert api(client_logged_in, q="nosuchword")["results"] == []


def test_each_hit_has_its_trial_job_task_configuration_and_step_permalink(client_logged_in, trials):
    hit = api(client_logged_in, q="commit")["results"][0]
    trial = trials["fix-git-hooks__A"]
    assert hit["trial"]["id"] == trial.pk and hit["job"]["name"] == "nightly-alpha"
    assert hit["task"] == "fix-git-hooks" and hit["configuration"]["key"] == "claude-base"
    assert hit["url"] == f"/trials/{trial.pk}/steps/3/"
    page = client_logged_in.get(hit["url"])
    assert page.status_code == 200 and b"zebrafish" in page.content


def test_the_task_of_a_hit_links_to_that_tasks_trials(client_logged_in, trials):
    html = client_logged_in.get("/search/", {"q": "commit"}).content.decode()
    assert re.search(
        r'<a href="/trials/\?task=fix-git-hooks(&amp;dataset=\d+)?"><span class="task-label" [^>]*>fix-git-hooks\b',
        html,
    )
    listed = client_logged_in.get("/trials/", {"task": "fix-git-hooks"}).content.decode()
    assert "fix-git-hooks__A" in listed and "fix-git-hooks__B" in listed and "parse-logs__C" not in listed


def test_the_snippet_is_escaped_and_highlights_the_match(client_logged_in, trials):
    hit = api(client_logged_in, q="zebrafish", task="fix-git-hooks", configuration="cand")["results"][0]
    assert "<script>" in hit["snippet"]  # the plain text is as written…
    assert hit["snippet_html"].startswith("…") is False
    assert "<mark>Zebrafish</mark> &lt;script&gt;alert(1)&lt;/script&gt;" in hit["snippet_html"]
    html = client_logged_in.get("/search/", {"q": "zebrafish"}).content.decode()
    assert "&lt;script&gt;alert(1)" in html and "<script>alert(1)" not in html
    assert html.count('class="hit-link"') == 3


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"job": "ALPHA"}, {"fix-git-hooks__A", "fix-git-hooks__B"}),  # part of a name, any case
        ({"configuration": "cand"}, {"fix-git-hooks__B", "parse-logs__C"}),
        ({"task": "git"}, {"fix-git-hooks__A", "fix-git-hooks__B"}),
        ({"tool": "python"}, {"fix-git-hooks__B"}),
        ({"tool": "PYTH"}, {"fix-git-hooks__B"}),  # the tool too: part of its name, any case
        ({"tool": "as"}, {"fix-git-hooks__A"}),
        ({"tool": "perl"}, set()),
        ({"job": "beta", "configuration": "claude-cand"}, {"parse-logs__C"}),
        ({"job": "gamma"}, set()),
    ],
)
def test_filters_narrow_the_hits(client_logged_in, trials, params, expected):
    assert hit_trials(api(client_logged_in, q="zebrafish", **params)) == expected


def test_filters_take_ids_too(client_logged_in, trials):
    trial = trials["parse-logs__C"]
    trial.refresh_from_db()
    assert hit_trials(api(client_logged_in, q="zebrafish", job=str(trial.job_id))) == {"parse-logs__C"}
    task = Task.objects.get(name="fix-git-hooks")
    assert hit_trials(api(client_logged_in, q="zebrafish", task=str(task.pk))) == {
        "fix-git-hooks__A",
        "fix-git-hooks__B",
    }


def test_hits_come_a_page_at_a_time(client_logged_in, trials, monkeypatch):
    monkeypatch.setattr(search_hits, "HITS_PAGE", 2)
    first, second = api(client_logged_in, q="zebrafish"), api(client_logged_in, q="zebrafish", page=2)
    assert len(first["results"]) == 2 and first["has_more"] is True
    assert len(second["results"]) == 1 and second["has_more"] is False
    assert hit_trials(first) | hit_trials(second) == set(trials)
    html = client_logged_in.get("/search/", {"q": "zebrafish"}).content.decode()
    assert 'rel="next" href="?q=zebrafish&amp;page=2"' in html


def test_a_trial_not_yet_indexed_is_said_to_be_pending(client_logged_in, trials, tmp_path):
    import_path(write_trial(tmp_path / "later", name="later__D", steps=[*good_steps(), tool_step(3, "bash", "x", "y")]))
    answer = api(client_logged_in, q="bash")
    assert answer["pending_trials"] == 1 and "later__D" not in hit_trials(answer)
    search.index_pending()
    assert "later__D" in hit_trials(api(client_logged_in, q="bash"))


def test_redacted_values_are_never_found_nor_shown(client_logged_in, tmp_path):
    item = {"item_id": "item-1", "content": "leakcanary-search", "redaction_state": "none"}
    steps = good_steps()
    steps[1]["tool_calls"].append({"tool_call_id": "c2", "function_name": "use_context", "arguments": dict(item)})
    steps[1]["observation"]["results"].append({"source_call_id": "c2", "content": "ok"})
    trial_dir = write_trial(tmp_path, steps=steps)
    redaction = {"type": "context.redaction.applied", "eventId": "e1", "sessionId": "s1",
                 "payload": {"redaction_id": "r1", "item_id": "item-1", "reason": "pii"}}  # fmt: skip
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    import_path(trial_dir)
    search.index_pending()
    assert api(client_logged_in, q="leakcanary")["results"] == []
    hit = api(client_logged_in, q="use_context")["results"][0]  # the step itself is found, its value withheld
    assert "leakcanary" not in orjson.dumps(hit).decode().lower() and "[redacted]" in hit["snippet"]
    assert b"leakcanary" not in client_logged_in.get("/search/", {"q": "use_context"}).content.lower()


def test_a_secret_in_a_step_is_masked_in_its_snippet(client_logged_in, tmp_path):
    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    import_path(write_trial(tmp_path, steps=[*good_steps(), tool_step(3, "bash", f"export TOKEN={key}", "done")]))
    search.index_pending()
    hit = api(client_logged_in, q="export token")["results"][0]
    assert key not in hit["snippet"] and "[redacted]" in hit["snippet"]


def test_the_page_is_in_the_nav_and_needs_a_login(client_logged_in):
    assert b'href="/search/"' in client_logged_in.get("/trials/").content
    client = Client()
    assert client.get("/search/").status_code == 302
    assert client.get("/api/search/", {"q": "x"}).status_code in (401, 403)


def test_a_page_of_hits_costs_the_same_queries_however_many_trials_match(
    client_logged_in, trials, tmp_path, django_assert_max_num_queries
):
    for i in range(6):
        name = f"more-{i}__X"
        steps = [*good_steps(), tool_step(3, "bash", "zebrafish", "")]
        import_path(write_trial(tmp_path / name, name=name, steps=steps))
    search.index_pending()
    with django_assert_max_num_queries(12):
        assert len(api(client_logged_in, q="zebrafish")["results"]) == 9


@pytest.mark.parametrize("candidates", [1, 2000], ids=["more candidates than listed", "listed outright"])
def test_a_word_too_common_to_list_is_found_the_same_through_the_index(
    client_logged_in, trials, monkeypatch, candidates
):
    monkeypatch.setattr(search, "CANDIDATES", candidates)
    assert hit_trials(api(client_logged_in, q="zebrafish")) == set(trials)
    assert hit_trials(api(client_logged_in, q="zebrafish", job="alpha", tool="python")) == {"fix-git-hooks__B"}
