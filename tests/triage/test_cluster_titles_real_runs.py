"""Cluster titles on the real Terminal-Bench 1 runs (issue 39, Must 2): each configuration's failures form
clusters a person can tell apart by name, and each `failure_mode` its results.json rows give its failures
is named in a title. Known answers are read from the runs' own results.json files."""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Trial

RUNS = [
    REFERENCE / "terminal-bench-1",
    REFERENCE / "public-runs-2" / "tb1-droid-5x2",
    REFERENCE / "public-runs-2" / "tb1-goose-flat",
]
QUIET = {"unset", "none", ""}  # Terminal-Bench 1's "nothing went wrong" modes
TITLE = re.compile(r'<span class="cluster-title" title="([^"]*)">')


def raw_failures() -> dict[str, list[dict]]:
    """The rows that did not pass (`is_resolved` false or null), by the file they came from."""
    found: dict[str, list[dict]] = {}
    for run in RUNS:
        for results in sorted(run.rglob("*results.json")):
            rows = json.loads(results.read_text()).get("results") or []
            found[str(results)] = [r for r in rows if r.get("is_resolved") is not True]
    return found


@pytest.fixture
def imported(db):
    for run in RUNS:
        import_path(run)


def titles(client, **filters) -> list[str]:
    """Every cluster's title on the list, page by page."""
    found: list[str] = []
    for number in range(1, 100):
        page = client.get("/qc/clusters/", {**filters, "page": number})
        assert page.status_code == 200
        found += [html.unescape(t) for t in TITLE.findall(page.content.decode())]
        if page.context["page"].number == page.context["page"].paginator.num_pages:
            return found
    raise AssertionError("more than 99 pages of clusters")


def test_each_configurations_clusters_read_apart_and_name_its_failure_modes(client, triager, imported):
    client.force_login(triager)
    modes: dict[str, set[str]] = defaultdict(set)  # configuration key -> failure modes of its failures
    failures = 0
    for rows in raw_failures().values():
        for row in rows:
            failures += 1
            configuration = Trial.objects.get(key=f"tb1:{row['id']}").configuration.key
            if row["failure_mode"] not in QUIET:
                modes[configuration].add(row["failure_mode"])
    assert failures and len(modes) == 4  # the runs hold four configurations' failures
    everything = titles(client)
    assert len(everything) == len(set(everything)), everything  # no two clusters read the same
    assert not any(t == "no error text" for t in everything)
    for configuration, wanted in modes.items():
        shown = titles(client, configuration=configuration)
        assert len(shown) >= 3, (configuration, shown)  # several clusters, not one catch-all
        assert len(shown) == len(set(shown)), (configuration, shown)
        for mode in wanted:
            assert any(mode in title for title in shown), (configuration, mode, shown)
