"""The trial list's text filters match part of a name, any case; columns sort; "role: unassigned" works."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from tests.factories import ConfigurationFactory, JobFactory, TaskFactory, TrialFactory
from trials.models import Configuration, Trial

pytestmark = pytest.mark.django_db


@pytest.fixture
def trials():
    """Four trials: two jobs, three configurations (one with no role), three tasks, two failure categories."""
    nightly, weekly = JobFactory(name="Nightly-Run"), JobFactory(name="weekly-run")
    base = ConfigurationFactory(key="claude-BASE", role=Configuration.Role.BASELINE)
    cand = ConfigurationFactory(key="claude-cand", role=Configuration.Role.CANDIDATE)
    loose = ConfigurationFactory(key="loose-config")
    git, git_clone, logs = TaskFactory(name="git"), TaskFactory(name="fix-git-clone"), TaskFactory(name="parse-logs")
    return {
        "a": TrialFactory(name="a", job=nightly, configuration=base, task=git, reward=1.0, cost_usd=0.3),
        "b": TrialFactory(
            name="b", job=nightly, configuration=cand, task=git_clone, reward=0.0, failure_category="Timeout-Agent"
        ),
        "c": TrialFactory(name="c", job=weekly, configuration=loose, task=logs, reward=0.5, cost_usd=0.1),
        "d": TrialFactory(name="d", job=weekly, configuration=None, task=logs, reward=None, status="errored"),
    }


def listed(client, **params) -> list[str]:
    html = client.get("/trials/", params).content.decode()
    return re.findall(r'<a class="trial-link" href="/trials/\d+/[^"]*">([^<]+)</a>', html)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"job": "nightly"}, {"a", "b"}),  # part of the name, any case
        ({"job": "RUN"}, {"a", "b", "c", "d"}),
        ({"configuration": "base"}, {"a"}),
        ({"configuration": "CLAUDE"}, {"a", "b"}),
        ({"task": "LOGS"}, {"c", "d"}),
        ({"task": "clone"}, {"b"}),
        ({"failure_category": "timeout"}, {"b"}),
        ({"job": "monthly"}, set()),
    ],
)
def test_text_filters_match_part_of_a_name_case_insensitively(client_logged_in, trials, params, expected):
    assert set(listed(client_logged_in, **params)) == expected
    api = client_logged_in.get("/api/trials/", params).json()
    assert {row["name"] for row in api["results"]} == expected  # the API shares the filters


def test_a_name_that_exists_exactly_lists_only_it_so_links_list_what_they_count(client_logged_in, trials):
    assert set(listed(client_logged_in, task="git")) == {"a"}  # not fix-git-clone: a task is named "git"
    assert set(listed(client_logged_in, task="gi")) == {"a", "b"}


def test_filters_take_ids(client_logged_in, trials):
    b = trials["b"]
    assert set(listed(client_logged_in, job=str(b.job_id))) == {"a", "b"}
    assert set(listed(client_logged_in, configuration=str(b.configuration_id))) == {"b"}
    assert set(listed(client_logged_in, task=str(b.task_id))) == {"b"}


def test_role_unassigned_lists_trials_whose_configuration_has_no_role(client_logged_in, trials):
    assert set(listed(client_logged_in, role="unassigned")) == {"c", "d"}
    assert set(listed(client_logged_in, role="baseline")) == {"a"}
    html = client_logged_in.get("/trials/").content.decode()
    assert '<option value="unassigned">unassigned</option>' in html
    job = trials["c"].job
    page = client_logged_in.get(f"/jobs/{job.pk}/", {"role": "unassigned"}).content.decode()
    assert "parse-logs" in page and '<option value="unassigned" selected>' in page


def test_the_list_has_a_job_column_linking_to_the_job(client_logged_in, trials):
    html = client_logged_in.get("/trials/").content.decode()
    assert "<th>" in html and ">Job<" in html
    assert f'<a class="job-link" href="/jobs/{trials["a"].job_id}/">Nightly-Run</a>' in html


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("name", ["a", "b", "c", "d"]),
        ("-name", ["d", "c", "b", "a"]),
        ("job", ["a", "b", "c", "d"]),  # Nightly-Run before weekly-run, then by id
        ("-job", ["d", "c", "b", "a"]),
        ("task", ["b", "a", "c", "d"]),
        ("configuration", ["d", "a", "b", "c"]),  # no configuration first (NULL sorts low on SQLite)
        ("-reward", ["a", "c", "b", "d"]),
        ("cost", ["b", "d", "c", "a"]),
        ("failure", ["a", "c", "d", "b"]),
    ],
)
def test_columns_sort(client_logged_in, trials, sort, expected):
    if connection.vendor == "postgresql" and sort == "configuration":
        expected = ["a", "b", "c", "d"]  # NULL sorts high on PostgreSQL
    assert listed(client_logged_in, sort=sort) == expected


def test_clicking_a_header_sorts_by_it_then_reverses(client_logged_in, trials):
    html = client_logged_in.get("/trials/", {"job": "run"}).content.decode()
    assert 'href="?job=run&amp;sort=job" aria-sort="none" data-sort="job">Job</a>' in html
    html = client_logged_in.get("/trials/", {"job": "run", "sort": "job"}).content.decode()
    assert 'href="?job=run&amp;sort=-job" aria-sort="ascending" data-sort="-job">Job ▲</a>' in html


def test_an_unknown_sort_key_falls_back_to_newest_first(client_logged_in, trials):
    assert listed(client_logged_in, sort="exception_message; drop table") == ["d", "c", "b", "a"]
    assert Trial.objects.count() == 4
