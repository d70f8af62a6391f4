"""The comparison page's figures on the real TB1 runs, droid + claude-4.1-opus (5 runs) against mini-swe-agent
(1 run): one headline delta, each other delta saying over what it is taken; each card captioned by what it
shows; each count opening what it counts.

Every figure is computed here from the raw `results.json` rows: `is_resolved` true is 1, false 0, null
unscored (terminal-bench-1/README.md: 32 of mini's 80 rows; public-runs-2/README.md: 9 of opus's 400).
"""

from __future__ import annotations

import re
from datetime import datetime
from statistics import fmean, stdev

import pytest

from core.durations import duration
from tests.builders import REFERENCE, import_path, link_of, listed_trials, matrix_tasks, tb1_rows, text_of
from trials.models import Configuration, Trial

pytestmark = pytest.mark.django_db

MINI = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
OPUS = REFERENCE / "public-runs-2" / "tb1-droid-5x2" / "20250923_droid_claude-4-1-opus"


@pytest.fixture
def compared(client_logged_in):
    import_path(MINI)
    import_path(OPUS)
    base, cand = (Configuration.objects.get(key=folder.name).pk for folder in (MINI, OPUS))
    query = f"baseline={base}&candidate={cand}"
    body = client_logged_in.get(f"/api/comparisons/?{query}").json()
    return {"c": body["comparison"], "html": client_logged_in.get(f"/comparisons/?{query}").content.decode()}


def _task_means(rows: list[dict], unscored_as: float | None = None) -> dict[str, float]:
    """Each task's mean over its attempts; an unscored one left out, or counted as `unscored_as`."""
    by_task: dict[str, list[float]] = {}
    for row in rows:
        value = unscored_as if row["is_resolved"] is None else float(row["is_resolved"])
        if value is not None:
            by_task.setdefault(row["task_id"], []).append(value)
    return {task: fmean(values) for task, values in by_task.items()}


def _figures_row(html: str, label: str) -> list[str]:
    """The Figures table's row `label`: its baseline, candidate and Δ cells."""
    row = re.search(rf"<tr><th[^>]*>{re.escape(label)}[^<]*<.*?</tr>", html, re.S)
    assert row, f"no Figures row {label!r}"
    return re.findall(r"<td>(.*?)</td>", row.group(0), re.S)


