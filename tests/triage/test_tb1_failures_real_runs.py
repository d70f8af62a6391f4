"""Failures and unscored trials of the shared Terminal-Bench 1 runs in triage (issue 39, Must 2).

Failures with no error text whose tests failed (`failure_mode` unset, `is_resolved` false) are not one
catch-all cluster: one per first failing test (its parameters aside), named by it. Unscored rows
(`is_resolved` null) are in the queue beside the failures. Known answers are read from the runs' own
results.json files: their `parser_results` in the order the tests ran."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from tests.builders import REFERENCE, every_page, import_path
from trials.models import Trial

RUNS = [
    REFERENCE / "terminal-bench-1",
    REFERENCE / "public-runs-2" / "tb1-droid-5x2",
    REFERENCE / "public-runs-2" / "tb1-goose-flat",
]
QUIET = {"unset", "none", ""}  # Terminal-Bench 1's "nothing went wrong" modes
PARAMETERS = re.compile(r"\[[^\[\]]*\]$")  # pytest's `test_roundtrip[True]`


def raw_rows() -> list[tuple[str, dict]]:
    """(configuration, row) for every row of the runs' results files: the configuration is the
    submission folder (`<date>_<agent>_<model>`) the file is in."""
    found = []
    for run in RUNS:
        for results in sorted(run.rglob("*results.json")):
            submission = results.relative_to(run).parts[0]
            found += [(submission, row) for row in json.loads(results.read_text()).get("results") or []]
    return found


def first_failing(row: dict) -> str:
    failed = [name for name, outcome in (row.get("parser_results") or {}).items() if outcome != "passed"]
    return PARAMETERS.sub("", failed[0]) if failed else ""


@pytest.fixture
def imported(db):
    for run in RUNS:
        import_path(run)


def test_tests_failed_clusters_are_one_per_first_failing_test_in_each_configuration(client_logged_in, imported):
    wanted: dict[tuple[str, str], set[str]] = defaultdict(set)  # (configuration, first failing test) -> keys
    configuration_of = {}
    for configuration, row in raw_rows():
        configuration_of[f"tb1:{row['id']}"] = configuration
        if row["is_resolved"] is False and row["failure_mode"] in QUIET and (test := first_failing(row)):
            wanted[configuration, test].add(f"tb1:{row['id']}")
    assert sum(map(len, wanted.values())) >= 250  # the old catch-all's size on these runs
    keys = dict(Trial.objects.values_list("pk", "key"))
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for cluster in every_page(client_logged_in, "/api/qc/clusters/?page_size=100"):
        if cluster["signature"].get("ended") != "tests failed":
            continue
        test = cluster["signature"]["test"]
        assert f"tests failed: {test}, in terminal-bench-core" in cluster["description"], cluster["description"]
        for pk in cluster["trials"]:
            found[configuration_of[keys[pk]], test].add(keys[pk])
    assert found == wanted
    for configuration in set(configuration_of.values()):
        mine = [n for (c, _), n in ((k, len(v)) for k, v in wanted.items()) if c == configuration]
        assert len(mine) >= 3 and max(mine) < sum(mine) / 2, (configuration, mine)  # several, none a catch-all


def test_agent_timeouts_split_by_first_failing_test_their_passes_apart(client_logged_in, imported):
    """The `agent_timeout` rows of a configuration are no catch-all: one cluster per first failing test, the
    resolved ones (every test passed, flagged) in one of their own; and each failed or unscored trial is in
    exactly one cluster, no configuration's largest holding a quarter of its trials."""
    wanted: dict[tuple[str, str], set[str]] = defaultdict(set)  # (configuration, test or "passed") -> keys
    configuration_of, clustered_wanted = {}, set()
    for configuration, row in raw_rows():
        key = f"tb1:{row['id']}"
        configuration_of[key] = configuration
        if row["is_resolved"] is not True or row["failure_mode"] not in QUIET:
            clustered_wanted.add(key)
        if row["failure_mode"] == "agent_timeout":
            wanted[configuration, first_failing(row) or "passed"].add(key)
    assert max(len(v) for v in wanted.values()) < 40 < sum(map(len, wanted.values()))  # (the old one held 86)
    keys = dict(Trial.objects.values_list("pk", "key"))
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    sizes: dict[str, list[int]] = defaultdict(list)  # configuration -> its clusters' sizes
    seen: list[str] = []
    for cluster in every_page(client_logged_in, "/api/qc/clusters/?page_size=100"):
        mine = [keys[pk] for pk in cluster["trials"]]
        seen += mine
        for configuration in {configuration_of[k] for k in mine}:
            sizes[configuration].append(sum(configuration_of[k] == configuration for k in mine))
        if cluster["signature"].get("ended") != "agent_timeout":
            continue
        part = cluster["signature"].get("test") or cluster["signature"].get("tests")
        words = f"{part} failed" if cluster["signature"].get("test") else "its tests passed"
        assert f"the agent timed out (agent_timeout), {words}, in terminal-bench-core" in cluster["description"]
        for key in mine:
            found[configuration_of[key], part].add(key)
    assert found == wanted
    assert sorted(seen) == sorted(clustered_wanted)  # every failed, unscored or flagged trial, once
    for configuration, shown in sizes.items():
        assert max(shown) < sum(shown) / 4, (configuration, sorted(shown))


