"""The N-sides grid and the trend: known answers through the API, Holm's correction, the pages."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from comparisons.models import GridResult
from comparisons.statistics import stats
from tests.builders import build_side
from tests.factories import DatasetFactory, TrialFactory
from trials.models import Trial

pytestmark = pytest.mark.django_db

TASKS = [f"t{i}" for i in range(10)]


def test_holm_matches_the_step_down_known_answer():
    # Sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1 -> 0.04, 0.09, 0.08 -> 0.09 (monotone), 0.2.
    assert stats.holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert stats.holm([]) == []


@pytest.fixture
def three_sides():
    """A (reference): every task half passed; B: six tasks always pass, four never;
    C: always passes, but on version 2.0 of the dataset."""
    a = build_side("side-a", {t: [1.0, 0.0] for t in TASKS})
    b = build_side("side-b", {t: [1.0, 1.0] if i < 6 else [0.0, 0.0] for i, t in enumerate(TASKS)})
    other_version = DatasetFactory(name="known-answer/tasks", version="2.0")
    c = build_side("side-c", {t: [1.0, 1.0] for t in TASKS}, dataset=other_version)
    return a, b, c


def _grid(client, *confs, reference=None, page=None):
    url = f"/api/comparisons/grid/?sides={','.join(str(c.pk) for c in confs)}"
    url += f"&reference={reference.pk}" if reference else ""
    url += f"&page={page}" if page else ""
    response = client.get(url)
    assert response.status_code == 200, response.content
    return response.json()


def test_grid_of_three_sides_gives_the_known_answers(client_logged_in, three_sides):
    a, b, c = three_sides
    body = _grid(client_logged_in, a, b, c, reference=a)
    ref, side_b, side_c = body["sides"]
    assert [s["id"] for s in body["sides"]] == [a.pk, b.pk, c.pk]

    assert ref["mean_reward"] == 0.5 and ref["mean_reward_ci95"] == [0.5, 0.5] and ref["n_tasks"] == 10
    assert ref["valid"] and ref["delta_vs_reference"] is None and ref["mcnemar_p"] is None

    assert side_b["mean_reward"] == pytest.approx(0.6)
    assert side_b["valid"] and side_b["invalid_reasons"] == []
    assert side_b["delta_vs_reference"] == pytest.approx(0.1)
    # Four tasks flip pass -> fail, none the other way: exact McNemar p = 2 * 0.5**4.
    assert side_b["flips"] == {"passToFail": 4, "failToPass": 0, "pairedTasks": 10}
    assert side_b["mcnemar_p"] == pytest.approx(0.125)
    # The interval is the pair comparison's own bootstrap over the same ten tasks.
    diffs_a, diffs_b = np.full(10, 0.5), np.array([1.0] * 6 + [0.0] * 4)
    assert side_b["delta_ci95"] == pytest.approx(list(stats.paired_bootstrap_ci(diffs_a, diffs_b)))
    assert side_b["mean_reward_ci95"] == pytest.approx(list(stats.paired_bootstrap_ci(np.zeros(10), diffs_b)))
    assert side_b["mean_reward_ci95"][0] < 0.6 < side_b["mean_reward_ci95"][1]

    # One dataset at two versions pairs on the task name (issue 41): C's ten tasks of 2.0 pair with A's of 1.0,
    # and the side says it is not like-for-like.
    assert side_c["valid"] is False
    assert side_c["invalid_reasons"] == [
        "not like-for-like: known-answer/tasks 1.0 vs 2.0; 10 tasks paired, 0 of the baseline's "
        "and 0 of the candidate's left out"
    ]
    assert side_c["mean_reward"] == 1.0 and side_c["delta_vs_reference"] == pytest.approx(0.5)
    # A's tasks count as passed (half of two attempts), C's too: no flips
    assert side_c["flips"] == {"passToFail": 0, "failToPass": 0, "pairedTasks": 10}
    assert side_b["mcnemar_p_holm"] == pytest.approx(stats.holm([side_b["mcnemar_p"], side_c["mcnemar_p"]])[0])

    # One row per task name; each side's link lists its own trials of it (each side holds one version).
    v2 = DatasetFactory(name="known-answer/tasks", version="2.0")
    assert body["count"] == 10
    assert [t["task"] for t in body["tasks"]] == TASKS
    t6 = body["tasks"][6]["cells"]
    assert [cell["side"] for cell in t6] == [a.pk, b.pk, c.pk]
    assert [cell["mean_reward"] for cell in t6] == [0.5, 0.0, 1.0]
    assert t6[1]["n"] == 2 and t6[1]["pass_at_k"] == {"1": 0.0}
    expected_ids = sorted(Trial.objects.filter(configuration=c, task__name="t6").values_list("pk", flat=True))
    assert sorted(t6[2]["trial_ids"]) == expected_ids
    assert set(Trial.objects.filter(pk__in=expected_ids).values_list("dataset", flat=True)) == {v2.pk}
    assert t6[2]["url"] == f"/trials/?configuration={c.pk}&task=t6"


def test_a_side_with_fewer_tasks_is_paired_on_those_it_has(client_logged_in, three_sides):
    a, b, _ = three_sides
    d = build_side("side-d", {t: [0.0, 0.0] for t in TASKS[:5]})
    side_b, side_d = _grid(client_logged_in, a, b, d)["sides"][1:]
    assert side_d["invalid_reasons"] == ["task sets differ: 5 task(s) only in baseline, 0 only in candidate"]
    assert side_d["paired_tasks"] == 5 and side_d["n_tasks"] == 5
    assert side_d["delta_vs_reference"] == pytest.approx(-0.5)
    # Its own bootstrap over its five tasks; B's still over all ten.
    assert side_d["delta_ci95"] == pytest.approx(list(stats.paired_bootstrap_ci(np.full(5, 0.5), np.zeros(5))))
    diffs_b = np.array([1.0] * 6 + [0.0] * 4)
    assert side_b["delta_ci95"] == pytest.approx(list(stats.paired_bootstrap_ci(np.full(10, 0.5), diffs_b)))


def test_choosing_another_reference_recomputes_against_it(client_logged_in, three_sides):
    a, b, c = three_sides
    body = _grid(client_logged_in, a, b, reference=b)
    side_a = body["sides"][0]
    assert body["reference"] == b.pk and body["sides"][1]["is_reference"]
    assert side_a["delta_vs_reference"] == pytest.approx(-0.1)
    assert side_a["flips"] == {"passToFail": 0, "failToPass": 4, "pairedTasks": 10}
    assert side_a["mcnemar_p_holm"] is None  # a family of one p: no Holm to name


def test_the_grid_is_stored_until_a_side_changes(client_logged_in, three_sides):
    a, b, _ = three_sides
    first = _grid(client_logged_in, a, b)
    assert GridResult.objects.count() == 1
    computed_at = GridResult.objects.get().updated_at
    assert _grid(client_logged_in, a, b) == first
    assert GridResult.objects.get().updated_at == computed_at  # served from the stored row

    TrialFactory(configuration=b, job=b.trials.first().job, task=b.trials.first().task, reward=0.0)
    changed = _grid(client_logged_in, a, b)
    assert changed["sides"][1]["n_trials"] == first["sides"][1]["n_trials"] + 1


def test_grid_tasks_come_a_hundred_a_page(client_logged_in):
    tasks = {f"task-{i:03d}": [1.0] for i in range(120)}
    a, b = build_side("many-a", tasks), build_side("many-b", tasks)
    first = _grid(client_logged_in, a, b)
    assert first["count"] == 120 and len(first["tasks"]) == 100 and first["next"]
    second = _grid(client_logged_in, a, b, page=2)
    assert [t["task"] for t in second["tasks"]] == [f"task-{i:03d}" for i in range(100, 120)]
    assert second["sides"] == first["sides"]


@pytest.mark.parametrize(
    "query, message",
    [
        ("sides={a}", "choose 2 to 12 sides"),
        ("sides={a},{a}", "named twice"),
        ("sides={a},999999", "999999 not a known configuration id"),
        ("sides={a},{b}&reference=999999", "is not one of the sides"),
        ("sides={a},x", "'x' is not an id"),
    ],
)
def test_grid_refuses_a_bad_choice_of_sides_with_a_clear_message(client_logged_in, three_sides, query, message):
    a, b, _ = three_sides
    response = client_logged_in.get("/api/comparisons/grid/?" + query.format(a=a.pk, b=b.pk))
    assert response.status_code == 400
    assert message in response.json()["detail"]


def test_grid_needs_a_login(client, three_sides):
    a, b, _ = three_sides
    assert client.get(f"/api/comparisons/grid/?sides={a.pk},{b.pk}").status_code == 401
    assert client.get(f"/comparisons/grid/?sides={a.pk},{b.pk}").status_code == 302


def test_grid_of_jobs(client_logged_in, three_sides):
    a, b, _ = three_sides
    job_a, job_b = a.trials.first().job, b.trials.first().job
    response = client_logged_in.get(f"/api/comparisons/grid/?side_jobs={job_a.pk},{job_b.pk}")
    assert response.status_code == 200
    sides = response.json()["sides"]
    assert [s["kind"] for s in sides] == ["job", "job"]
    assert sides[1]["delta_vs_reference"] == pytest.approx(0.1)


def test_grid_chart_draws_each_side_with_its_interval(client_logged_in, three_sides):
    a, b, c = three_sides
    figure = client_logged_in.get(f"/api/comparisons/grid/chart/?sides={a.pk},{b.pk},{c.pk}").json()
    trace = figure["data"][0]
    assert trace["y"] == pytest.approx([0.5, 0.6, 1.0])
    assert trace["customdata"][1] == f"/trials/?configuration={b.pk}"
    assert trace["marker"]["symbol"] == ["circle", "circle", "x"]  # C is not comparable
    assert trace["error_y"]["array"][0] == 0  # the reference's interval is [0.5, 0.5]


# Trends ---------------------------------------------------------------------------------


@pytest.fixture
def family():
    """Three versions of one agent on one dataset, created out of their time order."""
    v2 = build_side("agent-v2", {t: [1.0, 0.0] for t in TASKS[:4]}, trial_kwargs={"started_at": _day(2)})
    v1 = build_side("agent-v1", {t: [0.0, 0.0] for t in TASKS[:4]}, trial_kwargs={"started_at": _day(1)})
    v3 = build_side("agent-v3", {t: [1.0, 1.0] for t in TASKS[:4]}, trial_kwargs={"started_at": _day(3)})
    elsewhere = DatasetFactory(name="another/dataset", version="1.0")
    build_side("agent-v1", {"x": [1.0]}, dataset=elsewhere, trial_kwargs={"started_at": _day(0)})
    return v1, v2, v3


def _day(n: int) -> datetime:
    return datetime(2026, 1, 1 + n, 12, tzinfo=UTC)


def test_trend_orders_the_family_by_first_trial_with_known_answers(client_logged_in, family):
    v1, v2, v3 = family
    dataset = v1.trials.filter(dataset__version="1.0", dataset__name="known-answer/tasks").first().dataset
    response = client_logged_in.get(f"/api/comparisons/trend/?dataset={dataset.pk}")
    assert response.status_code == 200
    points = response.json()["points"]
    assert [p["configuration"] for p in points] == [v1.pk, v2.pk, v3.pk]
    assert [p["mean_reward"] for p in points] == [0.0, 0.5, 1.0]
    assert [(p["passes"], p["decided"]) for p in points] == [(0, 8), (4, 8), (8, 8)]  # the other dataset left out
    assert [p["pass_rate"] for p in points] == [0.0, 0.5, 1.0]
    assert points[1]["mean_reward_ci95"] == [0.5, 0.5]  # every task averages 0.5
    assert points[1]["pass_rate_ci95"] == pytest.approx(list(stats.proportion_ci(4, 8)))
    assert points[0]["first_trial_at"].startswith("2026-01-02")
    job = v1.trials.filter(dataset=dataset).first().job_id  # each version's trials are one run (job)
    assert points[0]["trials_url"] == f"/trials/?configuration={v1.pk}&dataset={dataset.pk}&job={job}"


def test_trend_of_configurations_chosen_by_hand(client_logged_in, family):
    v1, _, v3 = family
    response = client_logged_in.get(
        f"/api/comparisons/trend/?dataset=known-answer/tasks@1.0&configurations={v3.pk},{v1.pk}"
    )
    body = response.json()
    assert body["chosen_by_hand"] is True
    assert [p["label"] for p in body["points"]] == ["agent-v1", "agent-v3"]
    figure = client_logged_in.get(
        f"/api/comparisons/trend/chart/?dataset=known-answer/tasks@1.0&configurations={v3.pk},{v1.pk}"
    ).json()
    names = ["agent-v1: mean reward", "agent-v1: pass rate", "agent-v3: mean reward", "agent-v3: pass rate"]
    assert [trace["name"] for trace in figure["data"]] == names  # a line per configuration, none across them
    assert figure["data"][0]["customdata"] + figure["data"][2]["customdata"] == [
        p["trials_url"] for p in body["points"]
    ]


def test_trend_refuses_an_unknown_dataset(client_logged_in):
    response = client_logged_in.get("/api/comparisons/trend/?dataset=nope@9")
    assert response.status_code == 400
    assert "not a known dataset" in response.json()["detail"]


# Pages ----------------------------------------------------------------------------------


def test_grid_page_shows_the_sides_their_validity_and_cells_that_open_trials(client_logged_in, three_sides):
    a, b, c = three_sides
    response = client_logged_in.get(f"/comparisons/grid/?side={a.pk}&side={b.pk}&side={c.pk}&reference={a.pk}")
    assert response.status_code == 200
    html = response.content.decode()
    assert "not like-for-like: known-answer/tasks 1.0 vs 2.0; 10 tasks paired" in html
    assert f'href="/trials/?configuration={b.pk}&amp;task=t6"' in html
    assert f"/api/comparisons/grid/chart/?sides={a.pk}%2C{b.pk}%2C{c.pk}&amp;reference={a.pk}" in html
    assert html.count('class="cell-link"') == 30  # 10 tasks x (A, B) of 1.0 and 10 x C of 2.0


def test_grid_page_sorts_tasks_by_a_side(client_logged_in, three_sides):
    a, b, _ = three_sides
    response = client_logged_in.get(f"/comparisons/grid/?sides={a.pk},{b.pk}&reference={a.pk}&sort=side-{b.pk}")
    rows = response.context["tasks"]["page"].object_list
    assert [r["task"] for r in rows[:4]] == ["t6", "t7", "t8", "t9"]  # B's zeros first
    d = build_side("side-d", {"t0": [0.5]})
    response = client_logged_in.get(f"/comparisons/grid/?sides={a.pk},{d.pk}&sort=-side-{d.pk}")
    rows = response.context["tasks"]["page"].object_list
    assert [r["task"] for r in rows[:2]] == ["t0", "t9"]  # D's only task, then those it lacks, last first
    response = client_logged_in.get(f"/comparisons/grid/?sides={a.pk},{b.pk}&side_sort=-delta")
    assert [s["id"] for s in response.context["side_table"]["rows"]] == [b.pk, a.pk]


def test_grid_page_explains_a_bad_choice(client_logged_in, three_sides):
    a, _, _ = three_sides
    response = client_logged_in.get(f"/comparisons/grid/?side={a.pk}")
    assert response.status_code == 400
    assert "choose 2 to 12 sides" in response.content.decode()


def test_trend_page_lists_the_points_with_their_links(client_logged_in, family):
    v1, v2, v3 = family
    response = client_logged_in.get("/comparisons/trend/?dataset=known-answer/tasks@1.0")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index("agent-v1") < html.index("agent-v2") < html.index("agent-v3")
    assert f'href="/trials/?configuration={v2.pk}&amp;dataset=' in html
    assert 'id="chart-trend"' in html
    # The first trial's time in the one date-time format of every page, not the stored ISO text.
    first = v1.trials.filter(dataset__name="known-answer/tasks").order_by("started_at").first().started_at
    assert f'<time datetime="{first.isoformat()}">{first:%Y-%m-%d %H:%M:%S} UTC</time>' in html


def test_the_trend_is_stored_until_a_trial_of_its_family_changes(client_logged_in, family):
    v1, _, _ = family
    url = "/api/comparisons/trend/?dataset=known-answer/tasks@1.0"
    first = client_logged_in.get(url).json()
    assert client_logged_in.get(url).json() == first and GridResult.objects.count() == 1
    trial = v1.trials.filter(dataset__version="1.0", dataset__name="known-answer/tasks").first()
    TrialFactory(configuration=v1, job=trial.job, task=trial.task, reward=1.0, started_at=_day(1))
    points = client_logged_in.get(url).json()["points"]
    assert (points[0]["passes"], points[0]["decided"]) == (1, 9)


def test_a_side_without_trials_is_shown_as_not_comparable(client_logged_in, three_sides):
    a, _, _ = three_sides
    empty = build_side("side-empty", {})
    side = _grid(client_logged_in, a, empty)["sides"][1]
    assert side["n_trials"] == 0 and side["mean_reward"] is None and side["mean_reward_ci95"] is None
    assert "candidate has no trials" in side["invalid_reasons"]
    assert side["delta_vs_reference"] is None and side["mcnemar_p"] is None
