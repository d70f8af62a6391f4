"""The decision on real runs, read as a PM reads the page: first, its guard in words, and one sentence on why
it is what it is where the CI95 and the minimum detectable effect disagree (issue 39, Must 3).

The deltas, standard errors and MDEs are computed here from the raw rows (TB1 `is_resolved`: null unscored,
left out); the MDE as the page defines it, (z(0.975) + z(0.80)) * sd(d) / sqrt(n) over the paired tasks.
"""

from __future__ import annotations

import re
import zipfile
from statistics import NormalDist, fmean, stdev

import orjson
import pytest

from tests.builders import REFERENCE, import_path, tb1_rows
from trials.models import Configuration, Job

pytestmark = pytest.mark.django_db

DROID = REFERENCE / "public-runs-2" / "tb1-droid-5x2"
SONNET, OPUS = DROID / "20250923_droid_claude-4-sonnet", DROID / "20250923_droid_claude-4-1-opus"
GOOSE = REFERENCE / "public-runs-2" / "tb1-goose-flat" / "20250829_goose_claude-4-opus"
Z = NormalDist().inv_cdf


def _rows(folder):
    flat = sorted(folder.glob("*_results.json"))  # goose's layout: flat files, no run folders
    return [r for p in flat for r in orjson.loads(p.read_bytes())["results"]] if flat else tb1_rows(folder)


def _paired(base_folder, cand_folder) -> dict[str, float]:
    """delta, se and mde of the per-task differences over the tasks both sides scored."""
    means = []
    for folder in (base_folder, cand_folder):
        by_task: dict[str, list[float]] = {}
        for row in _rows(folder):
            if row["is_resolved"] is not None:
                by_task.setdefault(row["task_id"], []).append(float(row["is_resolved"]))
        means.append({task: fmean(values) for task, values in by_task.items()})
    d = [means[1][t] - means[0][t] for t in means[0].keys() & means[1].keys()]
    sd = stdev(d)
    return {"delta": fmean(d), "se": sd / len(d) ** 0.5, "mde": (Z(0.975) + Z(0.80)) * sd / len(d) ** 0.5}


def _compare(client, base_folder, cand_folder):
    for folder in (base_folder, cand_folder):
        import_path(folder)
    base, cand = (Configuration.objects.get(key=folder.name).pk for folder in (base_folder, cand_folder))
    query = f"baseline={base}&candidate={cand}"
    c = client.get(f"/api/comparisons/?{query}").json()["comparison"]
    return c, client.get(f"/comparisons/?{query}").content.decode()


def _decision_first(html: str) -> None:
    content = html[html.index("<h1>") :]  # (after the views' tabs and the title)
    assert content.index("<section") == content.index('<section class="card headline" id="headline">')
    assert html.index('id="decision"') < html.index('id="comparison-picker"') < html.index('id="guard"')


def _guard_words(html: str) -> str:
    guard = re.search(r'<section class="card" id="guard">(.*?)</section>', html, re.S).group(1)
    assert "meanRewardDelta" not in guard and ">=" not in guard.split("Missing for promote")[0]
    return " ".join(re.sub(r"<[^>]+>", " ", guard).split())


def test_a_significant_gain_below_the_detectable_effect_promotes_and_says_why(client_logged_in):
    figures = _paired(SONNET, OPUS)
    assert figures["delta"] - Z(0.975) * figures["se"] > 0  # significant,
    assert figures["delta"] < figures["mde"]  # yet smaller than what 79 tasks detect 4 times in 5
    c, html = _compare(client_logged_in, SONNET, OPUS)
    assert c["decision"] == "promote"
    assert c["decisionReason"].startswith(f"Promote: the candidate scores {figures['delta']:+.3f} a task")
    assert (
        f"the CI95 excludes 0, so the effect is real although smaller than the {figures['mde']:.3f}"
        in (c["decisionReason"])
    )
    # public-runs-2/README.md: "the delta of the per-task means should be +0.0825" (its accuracies, 0.5875 and
    # 0.505: Terminal-Bench's rule, an unscored trial as 0), the leaderboard row's paired figure.
    assert c["leaderboardDelta"]["delta"] == pytest.approx(0.0825) and c["leaderboardDelta"]["tasks"] == 80
    _decision_first(html)
    assert c["decisionReason"] in html.replace("&#x27;", "'")
    assert "Promote needs a valid comparison, the two checks that apply" in _guard_words(html)


def test_a_lower_score_the_ci_does_not_tell_from_no_change_holds_and_says_why(client_logged_in):
    figures = _paired(SONNET, GOOSE)
    assert figures["delta"] < 0 < figures["delta"] + Z(0.975) * figures["se"]  # lower, the CI95 across 0
    assert abs(figures["delta"]) < figures["mde"]
    c, html = _compare(client_logged_in, SONNET, GOOSE)
    assert c["decision"] == "hold"
    reason = c["decisionReason"]
    assert reason.startswith(f"Hold: the candidate scores {figures['delta']:+.3f} a task (CI95 ")
    assert "lower than the baseline, so it is not promoted; the CI95 includes 0 and the delta is below the " in reason
    assert f"{figures['mde']:.3f} this sample detects reliably, so it is not reverted either." in reason
    assert c["missingConditions"][0] == f"the candidate scores lower than the baseline ({figures['delta']:+.3f} a task)"
    _decision_first(html)
    words = _guard_words(html)
    assert f"Missing for promote the candidate scores lower than the baseline ({figures['delta']:+.3f} a task)" in (
        words.replace("−", "-")
    )


def test_two_real_inspect_logs_of_two_datasets_hold_and_the_guard_says_there_is_no_delta(client_logged_in):
    inspect = REFERENCE / "inspect"
    headers = [orjson.loads(p.read_bytes()) for p in inspect.glob("*.json")]
    headers += [orjson.loads(zipfile.ZipFile(p).read("header.json")) for p in inspect.glob("*.eval")]
    assert sorted(h["eval"]["task"] for h in headers) == ["security_guide", "theory_of_mind"]  # nothing to pair
    import_path(inspect)
    base, cand = Job.objects.filter(source_format="inspect").order_by("pk").values_list("pk", flat=True)
    query = f"baseline_job={base}&candidate_job={cand}"
    c = client_logged_in.get(f"/api/comparisons/?{query}").json()["comparison"]
    html = client_logged_in.get(f"/comparisons/?{query}").content.decode()
    assert c["decision"] == "hold" and c["pairedTasks"] == 0 and c["meanRewardDelta"] is None
    assert c["decisionReason"].startswith("Hold: comparison is not valid: dataset differs")
    assert "no task is scored on both sides, so there is no delta to check" in c["missingConditions"]
    _decision_first(html)
    words = _guard_words(html)
    assert "The candidate scores no lower than the baseline fail no task is scored on both sides" in words