def test_the_queue_holds_every_failed_and_every_unscored_trial(client_logged_in, imported):
    rows = [row for _, row in raw_rows()]
    failed = {f"tb1:{r['id']}" for r in rows if r["is_resolved"] is False}
    unscored = {f"tb1:{r['id']}" for r in rows if r["is_resolved"] is None}
    # (a resolved trial whose agent timed out is flagged: a reward kept after a bad ending)
    flagged_passes = {f"tb1:{r['id']}" for r in rows if r["is_resolved"] and r["failure_mode"] == "agent_timeout"}
    assert unscored and failed
    queue = every_page(client_logged_in, "/api/qc/queue/?page_size=100")
    keys = dict(Trial.objects.values_list("pk", "key"))
    shown = {keys[row["trial"]] for row in queue}
    assert len(queue) == len(shown) == len(failed) + len(unscored) + len(flagged_passes)
    assert shown - flagged_passes == failed | unscored
    reasons = {keys[row["trial"]]: row["reasons"] for row in queue}
    assert all("unscored" in reasons[key] for key in unscored)
    assert all(Trial.objects.get(key=key).cluster_id for key in unscored)  # and in a cluster, as failures are


def test_a_triager_can_claim_an_unscored_trial(client, triager, imported):
    [key] = sorted(f"tb1:{r['id']}" for _, r in raw_rows() if r["is_resolved"] is None)[:1]
    trial = Trial.objects.get(key=key)
    client.force_login(triager)
    assert client.post(f"/triage/{trial.pk}/claim/").status_code in (200, 302)
    trial.refresh_from_db()
    assert trial.triage_assignment.assignee == triager


def test_resolved_runs_whose_agent_timed_out_are_a_flagged_pass_never_a_capability_failure(client_logged_in, imported):
    """A row `is_resolved` true yet `failure_mode: agent_timeout` passed (TB1's accuracy counts it): flagged, it
    is in a cluster of flagged passes, no failure class's, and its page says why it counts as passed."""
    rows = [row for _, row in raw_rows()]
    passes = {f"tb1:{r['id']}" for r in rows if r["is_resolved"] is True and r["failure_mode"] not in QUIET}
    assert len(passes) == 97 and {r["failure_mode"] for r in rows if f"tb1:{r['id']}" in passes} == {"agent_timeout"}
    keys = dict(Trial.objects.values_list("pk", "key"))
    holding = {}
    for cluster in every_page(client_logged_in, "/api/qc/clusters/?page_size=100"):
        mine = {keys[pk] for pk in cluster["trials"]}
        if mine & passes:
            assert mine <= passes and cluster["failure_class"] == "flagged_pass", cluster["label"]
            assert cluster["description"].startswith("flagged pass · the agent timed out (agent_timeout)")
            holding[cluster["id"]] = mine
        else:
            assert cluster["failure_class"] != "flagged_pass"
    assert set().union(*holding.values()) == passes and len(holding) == 1
    page = client_logged_in.get("/qc/clusters/").content.decode()
    assert '<span class="badge fclass flagged_pass">Flagged pass</span> 1 cluster, 97 trials</a>' in page
    capability = every_page(client_logged_in, "/api/qc/clusters/?page_size=100&class=capability")
    assert not {keys[pk] for c in capability for pk in c["trials"]} & passes
    [cluster] = holding
    detail = client_logged_in.get(f"/qc/clusters/{cluster}/").content.decode()
    trial = re.search(r'Representative</dt><dd><a href="(/trials/\d+/)"', detail).group(1)
    note = re.search(r'<p class="note" id="pass-rule">([^<]+)</p>', client_logged_in.get(trial).content.decode())
    assert note and "Counted as passed" in note.group(1) and "timed out (agent_timeout)" in note.group(1)
    assert 'id="failure-class"' not in client_logged_in.get(trial).content.decode()  # (no failure, no class)
