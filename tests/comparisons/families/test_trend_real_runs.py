"""The trend on the shared TB1 droid runs: each run (job) of each configuration a point by date, one line
per configuration (tb1-droid-5x2: two configurations, five runs each)."""

from __future__ import annotations

import json

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Dataset

pytestmark = pytest.mark.django_db

DROID = REFERENCE / "public-runs-2" / "tb1-droid-5x2"


def test_each_run_of_each_droid_configuration_is_a_point_of_its_own_line(client_logged_in):
    submissions = sorted(p for p in DROID.iterdir() if p.is_dir())
    for submission in submissions:
        import_path(submission)
    runs = {s.name: sorted(r.name for r in s.iterdir() if (r / "results.json").is_file()) for s in submissions}
    [dataset] = Dataset.objects.filter(trial__configuration__key__in=list(runs)).distinct()
    body = client_logged_in.get(f"/api/comparisons/trend/?dataset={dataset.pk}").json()
    got: dict[str, list[str]] = {}
    for p in body["points"]:
        got.setdefault(p["label"], []).append(p["run"])
    assert {k: sorted(v) for k, v in got.items()} == runs  # 2 configurations x 5 runs
    for p in body["points"]:
        rows = json.loads((DROID / p["label"] / p["run"] / "results.json").read_text())["results"]
        scored = [r for r in rows if r["is_resolved"] is not None]
        assert p["n_trials"] == len(rows) and p["decided"] == len(scored)
    figure = client_logged_in.get(f"/api/comparisons/trend/chart/?dataset={dataset.pk}").json()
    lines = [t for t in figure["data"] if t["name"].endswith("mean reward")]
    assert sorted(t["name"] for t in lines) == sorted(f"{k}: mean reward" for k in runs)
    for line in lines:
        assert len(line["x"]) == 5 and line["x"] == sorted(line["x"])  # its five runs, by date
