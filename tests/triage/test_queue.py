"""The triage queue: one table, sortable and filterable, claim, next untriaged, bulk assign; its API."""

from __future__ import annotations

import pytest

from tests.builders import make_user
from tests.factories import ConfigurationFactory, JobFactory, PermissionDecisionFactory, TaskFactory, TrialFactory
from trials.models import Trial
from trials.models.qc import AuditEntry, TriageAssignment
from trials.triage import services, signatures

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue():
    """Four untriaged failures over two jobs and configurations, one of them a flagged pass."""
    job_a, job_b = JobFactory(key="job-a"), JobFactory(key="job-b")
    conf_a, conf_b = ConfigurationFactory(key="conf-a"), ConfigurationFactory(key="conf-b")
    task = TaskFactory(name="git-rebase")
    trials = {
        "timeout": TrialFactory(
            job=job_a,
            configuration=conf_a,
            task=task,
            status="timeout",
            reward=None,
            exception_type="AgentTimeoutError",
        ),
        "verifier": TrialFactory(
            job=job_a, configuration=conf_b, status="errored", reward=None, exception_type="VerifierTimeoutError"
        ),
        "failed": TrialFactory(job=job_b, configuration=conf_a, reward=0.0),
        "flagged": TrialFactory(job=job_b, configuration=conf_b, reward=1.0),
    }
    PermissionDecisionFactory(trial=trials["flagged"], side_effect_after_denial=True)
    TrialFactory(job=job_b, configuration=conf_b, reward=1.0)  # passing, unflagged: never queued
    signatures.sign_trials(t.pk for t in trials.values())
    return {name: Trial.objects.get(pk=t.pk) for name, t in trials.items()}


def listed(client, query: str = "") -> list[int]:
    return [row["trial"] for row in client.get(f"/api/qc/queue/?{query}").json()["results"]]


def test_the_queue_api_answers_rows_with_reasons_cluster_and_assignee(client, triager, queue):
    services.assign_trials(triager, [queue["timeout"]], triager)
    client.force_login(triager)
    body = client.get("/api/qc/queue/?sort=trial").json()
    assert body["count"] == 4
    row = body["results"][0]
    assert row["trial"] == queue["timeout"].pk and row["assignee"] == "tina"
    assert row["cluster"] == queue["timeout"].cluster_id and row["reasons"] == ["timeout: AgentTimeoutError"]
    assert {"trial", "reasons", "cluster", "assignee", "flags", "task", "job", "configuration"} <= row.keys()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("job=job-a", ["timeout", "verifier"]),
        ("configuration=conf-b", ["verifier", "flagged"]),
        ("task=git-rebase", ["timeout"]),
        ("category=verifier", ["verifier"]),
        ("flag=any", ["flagged"]),
        (f"flag={signatures.SIDE_EFFECT_AFTER_DENIAL}", ["flagged"]),
        ("flag=stale-success", []),
        ("assignee=none", ["verifier", "failed", "flagged"]),
        ("assignee=me", ["timeout"]),
        ("assignee=tina", ["timeout"]),
    ],
)
def test_the_queue_filters(client, triager, queue, query, expected):
    services.assign_trials(triager, [queue["timeout"]], triager)
    client.force_login(triager)
    assert listed(client, f"{query}&sort=trial") == [queue[name].pk for name in expected]
    page = client.get(f"/triage/?{query}&sort=trial")
    assert [t.pk for t in page.context["page"]] == [queue[name].pk for name in expected]


def test_the_queue_filters_by_cluster_and_sorts_both_ways(client, triager, queue):
    client.force_login(triager)
    assert listed(client, f"cluster={queue['failed'].cluster_id}") == [queue["failed"].pk]
    by_job = listed(client, "sort=job")
    assert by_job[:2] == sorted([queue["timeout"].pk, queue["verifier"].pk], reverse=True)
    assert listed(client, "sort=-trial") == sorted((t.pk for t in queue.values()), reverse=True)


def test_claiming_a_trial_assigns_it_to_me_with_an_audit_entry(client, triager, queue):
    client.force_login(triager)
    response = client.post(f"/triage/{queue['flagged'].pk}/claim/", {"query": "flag=any"})
    assert response.status_code == 302 and response["Location"] == "/triage/?flag=any"
    assert TriageAssignment.objects.get(trial=queue["flagged"]).assignee == triager
    assert AuditEntry.objects.get(action="assigned").actor == triager
    assert listed(client, "assignee=me") == [queue["flagged"].pk]


def test_next_untriaged_never_returns_a_trial_claimed_by_someone_else_or_by_me(client, triager, queue):
    other = make_user("otto", "triager")
    services.assign_trials(triager, [queue["timeout"]], other)
    services.assign_trials(triager, [queue["verifier"]], triager)
    client.force_login(triager)
    response = client.post("/triage/next/")
    assert response["Location"] == f"/trials/{queue['failed'].pk}/feedback/"  # the first nobody has claimed
    assert TriageAssignment.objects.get(trial=queue["failed"]).assignee == triager
    response = client.post("/triage/next/")  # failed is mine now: the next is another one
    assert response["Location"] == f"/trials/{queue['flagged'].pk}/feedback/"
    response = client.post("/triage/next/", {"job": "job-a"})  # timeout is otto's, verifier mine
    assert response.status_code == 302 and "feedback" not in response["Location"]


def test_bulk_assign_and_progress_per_assignee(client, triager, queue):
    lead = make_user("lead", "approver")
    client.force_login(lead)
    picked = [queue["timeout"].pk, queue["flagged"].pk]
    response = client.post("/triage/assign/", {"trials": picked, "assignee": triager.pk, "query": "sort=job"})
    assert response.status_code == 302 and response["Location"] == "/triage/?sort=job"
    assert set(TriageAssignment.objects.filter(assignee=triager).values_list("trial_id", flat=True)) == set(picked)
    page = client.get("/triage/")
    assert page.context["progress"] == [{"assignee": "tina", "done": 0, "remaining": 2, "total": 2}]
    html = page.content.decode()
    assert 'id="queue-table"' in html and "queue-group" not in html
