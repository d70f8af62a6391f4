"""Every headline figure of the comparison page opens exactly what it counts."""

from __future__ import annotations

import re

import pytest

from tests.builders import (
    ERRORED,
    MISSING,
    REFERENCE,
    build_side,
    import_path,
    link_of,
    listed_trials,
    make_user,
    matrix_tasks,
    text_of,
)
from tests.factories import PermissionDecisionFactory
from trials.models import Job, Trial
from trials.triage import services as triage
from trials.triage.forms import FeedbackForm

pytestmark = pytest.mark.django_db

BASE = {f"t{i:02d}": [1.0, 1.0] for i in range(4)} | {"t04": [0.0, 0.0], "t05": [1.0, ERRORED], "t06": [0.5, MISSING]}
CAND = {f"t{i:02d}": [0.0, 0.0] for i in range(2)} | {
    "t02": [1.0, 1.0],
    "t03": [1.0, ERRORED],
    "t04": [1.0, 1.0],
    "t05": [MISSING, 1.0],
    "t06": [0.25, ERRORED],
}


@pytest.fixture
def page(client_logged_in):
    base, cand = build_side("base", BASE), build_side("cand", CAND)
    cand_trials = list(cand.trials.order_by("pk"))
    PermissionDecisionFactory(trial=cand_trials[0], side_effect_after_denial=True)
    PermissionDecisionFactory(trial=cand_trials[0], side_effect_after_denial=True)
    PermissionDecisionFactory(trial=cand_trials[2], side_effect_after_denial=False)
    Trial.objects.filter(pk=cand_trials[4].pk).update(
        documents={"evidence_pack": {"decisionInputs": {"p0QcGateRegressionCount": 2}}}
    )
    triager = make_user("tina", "triager")
    data = {"kind": "release-blocker", "category": "runtime", "severity": "P0"}
    form = FeedbackForm(
        data={**data, "evidence_refs": [f"trial:{cand_trials[1].key}"]}, trial=cand_trials[1], user=triager
    )
    assert form.is_valid(), form.errors
    item = triage.file_item(triager, cand_trials[1], form.cleaned_data)
    body = client_logged_in.get("/comparisons/", {"baseline": base.pk, "candidate": cand.pk}).content.decode()
    return {"html": body, "base": base, "cand": cand, "trials": cand_trials, "item": item}


@pytest.mark.parametrize(
    ("element_id", "expected"),
    [
        ("figure-errored", lambda c: set(c.trials.filter(status="errored").values_list("pk", flat=True))),
        # unscored: no reward, whatever the status (errored ones too): counted, never failed
        ("figure-unscored", lambda c: set(c.trials.filter(reward=None).values_list("pk", flat=True))),
    ],
)
def test_errored_and_unscored_figures_open_exactly_those_trials(client_logged_in, page, element_id, expected):
    trials = expected(page["cand"])
    assert int(text_of(page["html"], element_id).split()[0]) == len(trials) > 0
    assert listed_trials(client_logged_in, link_of(page["html"], element_id)) == trials


def test_side_effects_after_a_denial_open_the_trials_they_happened_in(client_logged_in, page):
    assert text_of(page["html"], "figure-denied") == "2"
    assert listed_trials(client_logged_in, link_of(page["html"], "figure-denied")) == {page["trials"][0].pk}


def test_flips_and_outcomes_open_exactly_their_tasks(client_logged_in, page):
    html = page["html"]
    # t00, t01 pass -> fail; t04 fail -> pass; the others keep their pass/fail.
    assert text_of(html, "figure-pass-to-fail") == "2 pass → fail"
    assert matrix_tasks(client_logged_in, link_of(html, "figure-pass-to-fail")) == {"t00", "t01"}
    assert text_of(html, "figure-fail-to-pass") == "1 fail → pass"
    assert matrix_tasks(client_logged_in, link_of(html, "figure-fail-to-pass")) == {"t04"}
    for outcome in ("improved", "regressed"):
        tasks = matrix_tasks(client_logged_in, link_of(html, f"figure-{outcome}"))
        assert text_of(html, f"figure-{outcome}") == f"{len(tasks)} {outcome}"
    assert matrix_tasks(client_logged_in, link_of(html, "figure-regressed")) == {"t06"}


def test_p0_regressions_open_their_qc_items_and_trials_and_add_up_to_the_figure(client_logged_in, page):
    assert text_of(page["html"], "figure-p0") == "3"  # 2 from an evidence pack, 1 open P0 item
    listing = client_logged_in.get(link_of(page["html"], "figure-p0")).content.decode()
    items = re.search(r'<table id="p0-items">(.*?)</table>', listing, re.S).group(1)
    trials = re.search(r'<table id="p0-trials">(.*?)</table>', listing, re.S).group(1)
    assert re.findall(r'href="/qc/items/(\d+)/"', items) == [str(page["item"].pk)]
    assert re.findall(r'href="/trials/(\d+)/"', items) == [str(page["trials"][1].pk)]
    assert re.findall(r'href="/trials/(\d+)/"', trials) == [str(page["trials"][4].pk)]
    assert "<td>2</td>" in trials
    assert "(3)</span></h1>" in listing


def test_agentv_wins_and_losses_open_exactly_their_tests_each_with_its_trials(client_logged_in):
    import_path(REFERENCE / "agentv" / "compare-baseline-results.jsonl")
    import_path(REFERENCE / "agentv" / "compare-candidate-results.jsonl")
    base, cand = Job.objects.filter(source_format="agentv").order_by("pk")
    url = f"/comparisons/?baseline_job={base.pk}&candidate_job={cand.pk}"
    body = client_logged_in.get(url).content.decode()
    expected = client_logged_in.get(url.replace("/comparisons/", "/api/comparisons/")).json()["agentv"]["matched"]
    for element_id, outcome in (("agentv-wins", "win"), ("agentv-losses", "loss")):
        tests = {m["test_id"] for m in expected if m["outcome"] == outcome}
        assert tests or outcome == "loss"  # the reference runs have wins, and no loss at threshold 0.1
        assert text_of(body, element_id) == f"{len(tests)} {outcome}{'s' if outcome == 'win' else 'es'}"
        listing = client_logged_in.get(f"/comparisons/{link_of(body, element_id).split('#')[0]}").content.decode()
        table = re.search(r'<table id="agentv-matched">(.*?)</table>', listing, re.S).group(1)
        assert set(re.findall(r"<tr><td>([^<]+)</td>", table)) == tests
        for test_id in tests:  # each score opens that test's trials on its side
            assert f'href="/trials/?job={cand.pk}&amp;task={test_id}"' in table


def test_the_p0_page_names_a_side_it_does_not_know_with_a_400(client_logged_in):
    response = client_logged_in.get("/comparisons/p0/?baseline=999999&candidate=1")
    assert response.status_code == 400
    assert "baseline='999999' is not a known configuration id" in response.content.decode().replace("&#x27;", "'")


def test_the_paired_tasks_a_hold_counts_open_those_tasks(client_logged_in, page):
    # t00-t06 are on both sides; t05 and t06 keep a scored attempt each side, so all 7 pair.
    html = page["html"]
    missing = re.search(r'<ul id="missing-conditions">(.*?)</ul>', html, re.S).group(1)
    href = re.search(r'at least 10 paired tasks \(<a href="([^"]+)">has 7</a>\)', missing)
    assert href, missing
    assert matrix_tasks(client_logged_in, href.group(1).replace("&amp;", "&")) == set(BASE) == set(CAND)