def _cell_links(cell: str) -> dict[str, str]:
    """A cell's links, text -> href."""
    return {text: href.replace("&amp;", "&") for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', cell)}


def test_the_headline_delta_pairs_the_tasks_both_sides_scored_and_opens_them(client_logged_in, compared):
    mini, opus = _task_means(tb1_rows(MINI)), _task_means(tb1_rows(OPUS))
    paired = sorted(mini.keys() & opus.keys())
    diffs = [opus[t] - mini[t] for t in paired]
    c, html = compared["c"], compared["html"]
    assert c["pairedTasks"] == len(paired) == 47  # 48 tasks mini scored, one of them opus never did
    assert c["meanRewardDelta"] == pytest.approx(fmean(diffs))
    assert c["meanRewardDeltaSe"] == pytest.approx(stdev(diffs) / len(diffs) ** 0.5)
    assert c["scoredTasks"] == {"baseline": len(mini), "candidate": len(opus)} == {"baseline": 48, "candidate": 79}
    assert text_of(html, "mean-reward-delta") == f"{fmean(diffs):+.3f}" == "+0.430"
    assert f"SE {stdev(diffs) / len(diffs) ** 0.5:.3f}" in html
    assert text_of(html, "figure-paired-tasks") == "47 tasks both sides scored"
    assert matrix_tasks(client_logged_in, link_of(html, "figure-paired-tasks")) == set(paired)
    assert matrix_tasks(client_logged_in, link_of(html, "mean-reward-delta")) == set(paired)


def test_the_sides_own_means_are_another_delta_that_says_it_is_not_paired(client_logged_in, compared):
    mini, opus = _task_means(tb1_rows(MINI)), _task_means(tb1_rows(OPUS))
    own = fmean(opus.values()) - fmean(mini.values())  # each side over the tasks it scored: 48 and 79
    assert (len(mini), len(opus)) == (48, 79)
    base, cand, delta = _figures_row(compared["html"], "Mean reward [CI95]")
    assert delta.startswith(f"{own:+.3f}") and f"{own:+.3f}" == "+0.376"
    assert "not paired" in delta and "paired over the" in delta and "+0.430" in delta
    for cell, means in ((base, mini), (cand, opus)):
        [(text, href)] = _cell_links(cell).items()
        assert text == f"{len(means)} tasks"
        assert matrix_tasks(client_logged_in, href) == set(means)
    assert matrix_tasks(client_logged_in, _cell_links(delta)["47 tasks"]) == mini.keys() & opus.keys()


def test_the_leaderboard_delta_counts_an_unscored_trial_as_0_paired_over_all_80_tasks(client_logged_in, compared):
    # The paired effect, +0.45 a task (SE 0.058): Terminal-Bench's own rule, the README's accuracies
    # (mini 0.1375, opus's five runs 0.5875 on average) over the same 80 tasks.
    mini, opus = _task_means(tb1_rows(MINI), unscored_as=0.0), _task_means(tb1_rows(OPUS), unscored_as=0.0)
    assert mini.keys() == opus.keys() and len(mini) == 80
    diffs = [opus[t] - mini[t] for t in mini]
    se = stdev(diffs) / len(diffs) ** 0.5
    assert fmean(diffs) == pytest.approx(0.5875 - 0.1375) and round(se, 3) == 0.058
    assert compared["c"]["leaderboardDelta"] == {"tasks": 80, "delta": pytest.approx(0.45), "se": pytest.approx(se)}
    base, cand, delta = _figures_row(compared["html"], "Leaderboard score")
    assert base.startswith("0.138") and cand.startswith("0.588")
    assert "paired over the" in delta and "both ran: +0.450 a task, SE 0.058" in delta
    assert matrix_tasks(client_logged_in, _cell_links(delta)["80 tasks"]) == set(mini)


def test_the_figures_table_has_one_row_a_meaning(compared):
    # Binary rewards: pass@1 and the one reward key's mean are the mean reward again, so no row of their own.
    labels = re.findall(r"<tr><th[^>]*>([^<]+)<", compared["html"].split('id="matrix"')[0])
    assert len(labels) == len(set(labels))
    assert [label for label in labels if label.startswith(("Mean reward", "Score", "Leaderboard"))] == [
        "Mean reward [CI95]",
        "Mean reward without infrastructure failures [CI95]",
        "Leaderboard score (unscored counts as 0 (Terminal-Bench&#x27;s accuracy))",
    ]
    assert not any(label.startswith("pass@1") or label.startswith("Mean reward: ") for label in labels)


def _words(html: str, element_id: str) -> str:
    """The text of the element `element_id` and its children, tags dropped."""
    start = html.index(f'id="{element_id}"')
    inner = html[html.index(">", start) + 1 : html.index("</span>", start)]
    return " ".join(re.sub(r"<[^>]+>", "", inner).split())


def test_the_pass_rate_card_says_the_pass_rate_and_opens_its_passes(client_logged_in, compared):
    html = compared["html"]
    words = _words(html, "pass-rate-hint")
    assert words.startswith("passes over scored trials") and "flip" not in words
    for side, rows in (("candidate", tb1_rows(OPUS)), ("baseline", tb1_rows(MINI))):
        passed = [r for r in rows if r["is_resolved"] is True]
        scored = [r for r in rows if r["is_resolved"] is not None]
        assert f"{side} {len(passed)} of {len(scored)} ({len(passed) / len(scored):.1%})" in words
        assert text_of(html, f"figure-{side}-passes") == str(len(passed))
        assert text_of(html, f"figure-{side}-scored") == str(len(scored))
    assert "candidate 235 of 391 (60.1%), baseline 11 of 48 (22.9%)" in words
    passes = listed_trials(client_logged_in, link_of(html, "figure-baseline-passes"))
    resolved = sorted(r["task_id"] for r in tb1_rows(MINI) if r["is_resolved"] is True)
    assert sorted(Trial.objects.filter(pk__in=passes).values_list("task__name", flat=True)) == resolved
    scored = listed_trials(client_logged_in, link_of(html, "figure-baseline-scored"))
    assert len(scored) == 48 and not Trial.objects.filter(pk__in=scored, reward=None).exists()


def test_the_flips_card_counts_the_tasks_whose_verdict_changed_and_opens_them(client_logged_in, compared):
    # A task passes when half its scored attempts pass (binary rewards: its mean is at least 0.5).
    mini, opus = _task_means(tb1_rows(MINI)), _task_means(tb1_rows(OPUS))
    paired = mini.keys() & opus.keys()
    to_pass = {t for t in paired if mini[t] < 0.5 <= opus[t]}
    to_fail = {t for t in paired if opus[t] < 0.5 <= mini[t]}
    moved = {t: opus[t] - mini[t] for t in paired - to_pass - to_fail}
    html = compared["html"]
    assert text_of(html, "figure-flipped") == str(len(to_pass | to_fail)) == "27"
    assert _words(html, "flips-hint").startswith("of the 47 tasks both sides decided, those whose verdict changed")
    assert matrix_tasks(client_logged_in, link_of(html, "figure-flipped")) == to_pass | to_fail
    assert matrix_tasks(client_logged_in, link_of(html, "figure-decided-tasks")) == paired
    for element_id, tasks in (("figure-fail-to-pass", to_pass), ("figure-pass-to-fail", to_fail)):
        assert text_of(html, element_id).startswith(f"{len(tasks)} ")
        assert matrix_tasks(client_logged_in, link_of(html, element_id)) == tasks
    for outcome, tasks in (
        ("improved", {t for t, d in moved.items() if d > 0}),
        ("regressed", {t for t, d in moved.items() if d < 0}),
        ("unchanged", {t for t, d in moved.items() if d == 0}),
    ):
        assert text_of(html, f"figure-{outcome}") == f"{len(tasks)} {outcome}"
        assert matrix_tasks(client_logged_in, link_of(html, f"figure-{outcome}")) == tasks


def _risk_link(html: str, count: str) -> str:
    """The href of the remaining risk's count `count`."""
    risks = re.search(r'<ul id="remaining-risk">(.*?)</ul>', html, re.S).group(1)
    match = re.search(rf'<a href="([^"]+)">{re.escape(count)}</a>', risks)
    assert match, f"{count!r} is not a link in the remaining risks"
    return match.group(1).replace("&amp;", "&")


def test_each_count_of_the_remaining_risks_opens_what_it_counts(client_logged_in, compared):
    html, mini_rows, opus_rows = compared["html"], tb1_rows(MINI), tb1_rows(OPUS)
    mini, opus = _task_means(mini_rows), _task_means(opus_rows)
    to_fail = {t for t in mini.keys() & opus.keys() if opus[t] < 0.5 <= mini[t]}
    assert matrix_tasks(client_logged_in, _risk_link(html, f"{len(to_fail)} task(s)")) == to_fail
    for rows in (mini_rows, opus_rows):  # unscored: is_resolved null, counted apart, never failed
        unscored = sorted(r["task_id"] for r in rows if r["is_resolved"] is None)
        listed = listed_trials(client_logged_in, _risk_link(html, f"{len(unscored)} unscored trial(s)"))
        assert sorted(Trial.objects.filter(pk__in=listed).values_list("task__name", flat=True)) == unscored
    assert _risk_link(html, "4 reason(s)") == "#headline-eligibility"


def test_the_timeout_rate_opens_the_trials_whose_agent_timed_out(client_logged_in, compared):
    rows = tb1_rows(MINI)
    timed_out = sorted(r["task_id"] for r in rows if r["failure_mode"] == "agent_timeout")  # not test_timeout
    base, _, _ = _figures_row(compared["html"], "Timeout rate")
    assert base.startswith(f"{len(timed_out) / len(rows):.1%}") and len(timed_out) == 22  # the README's count
    links = _cell_links(base)
    assert set(links) == {str(len(timed_out)), f"{len(rows)} trials"}
    listed = listed_trials(client_logged_in, links[str(len(timed_out))])
    assert sorted(Trial.objects.filter(pk__in=listed).values_list("task__name", flat=True)) == timed_out


def _seconds(row: dict) -> float | None:
    """A row's trial duration, from its own timestamps (TB1 writes ISO 8601 with an offset)."""
    if not (row["trial_started_at"] and row["trial_ended_at"]):
        return None
    return (
        datetime.fromisoformat(row["trial_ended_at"]) - datetime.fromisoformat(row["trial_started_at"])
    ).total_seconds()


def test_the_duration_tokens_and_cost_rows_open_the_trials_of_their_side(client_logged_in, compared):
    html = compared["html"]
    for side, folder in (("baseline", MINI), ("candidate", OPUS)):
        rows = tb1_rows(folder)
        durations = [s for s in map(_seconds, rows) if s is not None]
        base, cand, _ = _figures_row(html, "Mean duration")
        cell = {"baseline": base, "candidate": cand}[side]
        assert cell.startswith("<a href=") and duration(fmean(durations)) in cell
        [(_, href)] = _cell_links(cell).items()
        listed = listed_trials(client_logged_in, href)  # the side's trials: the first page of them
        configuration = Configuration.objects.get(key=folder.name)
        assert listed and set(Trial.objects.filter(pk__in=listed).values_list("configuration", flat=True)) == {
            configuration.pk
        }
        assert f'Trials <span class="muted">({len(rows)})</span>' in client_logged_in.get(href).content.decode()
    for label in ("Tokens per trial", "Cost per trial"):
        for cell in _figures_row(html, label)[:2]:  # TB1 reports no cost, and tokens as null or 0
            assert cell == "—" or cell.startswith("<a href="), (label, cell)
