"""Lime words only where the trial carries Lime evidence: the shared TB1 and Inspect runs read without them."""

from __future__ import annotations

import orjson
import pytest

from tests.builders import REFERENCE, candidate_trial_dir, import_path, import_trial_dir
from trials.models import Configuration, Trial

pytestmark = pytest.mark.django_db

TB1 = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
INSPECT = REFERENCE / "inspect" / "2025-05-12T20-28-26-04-00_security-guide.json"
# A plain Harbor run: its ATIF trajectory names a session, which is no Lime runtime correlation.
HARBOR = REFERENCE / "public-runs-2" / "harbor-check-claude-code-notloggedin"
LIME_WORDS = ("not joinable", "smoke only", "benchmark eval blocks", "with incomplete", "Evidence completeness")


def _trial_page(client, trial: Trial, tab: str = "") -> str:
    return client.get(f"/trials/{trial.pk}/" + (f"?tab={tab}" if tab else "")).content.decode()


@pytest.mark.parametrize("source", [TB1, INSPECT, HARBOR], ids=["terminal-bench-1", "inspect", "harbor"])
def test_a_trial_without_lime_evidence_reads_no_lime_word(client_logged_in, source):
    import_path(source)
    trial = Trial.objects.first()
    assert trial is not None and not trial.lime_evidence
    if source is HARBOR:  # the README's one trial, whose trajectory holds a session id
        session = orjson.loads(next(source.rglob("trajectory.json")).read_bytes())["session_id"]
        assert Trial.objects.count() == 1 and trial.session_id == session
    pages = [_trial_page(client_logged_in, trial, tab) for tab in ("", "trajectory", "verifier")]
    pages.append(client_logged_in.get("/").content.decode())
    for html in pages:
        for word in LIME_WORDS:
            assert word not in html, word


def test_a_lime_trial_keeps_its_evidence_badge_and_the_dashboard_counts_it(client_logged_in, tmp_path):
    import_path(TB1)
    trial_dir = candidate_trial_dir(tmp_path)
    (trial_dir / "verifier" / "reward-details.json").unlink()
    lime = import_trial_dir(trial_dir)
    assert lime.lime_evidence and not lime.is_complete
    html = _trial_page(client_logged_in, lime)
    assert 'id="evidence-verdict"' in html and "not joinable" in html
    home = client_logged_in.get("/").content.decode()
    assert "1 with incomplete Lime evidence" in home  # the TB1 trials, which have no such checks, are not counted
    listed = client_logged_in.get("/api/trials/?complete=false").json()
    assert [t["id"] for t in listed["results"]] == [lime.pk]


def test_a_tb1_comparison_has_no_evidence_completeness_tile(client_logged_in):
    import_path(TB1)
    import_path(REFERENCE / "public-runs-2" / "tb1-droid-5x2" / "20250923_droid_claude-4-1-opus")
    base, cand = Configuration.objects.order_by("pk").values_list("pk", flat=True)
    html = client_logged_in.get(f"/comparisons/?baseline={base}&candidate={cand}").content.decode()
    assert 'id="mean-reward-delta"' in html
    assert "Evidence completeness" not in html
