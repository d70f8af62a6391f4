"""The comparison's charts on the shared TB1 runs: task labels on every task axis, and "no data" rather than
empty axes where no trial records a cost (TB1 results rows carry none)."""

from __future__ import annotations

import json

import pytest

from tests.builders import REFERENCE, import_path, tb1_rows
from trials.models import Configuration, Job

pytestmark = pytest.mark.django_db

DROID = REFERENCE / "public-runs-2" / "tb1-droid-5x2"


def _chart(client, chart: str) -> dict:
    for submission in sorted(p for p in DROID.iterdir() if p.is_dir()):
        import_path(submission)
    base = Configuration.objects.get(key__endswith="sonnet").pk
    cand = Configuration.objects.get(key__endswith="opus").pk
    return client.get(f"/api/comparisons/charts/{chart}/?baseline={base}&candidate={cand}").json()


def _tasks() -> set[str]:
    return {
        row["task_id"] for path in DROID.glob("*/*/results.json") for row in json.loads(path.read_text())["results"]
    }


def test_the_cost_chart_says_no_data_where_no_trial_records_a_cost(client_logged_in):
    rows = [row for path in DROID.glob("*/*/results.json") for row in json.loads(path.read_text())["results"]]
    assert not any(row.get("cost") or row.get("total_cost") for row in rows)  # the raw rows carry no cost
    figure = _chart(client_logged_in, "cost_reward")
    assert figure["data"] == []
    assert figure["layout"]["annotations"][0]["text"].startswith("no data")
    assert figure["layout"]["xaxis"] == {"visible": False}


@pytest.mark.parametrize(("chart", "axis"), [("reward_delta", "xaxis"), ("heatmap", "yaxis")])
def test_the_task_charts_label_every_task(client_logged_in, chart, axis):
    figure = _chart(client_logged_in, chart)
    [trace] = figure["data"]
    labels = trace["x"] if axis == "xaxis" else trace["y"]
    assert set(labels) <= _tasks() and len(labels) > 40  # the run's tasks, more than the old cut-off showed
    assert figure["layout"][axis]["showticklabels"] is True


MINI = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
OPUS = DROID / "20250923_droid_claude-4-1-opus"


def test_the_delta_chart_ticks_each_paired_task_by_both_ends_of_its_name_and_hovers_it_whole(client_logged_in):
    import_path(MINI)
    import_path(OPUS)
    base, cand = (Configuration.objects.get(key=folder.name).pk for folder in (MINI, OPUS))
    figure = client_logged_in.get(f"/api/comparisons/charts/reward_delta/?baseline={base}&candidate={cand}").json()
    scored = [{row["task_id"] for row in tb1_rows(folder) if row["is_resolved"] is not None} for folder in (MINI, OPUS)]
    paired = scored[0] & scored[1]
    [trace] = figure["data"]
    axis = figure["layout"]["xaxis"]
    assert set(trace["x"]) == set(axis["tickvals"]) == paired and len(axis["ticktext"]) == len(paired) == 47
    assert axis["tickmode"] == "array" and axis["showticklabels"] is True  # every tick drawn, none skipped
    for name, tick in zip(axis["tickvals"], axis["ticktext"], strict=True):
        if len(name) <= 26:
            assert tick == name
        else:  # "decommissioning-service-with-sensitive-data" -> "decommission…ensitive-data"
            head, tail = tick.split("…")
            assert len(tick) == 26 and name.startswith(head) and name.endswith(tail) and len(head) >= 12
    assert "%{x}" in trace["hovertemplate"]  # the hover names the bar's category: the task's whole name
    assert figure["layout"]["height"] >= 400  # as tall as its card, whatever the count of tasks


def test_the_delta_chart_says_no_data_where_two_real_logs_share_no_task(client_logged_in):
    import_path(REFERENCE / "inspect")  # theory-of-mind and security-guide: two datasets, no task in common
    base, cand = Job.objects.filter(source_format="inspect").order_by("pk").values_list("pk", flat=True)[:2]
    query = f"baseline_job={base}&candidate_job={cand}"
    figure = client_logged_in.get(f"/api/comparisons/charts/reward_delta/?{query}").json()
    assert figure["data"] == [] and figure["layout"]["xaxis"] == {"visible": False}
    assert figure["layout"]["annotations"][0]["text"] == "no data: no task is scored on both sides"
