"""OpenChrome envelopes that are not episodes (issue 41): an auth-usability envelope is one row per library,
a long-run reliability envelope's results[] are time samples of one run, and a mock (`live: false`) run is
never headline-eligible, which the pages say in words.

No such file is in ../shared; the envelopes are built here to the shape of the public ones
(shaun0927/openchrome `benchmark/results/auth-usability.json` @040fca9 and `longrun-stability.json` @ff848fe,
and the result envelope of ../shared/spec/formats-seeds.md 3.1), with values chosen by the test."""

from __future__ import annotations

import orjson
import pytest
from django.utils.html import escape

from tests.builders import import_path
from trials.models import Job, Trial

ENVIRONMENT = {"capturedAt": "2026-05-17T16:10:25.493Z", "gitSha": "1ad1b79c", "os": "darwin 25.3.0"}
LIBRARIES = {"openchrome": "passed", "playwright": "passed", "puppeteer": "failed", "browser-use": "passed"}


def auth_usability() -> dict:
    return {
        "axis": "auth-usability",
        "schemaVersion": "1.0.0",
        "environment": ENVIRONMENT,
        "competitors": [{"name": name, "version": "1.12.4"} for name in LIBRARIES],
        "tokenizer": "cl100k_base",
        "results": [
            {
                "library": name,
                "scriptPath": f"tests/benchmark/auth-setup-scripts/{name}.auth-setup.ts",
                "loc": 12 + i,
                "profileAttach": name == "openchrome",
                "wallClockMinutes": 0.5,
                "loggedInSmoked": smoke == "passed",
                "localFixtureSmoke": smoke,
                "note": "credential login reached protected content",
            }
            for i, (name, smoke) in enumerate(LIBRARIES.items())
        ],
    }


def longrun(live: bool = False) -> dict:
    return {
        "axis": "reliability",
        "schemaVersion": "1.0.0",
        "environment": {**ENVIRONMENT, "gitSha": "a03b097c"},
        "competitors": [{"name": "openchrome", "version": "1.11.0"}],
        "results": [{"tMs": 1000 * i + (4 if i else 0), "rssBytes": 30_000_000 + 1_000 * i} for i in range(6)],
        "stability": {"sampleCount": 6, "durationMs": 5004, "suspectedLeak": False},
        "overallPassRate": 0.99,
        "successDrift": [{"binIndex": i, "attempts": 200, "successes": 200 - 2 * (i == 3)} for i in range(5)],
        "options": {"durationMs": 5000, "sampleIntervalMs": 1000, "workloadPerInterval": 200, "live": live},
    }


def imported(tmp_path, name: str, data: dict) -> Job:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(data))
    import_path(path)
    return Job.objects.get(source_format="openchrome", name=data["axis"])


def test_auth_usability_is_one_trial_per_library(client_logged_in, tmp_path):
    data = auth_usability()
    job = imported(tmp_path, "auth-usability.json", data)
    rows = client_logged_in.get("/api/trials/", {"job": job.pk}).json()["results"]
    assert len(rows) == len(data["results"])  # one per library row
    by_library = {Trial.objects.get(pk=r["id"]).configuration.key: r for r in rows}
    assert set(by_library) == {row["library"] for row in data["results"]}
    for row in data["results"]:
        trial = by_library[row["library"]]
        assert trial["status"] == row["localFixtureSmoke"]
        assert trial["reward"] == (1.0 if row["localFixtureSmoke"] == "passed" else 0.0)
        detail = client_logged_in.get(f"/api/trials/{trial['id']}/").json()
        assert (
            detail["provenance"]["loc"] == row["loc"] and detail["provenance"]["profileAttach"] == row["profileAttach"]
        )
    # the rows are trials now, not "result rows that are not trials"
    assert job.kept_result_rows() == []


def test_a_long_run_is_one_trial_whose_results_are_its_time_samples(client_logged_in, tmp_path):
    data = longrun()
    job = imported(tmp_path, "longrun-stability.json", data)
    [trial] = Trial.objects.filter(job=job)  # one run, not one task per sample
    assert trial.documents["timeSamples"] == data["results"]
    bins = data["successDrift"]
    assert trial.reward == pytest.approx(sum(b["successes"] for b in bins) / sum(b["attempts"] for b in bins))
    assert trial.status == Trial.Status.PARTIAL  # 998 of 1,000 attempts: a score below a pass, not a failure
    assert trial.duration_sec == pytest.approx(max(s["tMs"] for s in data["results"]) / 1000)
    detail = client_logged_in.get(f"/api/trials/{trial.pk}/").json()
    assert detail["provenance"]["timeSamples"] == len(data["results"])
    assert job.kept_result_rows() == []


def test_a_mock_run_is_never_headline_eligible_and_the_pages_say_so(client_logged_in, tmp_path):
    job = imported(tmp_path, "longrun-stability.json", longrun(live=False))
    [trial] = Trial.objects.filter(job=job)
    assert trial.provenance["measurementMode"] == "mock"
    page = client_logged_in.get(f"/jobs/{job.pk}/").content.decode()
    said = (
        "this run is a mock (live: false): it checks the harness, not the libraries, so it is never headline-eligible"
    )
    assert escape(said) in page
    # a comparison of the mock run with a live one: not headline-eligible, the reason in words
    live = longrun(live=True)
    live["environment"] = {**ENVIRONMENT, "gitSha": "b1b2b3b4"}
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / "longrun.json").write_bytes(orjson.dumps(live))
    import_path(tmp_path / "live" / "longrun.json")
    other = Job.objects.exclude(pk=job.pk).get(source_format="openchrome")
    query = f"baseline_job={other.pk}&candidate_job={job.pk}"
    c = client_logged_in.get(f"/api/comparisons/?{query}").json()["comparison"]
    reason = (
        "measurement mode mock is not headline-eligible: a mock run (live: false) checks the harness, "
        "not the libraries; use live or recorded-real"
    )
    assert c["headlineEligible"] is False and reason in c["headlineReasons"]
    assert escape(reason) in client_logged_in.get(f"/comparisons/?{query}").content.decode()


def test_a_live_run_is_not_called_a_mock(client_logged_in, tmp_path):
    job = imported(tmp_path, "longrun-stability.json", longrun(live=True))
    [trial] = Trial.objects.filter(job=job)
    assert trial.provenance.get("measurementMode") != "mock"
    assert "mock" not in client_logged_in.get(f"/jobs/{job.pk}/").content.decode()
