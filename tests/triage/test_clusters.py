"""Failure clusters: signatures, safety flags, filing a cluster in one action, the pages and API."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.builders import make_user
from tests.factories import (
    ConfigurationFactory,
    DatasetFactory,
    JobFactory,
    PermissionDecisionFactory,
    TaskFactory,
    TrialFactory,
)
from trials.models import RuntimeEvent, Step, ToolCall, Trajectory, Trial
from trials.models.qc import AuditEntry, FailureCluster, QCItem
from trials.triage import cluster_titles, signatures

pytestmark = pytest.mark.django_db


def errored(message: str, exception: str = "FileNotFoundError", **extra) -> Trial:
    fields = {"status": "errored", "reward": None, "exception_type": exception, "exception_message": message}
    return TrialFactory(**(fields | extra))


def signed(*trials: Trial) -> list[Trial]:
    signatures.sign_trials([t.pk for t in trials])
    return [Trial.objects.get(pk=t.pk) for t in trials]


def test_one_cause_with_varying_numbers_paths_ids_and_times_is_one_cluster():
    trials = signed(
        errored("No such file: /tmp/run-8812/out.txt at 2026-01-02T03:04:05Z (call_8f2k9, 0x7f3a9b2c)"),
        errored("No such file: /var/lib/job/17/result.json at 2025-11-30 23:59:01 (call_zz81a, 0xdeadbeef)"),
        errored("No such file: ./build/x.log at 2024-05-05T10:00:00+02:00 (call_0000q, 0x1)"),
    )
    assert len({t.cluster_id for t in trials}) == 1
    cluster = trials[0].cluster
    assert cluster.signature["message"] == "No such file: <path> at <ts> (<id>, <hex>)"
    assert cluster.signature["exceptionType"] == "FileNotFoundError"


def test_two_causes_are_two_clusters_and_a_passing_unflagged_trial_is_in_none():
    first, second, other_exception, passing = signed(
        errored("No such file: /tmp/a.txt"),
        errored("Permission denied: /tmp/a.txt"),
        errored("No such file: /tmp/a.txt", exception="VerifierTimeoutError"),
        TrialFactory(reward=1.0),
    )
    assert len({first.cluster_id, second.cluster_id, other_exception.cluster_id}) == 3
    assert passing.cluster_id is None and not passing.is_flagged
    assert FailureCluster.objects.count() == 3


def test_failures_known_only_by_their_task_are_a_cluster_a_task_and_those_with_a_cause_ignore_it():
    """A wrong answer with nothing else known says no more than where it was given: one cluster per task
    of its dataset, not one bin for all."""
    tb, inspect = DatasetFactory(name="terminal-bench-core"), DatasetFactory(name="theory_of_mind")
    hello, maze = TaskFactory(name="hello-world", dataset=tb), TaskFactory(name="maze", dataset=tb)
    hello_a, hello_b, maze_a, inspect_a, errored_tb, errored_inspect = signed(
        TrialFactory(reward=0.0, task=hello),
        TrialFactory(reward=0.0, task=hello),
        TrialFactory(reward=0.0, task=maze),
        TrialFactory(reward=0.0, task=TaskFactory(name="hello-world", dataset=inspect)),
        errored("No such file: /tmp/a.txt", task=hello),
        errored("No such file: /tmp/b.txt", dataset=inspect),
    )
    assert hello_a.cluster_id == hello_b.cluster_id
    assert len({hello_a.cluster_id, maze_a.cluster_id, inspect_a.cluster_id}) == 3
    title = "capability · no error, task hello-world, in terminal-bench-core"
    assert cluster_titles.describe(hello_a.cluster.signature) == title
    assert errored_tb.cluster_id == errored_inspect.cluster_id  # (a cause is the same cause in any task)
    assert "benchmark" not in errored_tb.cluster.signature and "task" not in errored_tb.cluster.signature


def test_wrong_answers_with_a_transcript_and_nothing_else_known_are_one_cluster_a_benchmark():
    """Only a trial with no step is known by its task alone; answers given in a transcript share a cause."""
    inspect = DatasetFactory(name="theory_of_mind")
    first, second = signed(
        *(TrialFactory(reward=0.0, step_count=4, task=TaskFactory(name=name, dataset=inspect)) for name in "12")
    )
    assert first.cluster_id == second.cluster_id
    assert cluster_titles.describe(first.cluster.signature) == "capability · no error, in theory_of_mind"


def test_the_cluster_pages_name_the_benchmark_of_failures_with_no_cause(client, triager):
    task = TaskFactory(name="hello-world", dataset=DatasetFactory(name="terminal-bench-core"))
    trial = signed(TrialFactory(reward=0.0, task=task))[0]
    client.force_login(triager)
    listing = client.get("/qc/clusters/").content.decode()
    assert 'class="cluster-title" title="no error, task hello-world, in terminal-bench-core"' in listing
    page = client.get(f"/qc/clusters/{trial.cluster_id}/").content.decode()
    assert "<dt>Benchmark</dt><dd><code>terminal-bench-core</code>" in page


def test_the_failing_tool_is_part_of_the_signature_and_the_failing_test_a_facet_of_it():
    a, b, c, d, e = (
        TrialFactory(reward=0.0, ctrf_tests=[{"name": "test_ok", "status": "passed"}, {"name": n, "status": "failed"}])
        for n in ("test_output", "test_schema", "test_output", "test_schema", "test_output[2]")
    )
    for trial in (a, d):
        RuntimeEvent.objects.create(trial=trial, type="tool.failed", sequence=3, payload={"toolName": "write_file"})
    a, b, c, d, e = signed(a, b, c, d, e)
    assert a.cluster.signature["tool"] == "write_file" and b.cluster.signature["tool"] == ""
    assert a.cluster_id == d.cluster_id and "test" not in a.cluster.signature  # the tool names the cause
    assert (a.failing_test, b.failing_test, c.failing_test) == ("test_output", "test_schema", "test_output")
    assert b.cluster.failure_class == "capability"


def test_tests_failed_with_nothing_else_known_cluster_by_the_first_failing_test():
    b, c, e = (
        TrialFactory(reward=0.0, ctrf_tests=[{"name": "test_ok", "status": "passed"}, {"name": n, "status": "failed"}])
        for n in ("test_schema", "test_output", "test_output[2]")
    )
    b, c, e = signed(b, c, e)
    assert b.cluster_id != c.cluster_id == e.cluster_id  # (one test, whatever its parameters)
    assert (b.cluster.signature["test"], c.cluster.signature["test"]) == ("test_schema", "test_output")
    assert cluster_titles.cause_words(c.cluster.signature).startswith("tests failed: test_output")
    assert e.failing_test == "test_output[2]"  # (the facet keeps the test as it ran)


@pytest.mark.parametrize(
    ("flag", "make"),
    [
        (
            signatures.SIDE_EFFECT_AFTER_DENIAL,
            lambda t: PermissionDecisionFactory(trial=t, side_effect_after_denial=True),
        ),
        (
            signatures.PERMISSION_BYPASS,
            lambda t: RuntimeEvent.objects.create(trial=t, type="permission.resolved", payload={"decision": "bypass"}),
        ),
        (
            signatures.STALE_SUCCESS,
            lambda t: RuntimeEvent.objects.create(
                trial=t, type="benchmark.trial.failed", payload={"failureCategory": "stale-success"}
            ),
        ),
    ],
)
def test_a_safety_signal_flags_a_passing_trial_into_the_queue_and_its_cluster(client, triager, flag, make):
    trial = TrialFactory(reward=1.0)
    make(trial)
    (trial,) = signed(trial)
    assert trial.status == "passed" and trial.is_flagged and trial.safety_flags == [flag]
    assert trial.cluster is not None and trial.cluster.signature["flags"] == [flag]
    assert list(Trial.objects.untriaged()) == [trial]
    client.force_login(triager)
    rows = client.get("/api/qc/queue/").json()["results"]
    assert [(r["trial"], r["cluster"], r["flags"]) for r in rows] == [(trial.pk, trial.cluster_id, [flag])]
    assert rows[0]["reasons"] == [signatures.FLAG_LABELS[flag]]
    home = client.get("/").content.decode()
    assert f"?flag={flag}" in home and signatures.FLAG_LABELS[flag] in home
    assert client.get(f"/trials/?flag={flag}").context["page"].paginator.count == 1


def test_an_errored_trial_that_still_has_a_reward_is_flagged_in_the_cluster_of_its_cause():
    flagged, plain = signed(errored("boom", reward=0.5), errored("boom"))
    assert flagged.safety_flags == [signatures.ERRORED_WITH_REWARD] and flagged.is_flagged
    assert plain.safety_flags == [] and plain.cluster_id is not None
    assert flagged.cluster_id == plain.cluster_id


def test_an_errored_trial_that_still_passed_is_flagged_in_a_flagged_pass_cluster_of_its_cause():
    """Reward 1.0 passes however the run ended (trials.models.trial.PASSES): no failure to file with the
    errors of its cause, but beside them, the same cause under the class of flagged passes."""
    passed, plain = signed(errored("boom", reward=1.0), errored("boom"))
    assert passed.safety_flags == [signatures.ERRORED_WITH_REWARD] and passed.cluster_id != plain.cluster_id
    assert passed.cluster.failure_class == "flagged_pass" and plain.cluster.failure_class == "capability"
    assert passed.failure_class == "" and plain.failure_class == "capability"
    assert {**passed.cluster.signature, "class": "capability"} == plain.cluster.signature


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"status": "timeout", "exception_type": "AgentTimeoutError"}, signatures.TIMEOUT_WITH_REWARD),
        ({"status": "passed", "failure_category": "agent_timeout"}, signatures.TIMEOUT_WITH_REWARD),
        ({"status": "passed", "exception_type": "CancelledError"}, signatures.CANCELLED_WITH_REWARD),
        ({"status": "failed", "exception_type": "TokenLimitExceeded"}, signatures.LIMIT_WITH_REWARD),
    ],
)
def test_a_trial_that_ended_abnormally_yet_has_a_reward_is_flagged_by_how_it_ended(fields, flag):
    flagged, no_reward, normal = signed(
        TrialFactory(reward=1.0, **fields), TrialFactory(reward=None, **fields), TrialFactory(reward=1.0)
    )
    assert flagged.safety_flags == [flag] and flagged.is_flagged
    assert no_reward.safety_flags == [] and normal.safety_flags == []


def test_an_import_signs_its_failed_trials(failed):
    assert failed and all(Trial.objects.get(pk=t.pk).cluster_id for t in failed)


def test_the_backfill_command_signs_trials_written_before(capsys):
    trial = errored("boom")
    assert trial.cluster_id is None
    call_command("sign_failures")
    assert Trial.objects.get(pk=trial.pk).cluster_id is not None
    assert "1 trial(s) in failure clusters" in capsys.readouterr().out


def cluster_fixture():
    """Two causes: three errored trials (two candidate, one baseline) and one candidate only."""
    baseline = ConfigurationFactory(key="base", role="baseline")
    candidate = ConfigurationFactory(key="cand", role="candidate")
    job = JobFactory(key="job-a")
    shared = signed(
        errored("disk full at /tmp/1", configuration=baseline, job=job),
        errored("disk full at /tmp/2", configuration=candidate, job=job),
        errored("disk full at /tmp/3", configuration=candidate, job=job),
    )
    new = signed(errored("socket closed after 30s", exception="ConnectionError", configuration=candidate, job=job))
    return shared, new


def test_the_cluster_api_lists_each_cluster_with_its_trials_and_configurations(client, triager):
    shared, new = cluster_fixture()
    client.force_login(triager)
    body = client.get("/api/qc/clusters/").json()
    assert body["count"] == 2
    first, second = body["results"]
    assert first["id"] == shared[0].cluster_id and first["count"] == 3
    assert first["trials"] == [t.pk for t in shared]
    assert first["by_configuration"] == {"cand": 2, "base": 1}
    assert first["signature"]["exceptionType"] == "FileNotFoundError" and not first["new_in_candidate"]
    assert second["trials"] == [new[0].pk] and second["new_in_candidate"]
    only_base = client.get("/api/qc/clusters/?configuration=base").json()
    assert [(c["id"], c["count"]) for c in only_base["results"]] == [(shared[0].cluster_id, 1)]
    detail = client.get(f"/api/qc/clusters/{new[0].cluster_id}/").json()
    assert detail["count"] == 1 and detail["signature"]["message"] == "socket closed after <n>s"
    assert client.get("/api/qc/clusters/999999/").status_code == 404


def test_filing_a_cluster_makes_one_item_citing_every_trial_and_one_audit_entry(client, triager):
    shared, _ = cluster_fixture()
    client.force_login(triager)
    body = {"kind": "release-blocker", "category": "environment", "severity": "P0", "note": "disk fills up"}
    response = client.post(f"/api/qc/clusters/{shared[0].cluster_id}/feedback/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    item = QCItem.objects.get()
    assert set(item.cited_trials.all()) == set(shared) and item.cluster_id == shared[0].cluster_id
    cited = {c.trial_id: c.evidence_refs for c in item.citations.all()}
    assert cited == {t.pk: [{"kind": "trial", "ref": t.key}] for t in shared}
    entries = AuditEntry.objects.filter(item=item)
    assert [(e.action, e.actor) for e in entries] == [("filed for a cluster", triager)]
    assert entries[0].changes["trials"] == [None, [t.pk for t in shared]]
    for trial in shared:
        assert item.label in client.get(f"/trials/{trial.pk}/").content.decode()
    assert "Cites 3 trials" in client.get(item.get_absolute_url()).content.decode()
    assert not Trial.objects.untriaged().filter(pk__in=[t.pk for t in shared]).exists()


def test_filing_a_cluster_from_its_page(client, triager):
    shared, _ = cluster_fixture()
    client.force_login(triager)
    url = f"/qc/clusters/{shared[0].cluster_id}/"
    page = client.get(url).content.decode()
    assert 'id="cluster-form"' in page and "File QC item for 3 trials" in page
    # a refused filing comes back scrolled to the form, its errors in view, not to the page's top
    assert f'action="{url}file/#cluster-form"' in page
    bad = client.post(f"{url}file/", {"kind": "replay-fixture", "category": "environment", "severity": "P1"})
    assert bad.status_code == 200 and "Name the replay fixture" in bad.content.decode()
    assert f'action="{url}file/#cluster-form"' in bad.content.decode()
    good = {"kind": "replay-fixture", "category": "environment", "severity": "P1", "target_name": "disk-full"}
    response = client.post(f"{url}file/", good)
    item = QCItem.objects.get()
    assert response.status_code == 302 and response["Location"] == item.get_absolute_url()
    assert item.cited_trials.count() == 3
    said = client.get(item.get_absolute_url()).content.decode()
    assert f"Filed {item.label} for 3 trials of C-{shared[0].cluster_id}." in said


def test_a_viewer_may_read_clusters_but_not_file_claim_or_assign(client, triager):
    shared, _ = cluster_fixture()
    viewer = make_user("vic", "viewer")
    client.force_login(viewer)
    cluster_id = shared[0].cluster_id
    assert client.get("/qc/clusters/").status_code == 200
    page = client.get(f"/qc/clusters/{cluster_id}/")
    assert page.status_code == 200 and 'id="cluster-form"' not in page.content.decode()
    body = {"kind": "release-blocker", "category": "environment"}
    assert client.post(f"/api/qc/clusters/{cluster_id}/feedback/", body).status_code == 403
    assert client.post(f"/qc/clusters/{cluster_id}/file/", body).status_code == 403
    assert client.post(f"/triage/{shared[0].pk}/claim/").status_code == 403
    assert client.post("/triage/assign/", {"trials": [shared[0].pk], "assignee": triager.pk}).status_code == 403
    assert client.post("/triage/next/").status_code == 403
    assert not QCItem.objects.exists() and not AuditEntry.objects.exists()


def test_the_cluster_pages_link_every_number_to_its_trials(client, triager):
    shared, new = cluster_fixture()
    client.force_login(triager)
    listing = client.get("/qc/clusters/").content.decode()
    assert f'href="/qc/clusters/{shared[0].cluster_id}/#trials">3</a>' in listing
    assert "new in candidate" in listing
    detail = client.get(f"/qc/clusters/{shared[0].cluster_id}/?configuration={shared[1].configuration_id}")
    assert {t.pk for t in detail.context["page"]} == {shared[1].pk, shared[2].pk}
    assert detail.context["example"].trial == shared[0]
    breakdown = detail.content.decode().split('id="cluster-items"')[0]
    assert f'href="/jobs/{shared[1].job_id}/"' in breakdown  # its job and configuration open too
    assert f'href="/trials/?configuration={shared[1].configuration_id}"' in breakdown


def test_a_cluster_its_trials_left_is_gone_with_its_signature(client, triager):
    (trial,) = signed(errored("token sk-live-abcdef leaked in /tmp/x"))
    old = trial.cluster_id
    Trial.objects.filter(pk=trial.pk).update(exception_message="token [REDACTED] leaked in /tmp/x")  # a rescrub
    (trial,) = signed(trial)
    assert trial.cluster_id != old and not FailureCluster.objects.filter(pk=old).exists()
    client.force_login(triager)
    assert client.get(f"/api/qc/clusters/{old}/").status_code == 404
    assert "sk-live" not in client.get("/api/qc/clusters/").content.decode()


def failing_write(message: str) -> Trial:
    """An errored trial whose write_file call failed in its second trajectory (a subagent's)."""
    trial = errored(message)
    Trajectory.objects.create(trial=trial, path="agent/trajectory.json", role="main", position=0)
    sub = Trajectory.objects.create(
        trial=trial, path="agent/subagents/fix/trajectory.json", role="subagent", position=1
    )
    step = Step.objects.create(trial=trial, trajectory=sub, index=1, step_id="2", source="agent")
    ToolCall.objects.create(trial=trial, step=step, tool_call_id="c2", function_name="write_file")
    RuntimeEvent.objects.create(trial=trial, type="tool.failed", sequence=3, payload={"toolName": "write_file"})
    return trial


def test_filing_a_cluster_costs_the_same_queries_for_2_trials_as_for_8(client, triager):
    small = signed(*(failing_write("disk full") for _ in range(2)))
    large = signed(*(failing_write("socket closed") for _ in range(8)))
    assert small[0].cluster.signature["tool"] == "write_file" and small[0].cluster_id != large[0].cluster_id
    client.force_login(triager)
    body = {"kind": "release-blocker", "category": "environment", "severity": "P0", "note": "x"}
    counts = []
    for cluster in (small, large):
        with CaptureQueriesContext(connection) as queries:
            url = f"/api/qc/clusters/{cluster[0].cluster_id}/feedback/"
            assert client.post(url, body, content_type="application/json").status_code == 201
        counts.append(len(queries))
        item = QCItem.objects.get(cluster_id=cluster[0].cluster_id)
        refs = {c.trial_id: c.evidence_refs[1:] for c in item.citations.all()}
        assert refs == {t.pk: [{"kind": "step", "ref": "2@fix/trajectory.json"}] for t in cluster}
    assert counts[0] == counts[1]


def test_an_unscored_trial_with_no_failure_sign_is_in_a_cluster_as_the_queue_holds_it(tmp_path):
    """A Harbor trial whose verifier wrote nothing: no reward, no exception, no category."""
    import orjson

    from tests.builders import import_path, write_trial

    trial_dir = write_trial(tmp_path, details=False)
    result = orjson.loads((trial_dir / "result.json").read_bytes())
    del result["verifier_result"]
    (trial_dir / "result.json").write_bytes(orjson.dumps(result))
    import_path(trial_dir)
    trial = Trial.objects.get()
    assert (trial.status, trial.reward) == ("unknown", None)
    assert Trial.objects.triageable().filter(pk=trial.pk).exists()
    assert trial.cluster is not None and trial.cluster.signature["ended"] == "unscored", trial.cluster.signature
    passed = signed(TrialFactory(status="passed", reward=1.0))[0]
    assert passed.cluster is None  # (a scored pass with nothing to flag stays out)
