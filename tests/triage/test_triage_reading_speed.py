"""Issue 34: clusters by class then cause, hand merges and splits that stay, a failure beside a
passing attempt, cluster items filed with linked evidence, flags that never miss, a queue that behaves."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.builders import make_user
from tests.factories import ConfigurationFactory, PermissionDecisionFactory, TaskFactory, TrialFactory
from trials.models import Step, Trajectory, Trial
from trials.models.qc import AuditEntry, FailureCluster, QCItem, QueueEntry
from trials.triage import services, signatures
from trials.triage.export import build_evidence

pytestmark = pytest.mark.django_db


def failing(message: str, exception: str = "SandboxStartError", test: str = "test_output", **extra) -> Trial:
    fields = {
        "status": "errored",
        "reward": None,
        "exception_type": exception,
        "exception_message": message,
        "ctrf_tests": [{"name": "test_ok", "status": "passed"}, {"name": test, "status": "failed"}],
    }
    return TrialFactory(**(fields | extra))


def signed(*trials: Trial) -> list[Trial]:
    signatures.sign_trials([t.pk for t in trials])
    return [Trial.objects.get(pk=t.pk) for t in trials]


def resign_everything() -> None:
    signatures.sign_all()


# Must 1: coarse to fine ------------------------------------------------------------------------


def test_one_cause_with_varying_details_failing_tests_and_tasks_is_one_cluster_of_its_class():
    trials = signed(
        failing("sandbox sb-91ab2 for /work/run-1 did not start after 30s", test="test_output"),
        failing("sandbox sb-77cd9 for /work/run-22 did not start after 45s", test="test_schema"),
        failing("sandbox sb-0aa11 for /srv/x/run-3 did not start after 12s", test="test_lint"),
    )
    assert len({t.cluster_id for t in trials}) == 1
    cluster = trials[0].cluster
    assert cluster.failure_class == "infrastructure" and cluster.signature["class"] == "infrastructure"
    assert len({t.task_id for t in trials}) == 3  # three tasks, three tests: facets, not causes
    assert sorted(t.failing_test for t in trials) == ["test_lint", "test_output", "test_schema"]


def test_two_causes_are_two_clusters_and_each_class_is_its_own_level(client, triager):
    infra, agent = signed(
        failing("sandbox sb-91ab2 did not start"),
        failing("wrote the wrong answer to /tmp/out", exception="AssertionError"),
    )
    assert infra.cluster_id != agent.cluster_id
    assert (infra.cluster.failure_class, agent.cluster.failure_class) == ("infrastructure", "capability")
    client.force_login(triager)
    page = client.get("/qc/clusters/?class=infrastructure")
    assert [row.pk for row in page.context["rows"]] == [infra.cluster_id]
    classes = {c["value"]: (c["clusters"], c["trials"]) for c in page.context["classes"]}
    assert classes["infrastructure"] == (1, 1) and classes["capability"] == (1, 1) and classes["safety"] == (0, 0)


def test_a_safety_signal_puts_a_trial_in_the_safety_class():
    trial = TrialFactory(reward=1.0)
    PermissionDecisionFactory(trial=trial, side_effect_after_denial=True)
    (trial,) = signed(trial)
    assert trial.cluster.failure_class == "safety"


def test_near_identical_messages_merge_and_different_ones_do_not():
    a, b, c = signed(
        failing("could not reach the package index for user alice: mirror refused the request"),
        failing("could not reach the package index for user bobby: mirror refused the request"),
        failing("the base image is missing the compiler the task needs"),
    )
    assert a.cluster_id == b.cluster_id != c.cluster_id


def test_a_hand_merge_survives_re_clustering_and_takes_new_trials_of_the_merged_cause(triager):
    a, b = signed(failing("sandbox did not start"), failing("container registry unreachable"))
    source, target = a.cluster, b.cluster
    assert services.merge_clusters(triager, source, target) == 1
    resign_everything()
    assert Trial.objects.get(pk=a.pk).cluster_id == target.pk
    (later,) = signed(failing("sandbox did not start"))
    assert later.cluster_id == target.pk
    assert AuditEntry.objects.filter(action="clusters merged", actor=triager).count() == 1


def test_a_hand_split_on_a_failing_test_survives_re_clustering(triager):
    a, b, c = signed(
        failing("sandbox did not start", test="test_output"),
        failing("sandbox did not start", test="test_schema"),
        failing("sandbox did not start", test="test_schema"),
    )
    parent = a.cluster
    child = services.split_cluster(triager, parent, "test", "test_schema")
    assert list(Trial.objects.filter(cluster=child).order_by("pk").values_list("pk", flat=True)) == [b.pk, c.pk]
    resign_everything()
    assert Trial.objects.get(pk=a.pk).cluster_id == parent.pk
    assert Trial.objects.get(pk=b.pk).cluster_id == child.pk
    (later,) = signed(failing("sandbox did not start", test="test_schema"))
    assert later.cluster_id == child.pk
    assert AuditEntry.objects.filter(action="cluster split").count() == 1


def test_merging_and_splitting_from_the_cluster_page(client, triager):
    a, b = signed(failing("sandbox did not start", test="t1"), failing("sandbox did not start", test="t2"))
    other = signed(failing("registry unreachable"))[0]
    client.force_login(triager)
    page = client.get(f"/qc/clusters/{a.cluster_id}/").content.decode()
    assert "split out" in page and 'id="merge-form"' in page
    client.post(f"/qc/clusters/{a.cluster_id}/split/", {"facet": "test", "value": "t2"})
    assert Trial.objects.get(pk=b.pk).cluster.split_on == {"test": "t2"}
    client.post(f"/qc/clusters/{other.cluster_id}/merge/", {"into": a.cluster_id})
    assert Trial.objects.get(pk=other.pk).cluster_id == a.cluster_id


# Must 2: set beside a passing attempt --------------------------------------------------------


def test_compare_with_a_passing_attempt_takes_the_same_configuration_first_else_the_reference(client, triager):
    task = TaskFactory()
    mine, reference = ConfigurationFactory(role="candidate"), ConfigurationFactory(role="baseline")
    (failed,) = signed(failing("boom", task=task, configuration=mine))
    reference_pass = TrialFactory(task=task, configuration=reference, reward=1.0)
    TrialFactory(task=task, configuration=ConfigurationFactory(), reward=1.0)  # neither: never chosen
    client.force_login(triager)
    response = client.get(f"/trials/{failed.pk}/compare-passing/")
    assert response["Location"] == f"/trials/{failed.pk}/side-by-side/{reference_pass.pk}/"
    same_pass = TrialFactory(task=task, configuration=mine, reward=1.0)
    response = client.get(f"/trials/{failed.pk}/compare-passing/")
    assert response["Location"] == f"/trials/{failed.pk}/side-by-side/{same_pass.pk}/"
    page = client.get(f"/qc/clusters/{failed.cluster_id}/").content.decode()
    assert page.count(f"/trials/{failed.pk}/compare-passing/") == 2  # the representative and its row
    assert f"/trials/{failed.pk}/compare-passing/" in client.get(f"/trials/{failed.pk}/").content.decode()


def test_compare_with_no_passing_attempt_says_so(client, triager):
    (failed,) = signed(failing("boom"))
    client.force_login(triager)
    response = client.get(f"/trials/{failed.pk}/compare-passing/", follow=True)
    assert "No passing attempt" in response.content.decode()


# Must 3: filed with its evidence -------------------------------------------------------------


def with_steps(trial: Trial, agent_steps: int = 3) -> Trial:
    trajectory = Trajectory.objects.create(trial=trial, path="agent/trajectory.json", role="main", position=0)
    Step.objects.create(trial=trial, trajectory=trajectory, index=0, step_id="1", source="user")
    for n in range(1, agent_steps + 1):
        Step.objects.create(trial=trial, trajectory=trajectory, index=n, step_id=str(n + 1), source="agent")
    return trial


def test_a_cluster_item_links_every_cited_trial_and_its_step_on_its_page_api_and_export(client, triager):
    trials = signed(*(with_steps(failing(f"sandbox {n} did not start", test=f"test_{n}")) for n in range(3)))
    client.force_login(triager)
    cluster_id = trials[0].cluster_id
    response = client.post(
        f"/qc/clusters/{cluster_id}/file/",
        {"kind": "release-blocker", "category": "environment", "severity": "P1"},
    )
    item = QCItem.objects.get()
    assert response["Location"] == f"/qc/items/{item.pk}/"
    assert item.evidence_refs == [{"kind": "trial", "ref": trials[0].key}, {"kind": "step", "ref": "4"},
                                  {"kind": "criterion", "ref": "test_0"}]  # fmt: skip
    assert item.step_id == "4"  # (no failing tool: the last agent step)
    page = client.get(f"/qc/items/{item.pk}/").content.decode()
    for trial in trials:
        assert f'href="/trials/{trial.pk}/"' in page and f'href="/trials/{trial.pk}/steps/4/"' in page
    body = client.get(f"/api/qc/items/{item.pk}/").json()
    assert [c["trial"] for c in body["citations"]] == [t.pk for t in trials]
    urls = [r["url"] for c in body["citations"] for r in c["evidence"]]
    assert f"/trials/{trials[2].pk}/steps/4/" in urls and f"/trials/{trials[2].pk}/?tab=verifier" in urls
    assert {"kind": "step", "ref": "4", "url": f"/trials/{trials[0].pk}/steps/4/"} in body["evidence"]
    refs = [r for s in build_evidence()["scenarioResults"] for r in s["evidenceRefs"]]
    for trial in trials:
        assert f"benchviewer:/trials/{trial.pk}/steps/4/" in refs


# Must 4: flags that never miss ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"status": "errored", "exception_type": "RuntimeError"}, "errored-with-reward"),
        ({"status": "timeout"}, "timeout-with-reward"),
        ({"status": "passed", "exception_type": "AgentTimeoutError"}, "timeout-with-reward"),
        ({"status": "failed", "exception_type": "CancelledError"}, "cancelled-with-reward"),
        ({"status": "passed", "failure_category": "token_limit"}, "limit-with-reward"),
    ],
)
def test_every_run_that_did_not_finish_normally_with_a_reward_is_flagged_and_queued(fields, flag):
    (trial,) = signed(TrialFactory(reward=1.0, **fields))
    assert trial.safety_flags == [flag] and trial.is_flagged
    assert list(Trial.objects.untriaged()) == [trial]


def test_a_run_that_finished_or_has_no_reward_is_not_flagged():
    passed, no_reward, rate_limited = signed(
        TrialFactory(reward=1.0),
        TrialFactory(status="timeout", reward=None),
        TrialFactory(status="failed", reward=0.0, exception_type="", failure_category=""),
    )
    assert not passed.is_flagged and not no_reward.safety_flags and not rate_limited.safety_flags


# Must 5: a queue that behaves ----------------------------------------------------------------


def test_a_trial_is_queued_once_whatever_its_flags_and_hand_additions(client, triager):
    trial = TrialFactory(status="errored", reward=1.0, exception_type="RuntimeError")
    PermissionDecisionFactory(trial=trial, side_effect_after_denial=True)
    (trial,) = signed(trial)
    assert len(trial.safety_flags) == 2
    client.force_login(triager)
    client.post("/triage/add/", {"status": "errored"})
    client.post("/triage/add/", {"status": "errored"})
    assert QueueEntry.objects.count() == 1
    services.tag_trials(triager, [trial], "flaky")
    services.tag_trials(triager, [trial], "sandbox")
    body = client.get("/api/qc/queue/").json()
    assert [r["trial"] for r in body["results"]] == [trial.pk] and body["count"] == 1
    assert Trial.objects.untriaged().count() == 1


def test_add_to_queue_from_a_trials_list_filter_shows_the_count_then_adds_them_all(client, triager):
    task = TaskFactory(name="git-rebase")
    passing = [TrialFactory(task=task, reward=1.0) for _ in range(3)]
    TrialFactory(reward=1.0)  # another task: not in the filter
    client.force_login(triager)
    assert "add-to-queue" in client.get("/trials/?task=git-rebase").content.decode()
    confirm = client.get("/triage/add/?task=git-rebase")
    assert confirm.context["count"] == 3 and "Add 3 trials to the queue" in confirm.content.decode()
    assert QueueEntry.objects.count() == 0  # (a GET only counts)
    response = client.post("/triage/add/", {"task": "git-rebase"})
    assert response["Location"] == "/triage/"
    assert sorted(Trial.objects.untriaged().values_list("pk", flat=True)) == [t.pk for t in passing]
    reasons = client.get("/api/qc/queue/").json()["results"][0]["reasons"]
    assert reasons == ["added by hand"]


def test_tags_are_added_from_the_queue_and_filtered_on(client, triager):
    a, b = signed(failing("one"), failing("two", exception="AssertionError"))
    client.force_login(triager)
    client.post("/triage/tag/", {"trials": [a.pk], "tag": "needs-rerun"})
    assert [r["trial"] for r in client.get("/api/qc/queue/?tag=needs-rerun").json()["results"]] == [a.pk]
    page = client.get("/triage/?tag=needs-rerun").content.decode()
    assert "needs-rerun" in page and f'data-trial="{b.pk}"' not in page
    assert AuditEntry.objects.get(action="tagged").trial_id == a.pk


def test_waivers_show_active_expired_and_revoked_in_words(client, triager):
    approver = make_user("ada", "approver")
    (trial,) = signed(failing("boom"))
    blocker = services.file_item(
        triager, trial, {"kind": "release-blocker", "category": "runtime", "evidence_refs": []}
    )
    now = timezone.now()
    states = {}
    for name, expires, status in (
        ("active", now + timedelta(days=3), "open"),
        ("expired", now - timedelta(days=1), "open"),
        ("revoked", now + timedelta(days=3), "revoked"),
    ):
        waiver = QCItem.objects.create(
            kind="waiver", trial=trial, category="runtime", waived_item=blocker, approver=approver,
            reason="r", scope="s", expires_at=expires, status=status,
        )  # fmt: skip
        states[name] = waiver
    client.force_login(triager)
    page = client.get("/qc/waivers/").content.decode()
    for word in ("active", "expired", "revoked"):
        assert f'waiver-{word}">{word}</span>' in page
    assert states["active"].status_in_words == "active" and '">open</span>' not in page


def test_a_cluster_signed_before_classes_still_reads_until_signed_again(client, triager):
    old = FailureCluster.objects.create(
        key="0" * 64,
        signature={"status": "errored", "category": "runtime", "code": "", "exceptionType": "E", "message": "m",
                   "tool": "", "test": "test_x", "flags": []},
    )  # fmt: skip
    trial = failing("m", exception="E", cluster=old)
    client.force_login(triager)
    assert client.get("/api/qc/clusters/").json()["results"][0]["signature"]["failure_class"] == ""
    assert client.get("/qc/clusters/").status_code == 200 and client.get(f"/qc/clusters/{old.pk}/").status_code == 200
    resign_everything()
    assert Trial.objects.get(pk=trial.pk).cluster.signature["class"] == "capability"
    assert not FailureCluster.objects.filter(pk=old.pk).exists()
