"""A fractional reward is a score, not a failure, and a trial passes at reward 1 unless its dataset says
otherwise (issue 41). None of the formats read states a pass threshold (Harbor's `min_reward` gates a
multi-step task's next step), so a dataset's row sets it in the admin: its reward-scored trials are decided
again, later imports and live trials are decided by it, and the job page, the comparison and the trend
count their pass rates by it and say which threshold and where it came from.

Harbor job folders are written as `harbor run` writes them (tests.builders); the OTLP trace by
opentelemetry-sdk. Known answers come from the rewards the test wrote, by the issue's rule."""

from __future__ import annotations

import html
import json
from pathlib import Path

import orjson
import pytest
from django.utils.html import escape

from tests.builders import import_path, set_pass_reward_in_admin, status_by_rule, write_trial
from tests.imports.export_helpers import exported, members
from tests.imports.otlp_helpers import otlp_body, otlp_file, scored_trace
from trials.models import Dataset, Job, Trial

pytestmark = pytest.mark.django_db

DATASET, VERSION = "swe-lite", "1.0"
BASE_REWARDS = {"t1": 1.0, "t2": 0.75, "t3": 0.5, "t4": 0.25, "t5": 0.0}
CAND_REWARDS = {"t1": 1.0, "t2": 1.0, "t3": 0.6, "t4": 0.0, "t5": 0.5}
TIMED_OUT = ("t6", 0.6)  # a run that timed out with a reward: counted by its reward, at the threshold


def harbor_job(root: Path, name: str, rewards: dict[str, float]) -> Job:
    """A Harbor job folder on DATASET@VERSION (its config.json, as `harbor run -d` writes it), a trial a
    task with these rewards, and one more that timed out with a reward."""
    job = root / name
    job.mkdir(parents=True)
    config = {"job_name": name, "datasets": [{"name": DATASET, "version": VERSION}], "agents": [{"name": name}]}
    (job / "config.json").write_bytes(orjson.dumps(config))
    for n, (task, reward) in enumerate([*rewards.items(), TIMED_OUT]):
        trial = write_trial(job, f"{task}__{name[:4]}{n:03d}")
        result = orjson.loads((trial / "result.json").read_bytes())
        result |= {
            "source": DATASET,
            "agent_info": {"name": name, "version": "1", "model_info": {"name": "m"}},
            "verifier_result": {"rewards": {"reward": reward}},
        }
        if task == TIMED_OUT[0]:
            result["exception_info"] = {"exception_type": "AgentTimeoutError", "exception_message": "timed out"}
        (trial / "result.json").write_bytes(orjson.dumps(result))
    import_path(job)
    return Job.objects.get(name=name)


def pass_rate(rewards: dict[str, float], threshold: float) -> float:
    counted = [*rewards.values(), TIMED_OUT[1]]  # (the timed-out run too: it has a reward)
    return sum(r >= threshold for r in counted) / len(counted)


def statuses(client, job: Job) -> dict[str, str]:
    rows = client.get("/api/trials/", {"job": job.pk}).json()["results"]
    return {row["task"]["name"]: row["status"] for row in rows}


