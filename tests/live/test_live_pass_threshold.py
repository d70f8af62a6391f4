"""A live trial is decided again when its dataset's pass threshold changes, as an imported one is (issue 41:
"a fractional reward is a score, not a failure; pass rates use a threshold the page states").

Live trials are reported through the runner's real commands; a Harbor trial of the same dataset is imported
from a folder written as `harbor run` writes it; the threshold is set in the admin as a person sets it. Known
answers come from the rewards the test sent, by the issue's rule."""

from __future__ import annotations

import orjson
import pytest

from tests.builders import import_path, set_pass_reward_in_admin, status_by_rule, write_trial
from tests.live.helpers import runner_client, spine
from trials.models import Dataset

pytestmark = pytest.mark.django_db

START = "/api/commands/start_benchmark_trial/"
# trial id: (reward, how its runner ended it)
LIVE = {"live-a": (0.6, "completed"), "live-b": (0.3, "completed"), "live-c": (0.6, "failed")}
IMPORTED_REWARD = 0.6


def report(runner, trial_id: str, reward: float, ending: str) -> int:
    """One live trial as a runner reports it: started, its reward recorded, ended."""
    started = runner.post(START, spine(trial_id), format="json")
    assert started.status_code in (200, 201), started.content
    pk = started.json()["trial_id"]
    body = {"benchmark": {"trialId": trial_id}, "reward": reward}
    assert runner.post("/api/commands/record_benchmark_reward/", body, format="json").status_code == 200
    done = runner.post("/api/commands/complete_benchmark_trial/", {"trial_id": pk, "status": ending}, format="json")
    assert done.status_code == 200, done.content
    return pk


def imported_trial(tmp_path, dataset: dict[str, str], reward: float) -> None:
    """A Harbor job folder on the same dataset, one trial with this reward."""
    job = tmp_path / "harbor-job"
    job.mkdir()
    config = {
        "job_name": "harbor-job",
        "datasets": [{"name": dataset["datasetId"], "version": dataset["datasetVersion"]}],
    }
    (job / "config.json").write_bytes(orjson.dumps(config))
    trial = write_trial(job, "fix-readme__HHHHHHH")
    result = orjson.loads((trial / "result.json").read_bytes())
    result |= {"source": dataset["datasetId"], "verifier_result": {"rewards": {"reward": reward}}}
    (trial / "result.json").write_bytes(orjson.dumps(result))
    import_path(job)


def test_a_changed_threshold_decides_finished_live_trials_again_as_imported_ones(tmp_path, client_logged_in):
    runner, _ = runner_client()
    live = {report(runner, trial_id, reward, ending): (reward, ending) for trial_id, (reward, ending) in LIVE.items()}
    benchmark = spine()["benchmark"]
    imported_trial(tmp_path, benchmark, IMPORTED_REWARD)
    dataset = Dataset.objects.get(name=benchmark["datasetId"], version=benchmark["datasetVersion"])
    rows = client_logged_in.get("/api/trials/", {"dataset": dataset.pk}).json()["results"]
    imported = next(row["id"] for row in rows if row["id"] not in live)
    assert len(rows) == len(LIVE) + 1

    set_pass_reward_in_admin(dataset, "0.5")

    def status(pk: int) -> str:  # (the trials API, which the trial page and list read)
        return client_logged_in.get(f"/api/trials/{pk}/").json()["status"]

    for pk, (reward, ending) in live.items():
        # a runner's "failed" is its verdict, whatever the reward; a completed one is its reward's, at 0.5
        assert status(pk) == ("failed" if ending == "failed" else status_by_rule(reward, 0.5)), (pk, reward, ending)
    assert status(imported) == status_by_rule(IMPORTED_REWARD, 0.5)
    passed = client_logged_in.get("/api/trials/", {"dataset": dataset.pk, "passes": "true"}).json()["results"]
    expected = {pk for pk, (reward, ending) in live.items() if ending == "completed" and reward >= 0.5}
    assert {row["id"] for row in passed} == expected | {imported}

    set_pass_reward_in_admin(dataset, "0.25")
    for pk, (reward, ending) in live.items():
        assert status(pk) == ("failed" if ending == "failed" else status_by_rule(reward, 0.25))
