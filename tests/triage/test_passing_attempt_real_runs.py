"""Compare with a passing attempt on real Terminal-Bench 1 runs (issue 39, Must 5): the droid runs of
two configurations (no roles) where many passes timed out with a reward (flagged). Known answers are
read from the runs' own results.json rows."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Trial

RUNS = REFERENCE / "public-runs-2" / "tb1-droid-5x2"


def raw_rows() -> dict[str, list[dict]]:
    """Every trial row of the ten runs, by task, with its configuration (the submission folder)."""
    by_task = defaultdict(list)
    for results in sorted(RUNS.glob("*/*/results.json")):
        for row in json.loads(results.read_text())["results"]:
            by_task[row["task_id"]].append({**row, "configuration": results.parent.parent.name})
    return by_task


def failures_by_case() -> dict[str, list[tuple[dict, list[dict]]]]:
    """Failed rows (`is_resolved: false`) and the rows a passing attempt may be, by case: passes only in the
    other configuration; passes in its own configuration, every one of them flagged (it did not end
    normally, `failure_mode` set); no pass of the task anywhere."""
    cases = defaultdict(list)
    for rows in raw_rows().values():
        for failed in (r for r in rows if r["is_resolved"] is False):
            passes = [r for r in rows if r["is_resolved"] is True]
            mine = [r for r in passes if r["configuration"] == failed["configuration"]]
            if not passes:
                cases["none"].append((failed, []))
            elif not mine:
                cases["other configuration"].append((failed, passes))
            elif all(r["failure_mode"] != "unset" for r in mine):
                cases["flagged only"].append((failed, mine))
    return cases


@pytest.fixture(scope="module")
def cases():
    found = failures_by_case()
    assert set(found) == {"none", "other configuration", "flagged only"}  # the runs hold each case
    return found


@pytest.fixture
def droid(db):
    import_path(RUNS)


def trial_of(row: dict) -> Trial:
    return Trial.objects.get(key=f"tb1:{row['id']}")


def test_a_failure_is_set_beside_a_pass_of_another_configuration(client_logged_in, droid, cases):
    for failed_row, passes in cases["other configuration"]:
        failed = trial_of(failed_row)
        assert failed.configuration.role == ""  # TB1 configurations have no role: no reference side
        response = client_logged_in.get(f"/trials/{failed.pk}/compare-passing/")
        assert response.status_code == 302, failed_row["task_id"]
        target = int(response["Location"].rstrip("/").rsplit("/", 1)[1])
        assert Trial.objects.get(pk=target).key in {f"tb1:{r['id']}" for r in passes}
        assert 'id="compare-passing"' in client_logged_in.get(f"/trials/{failed.pk}/").content.decode()


def test_a_flagged_pass_counts_and_is_labelled_flagged(client_logged_in, droid, cases):
    for failed_row, passes in cases["flagged only"]:
        failed = trial_of(failed_row)
        response = client_logged_in.get(f"/trials/{failed.pk}/compare-passing/", follow=True)
        assert response.redirect_chain, failed_row["task_id"]
        target = response.context["right"]
        assert target.key in {f"tb1:{r['id']}" for r in passes}  # its own configuration's, flagged
        assert "flagged: timeout-with-reward" in response.content.decode()


def test_the_link_is_hidden_where_no_attempt_of_the_task_passed(client_logged_in, droid, cases):
    for failed_row, _ in cases["none"][:5]:
        failed = trial_of(failed_row)
        assert failed.cluster_id is not None  # a failure, in a cluster: the link would be beside it
        page = client_logged_in.get(f"/trials/{failed.pk}/").content.decode()
        assert 'id="compare-passing"' not in page
        response = client_logged_in.get(f"/trials/{failed.pk}/compare-passing/", follow=True)
        assert "No passing attempt" in response.content.decode()


def test_the_link_is_hidden_on_a_trial_that_passed_even_when_flagged(client_logged_in, droid):
    """A pass that timed out with a reward is in a cluster (flagged), and its task has other passes: still
    nothing to compare it with, so no link (issue 39, Must 5: hidden where not applicable)."""
    flagged_passes = [
        row
        for rows in raw_rows().values()
        for row in rows
        if row["is_resolved"] is True
        and row["failure_mode"] == "agent_timeout"
        and sum(r["is_resolved"] is True for r in rows) > 1
    ]
    assert flagged_passes  # the runs hold such passes
    for row in flagged_passes[:5]:
        passed = trial_of(row)
        assert passed.cluster_id is not None and passed.reward == 1.0
        page = client_logged_in.get(f"/trials/{passed.pk}/").content.decode()
        assert 'id="compare-passing"' not in page, row["task_id"]
        cluster = client_logged_in.get(f"/qc/clusters/{passed.cluster_id}/").content.decode()
        assert f'href="/trials/{passed.pk}/compare-passing/' not in cluster