def test_a_dataset_threshold_set_in_the_admin_decides_its_trials_and_the_pages_count_and_state_it(
    tmp_path, client_logged_in
):
    base = harbor_job(tmp_path, "base-job", BASE_REWARDS)
    cand = harbor_job(tmp_path, "cand-job", CAND_REWARDS)
    dataset = Dataset.objects.get(name=DATASET, version=VERSION)
    assert dataset.pass_reward is None  # (no format says otherwise: full marks)
    assert statuses(client_logged_in, base) == {
        **{task: status_by_rule(reward, 1.0) for task, reward in BASE_REWARDS.items()},
        TIMED_OUT[0]: "timeout",
    }
    query = {"baseline_job": base.pk, "candidate_job": cand.pk}
    body = client_logged_in.get("/api/comparisons/", query).json()
    assert body["baseline"]["metrics"]["passRate"] == pytest.approx(pass_rate(BASE_REWARDS, 1.0))
    page = client_logged_in.get(f"/jobs/{base.pk}/").content.decode()
    assert "a trial passes at reward ≥ 1.0, however its run ended" in page
    assert "a lower one is partial or failed (the threshold: full marks" in page

    said = set_pass_reward_in_admin(dataset, "0.5")
    assert "a trial passes at reward ≥ 0.5" in said  # (the admin says how many trials it decided again)

    assert client_logged_in.get(f"/api/trials/{base.trials.first().pk}/").json()["dataset"]["pass_reward"] == 0.5
    for job, rewards in ((base, BASE_REWARDS), (cand, CAND_REWARDS)):
        assert statuses(client_logged_in, job) == {
            **{task: status_by_rule(reward, 0.5) for task, reward in rewards.items()},
            TIMED_OUT[0]: "timeout",  # (not a status its reward decided)
        }
    page = client_logged_in.get(f"/jobs/{base.pk}/").content.decode()
    decided = sum(status_by_rule(r, 0.5) == "passed" for r in BASE_REWARDS.values())
    decided += TIMED_OUT[1] >= 0.5  # (the one rule of a pass: by its reward however its run ended)
    assert f'<dd id="job-accuracy">{decided / (len(BASE_REWARDS) + 1):.4f} ' in page
    rule = "a trial passes at reward ≥ 0.5, however its run ended: one that timed out, errored or hit a limit with"
    rule += " that reward passes, flagged for a look; a lower one is partial or failed"
    rule += f" (the threshold: set on dataset {DATASET}@{VERSION})"
    assert f'<span id="pass-threshold">{escape(rule)}</span>' in page
    body = client_logged_in.get("/api/comparisons/", query).json()
    assert body["baseline"]["metrics"]["passRate"] == pytest.approx(pass_rate(BASE_REWARDS, 0.5))
    assert body["candidate"]["metrics"]["passRate"] == pytest.approx(pass_rate(CAND_REWARDS, 0.5))
    page = client_logged_in.get("/comparisons/", query).content.decode()
    assert '<span id="pass-threshold">a trial passes at reward ≥ 0.5, ' in page
    assert escape(f"(the threshold: set on dataset {DATASET}@{VERSION})") in page
    grid = client_logged_in.get("/comparisons/grid/", {"side_jobs": f"{base.pk},{cand.pk}"}).content.decode()
    rule = f"a trial passes at reward ≥ 0.5 (the threshold: set on dataset {DATASET}@{VERSION})"
    assert f'<span id="pass-threshold">{escape(rule)}</span>' in grid
    cells = client_logged_in.get("/api/comparisons/grid/", {"side_jobs": f"{base.pk},{cand.pk}"}).json()
    rates = {side["id"]: side["pass_rate"] for side in cells["sides"]}
    assert rates == pytest.approx({base.pk: pass_rate(BASE_REWARDS, 0.5), cand.pk: pass_rate(CAND_REWARDS, 0.5)})
    trend = client_logged_in.get("/comparisons/trend/", {"dataset": dataset.pk}).content.decode()
    assert escape(f"a trial passes at reward ≥ 0.5 (the threshold: set on dataset {DATASET}@{VERSION})") in trend

    # a trial imported after the threshold was set is decided by it too
    later = harbor_job(tmp_path, "later-job", {"t7": 0.5})
    assert statuses(client_logged_in, later)["t7"] == status_by_rule(0.5, 0.5)
    # cleared, full marks again: a fractional reward below it is partial, never failed
    set_pass_reward_in_admin(dataset, "")
    assert statuses(client_logged_in, base) == {
        **{task: status_by_rule(reward, 1.0) for task, reward in BASE_REWARDS.items()},
        TIMED_OUT[0]: "timeout",
    }


@pytest.mark.parametrize("threshold", [None, 0.5])
def test_an_otlp_trial_by_file_is_decided_at_its_datasets_threshold(tmp_path, threshold):
    Dataset.objects.create(name=DATASET, version=VERSION, pass_reward=threshold)
    spans = scored_trace(0.6, DATASET, VERSION)
    import_path(otlp_file(tmp_path / "run.json", spans, []))
    reward = next(s for s in spans if s.parent is None).attributes["benchmark.reward"]
    trial = Trial.objects.get()
    assert trial.dataset.name == DATASET and trial.reward == reward
    assert trial.status == status_by_rule(reward, 1.0 if threshold is None else threshold)  # (full marks: none set)


def test_a_live_trial_ends_decided_at_its_datasets_threshold(transactional_db):
    from tests.live.helpers import runner_client

    Dataset.objects.create(name=DATASET, version=VERSION, pass_reward=0.5)
    spans = scored_trace(0.6, DATASET, VERSION)
    runner, _ = runner_client()
    response = runner.post("/v1/traces", data=json.dumps(otlp_body(spans)), content_type="application/json")
    assert response.status_code == 200, response.content
    trial = Trial.objects.get()
    reward = next(s for s in spans if s.parent is None).attributes["benchmark.reward"]
    assert (trial.dataset.name, trial.reward, trial.status) == (DATASET, reward, status_by_rule(reward, 0.5))


def test_a_trials_export_carries_the_threshold_that_decided_it_as_its_page_states_it(tmp_path, client_logged_in):
    job = harbor_job(tmp_path, "base-job", BASE_REWARDS)
    rewards = {**BASE_REWARDS, TIMED_OUT[0]: TIMED_OUT[1]}
    dataset = Dataset.objects.get(name=DATASET, version=VERSION)
    rules = {
        None: ("default", "reward ≥ 1.0 (the threshold: full marks, the default: no dataset here sets its own)"),
        0.5: ("dataset", f"reward ≥ 0.5 (the threshold: set on dataset {DATASET}@{VERSION})"),
    }
    for threshold, (source, rule) in rules.items():
        if threshold is not None:
            set_pass_reward_in_admin(dataset, str(threshold))
        at = 1.0 if threshold is None else threshold
        page = html.unescape(client_logged_in.get(f"/jobs/{job.pk}/").content.decode())
        head, _, said = rule.partition(" (the threshold: ")
        assert f"a trial passes at {head}, " in page and f"(the threshold: {said}" in page  # (what the page says)
        for trial in job.trials.select_related("task"):
            manifest = json.loads(members(exported(client_logged_in, trial))["export-manifest.json"])["trial"]
            reward = rewards[trial.task.name]
            assert manifest["passThreshold"] == {"reward": at, "source": source, "rule": rule}
            assert manifest["passed"] is (reward >= at), (trial.task.name, reward, at)
            assert manifest["status"] == client_logged_in.get(f"/api/trials/{trial.pk}/").json()["status"]
