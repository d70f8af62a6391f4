"""Known-answer tests of the decision: it cannot promote on thin, evidence-less or invalid samples."""

from __future__ import annotations

import re

import pytest

from comparisons.computing.computation import compute
from comparisons.statistics.sides import Side
from tests.builders import build_side
from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db


def decide(base, cand):
    result, _ = compute(Side("configuration", base.pk), Side("configuration", cand.pk), resamples=200)
    return result["comparison"]


def _tasks(values):
    return {f"t{i:02d}": [v] for i, v in enumerate(values)}


def test_ten_paired_tasks_with_evidence_on_both_sides_promote_and_miss_nothing():
    c = decide(build_side("base", _tasks([0.0] * 10)), build_side("cand", _tasks([1.0] * 10)))
    assert c["pairedTasks"] == 10
    assert c["missingConditions"] == []
    assert c["decision"] == "promote"


def test_nine_paired_tasks_hold_even_when_every_seed_check_passes():
    c = decide(build_side("base", _tasks([0.0] * 9)), build_side("cand", _tasks([1.0] * 9)))
    assert c["guardPasses"] is True and c["valid"] is True
    assert c["decision"] == "hold"
    assert c["missingConditions"] == ["at least 10 paired tasks (has 9)"]


def test_lime_packs_with_zero_evidence_and_five_tasks_hold_and_list_each_missing_condition():
    # Both sides Lime evidence packs at 0% evidence completeness, 5 tasks, the seed's three checks pass.
    lime = {"is_complete": False, "lime_evidence": True}
    base = build_side("base", _tasks([0.0] * 5), trial_kwargs=lime)
    cand = build_side("cand", _tasks([0.0] * 5), trial_kwargs=lime)
    c = decide(base, cand)
    assert c["guardPasses"] is True
    assert c["decision"] == "hold"
    assert c["missingConditions"] == [
        "baseline has no evidence (evidence completeness 0%)",
        "candidate has no evidence (evidence completeness 0%)",
        "at least 10 paired tasks (has 5)",
    ]


def test_the_evidence_gate_is_not_applicable_where_no_side_carries_lime_evidence():
    # AgentV job #4 -> #5: AgentV rows carry no Lime evidence pack, so 0% completeness holds nothing.
    base = build_side("base", _tasks([0.0] * 5), trial_kwargs={"is_complete": False, "source_format": "agentv"})
    cand = build_side("cand", _tasks([0.0] * 5), trial_kwargs={"is_complete": False, "source_format": "agentv"})
    c = decide(base, cand)
    assert c["missingConditions"] == ["at least 10 paired tasks (has 5)"]
    evidence = c["guard"][2]
    assert evidence["applicable"] is False and evidence["ok"] is True
    assert evidence["note"].startswith("not applicable to agentv")
    assert c["decisionReason"] == "Hold: " + c["missingConditions"][0] + "."


def test_an_invalid_comparison_holds_and_names_why_even_when_clearly_worse():
    # (a changed verifier keeps the pairing; another dataset would pair no task at all)
    base = build_side("base", _tasks([1.0] * 12))
    cand = build_side("cand", _tasks([0.0] * 12), checksums={"t00": "sha-changed"})
    c = decide(base, cand)
    assert c["meanRewardDeltaCi95"][1] < 0  # would be "revert" if the comparison were valid
    assert c["decision"] == "hold"
    assert c["missingConditions"][0].startswith("comparison is not valid: verifier differs")
    assert "the candidate scores lower than the baseline (-1.000 a task)" in c["missingConditions"]  # words, no code


def test_no_paired_task_holds_with_no_delta(client_logged_in):
    base = build_side("base", {"a": [1.0]})
    cand = build_side("cand", {"b": [0.0]})
    c = decide(base, cand)
    assert c["pairedTasks"] == 0 and c["meanRewardDelta"] is None
    assert c["decision"] == "hold"
    assert "at least 10 paired tasks (has 0)" in c["missingConditions"]


def test_the_api_answer_carries_the_missing_conditions(client_logged_in):
    base, cand = build_side("base", _tasks([0.0] * 3)), build_side("cand", _tasks([1.0] * 3))
    body = client_logged_in.get(f"/api/comparisons/?baseline={base.pk}&candidate={cand.pk}").json()
    assert body["comparison"]["decision"] == "hold"
    assert body["comparison"]["missingConditions"] == ["at least 10 paired tasks (has 3)"]


def test_an_invalid_comparison_shows_its_deltas_only_inside_a_not_comparable_box(client_logged_in):
    base = build_side("base", {"a": [0.0]}, dataset=DatasetFactory(name="gpt"))
    cand = build_side("cand", {"b": [1.0]}, dataset=DatasetFactory(name="openchrome"))
    html = client_logged_in.get("/comparisons/", {"baseline": base.pk, "candidate": cand.pk}).content.decode()
    box = re.search(r'<section class="card not-comparable" id="not-comparable">(.*?)</section>', html, re.S)
    assert box, "no not-comparable box"
    assert "Not comparable" in box.group(1) and "dataset differs" in box.group(1)
    assert "Pass rate Δ" in box.group(1)
    outside = html.replace(box.group(0), "")
    assert 'id="mean-reward-delta"' not in outside and "Pass rate Δ" not in outside
    assert ">Δ</" not in outside  # no delta column in the figures or the per-task matrix
    assert "chart-reward_delta" not in outside
    assert "hold" in re.search(r'id="decision".*?</div>', html, re.S).group(0)
