"""The comparison's charts on the shared TB1 runs: task labels on every task axis, and "no data" rather than
empty axes where no trial records a cost (TB1 results rows carry none)."""

from __future__ import annotations

import json

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Configuration

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
