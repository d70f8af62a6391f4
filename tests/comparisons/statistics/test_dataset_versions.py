"""Terminal-Bench 2 and later run on Harbor as tagged dataset versions (issue 41): a comparison of two
versions of one dataset pairs the tasks both hold on their names, says it is not like-for-like and how many
tasks it left out; two different datasets never pair (issue 39, Must 1), whatever their task names."""

from __future__ import annotations

import orjson
import pytest
from django.utils.html import escape

from tests.builders import import_path, write_trial
from trials.models import Job, Trial

V3_TASKS = ["hello-world", "fix-git", "sqlite-db", "regex-log", "crack-7z", "qemu-boot", "pytorch-fit"]
V4_TASKS = ["hello-world", "fix-git", "sqlite-db", "regex-log", "build-pov", "mteb-rank"]


def harbor_job(root, job_name: str, dataset: str, version: str, agent: str, tasks: list[str]):
    """A Harbor job folder: its config.json names the dataset and version it ran (as `harbor run -d
    name@version` writes it), each trial's result.json names the dataset as its `source`."""
    job = root / job_name
    job.mkdir(parents=True)
    config = {
        "job_name": job_name,
        "datasets": [{"name": dataset, "version": version}],
        "agents": [{"name": agent, "model_name": "m"}],
    }
    (job / "config.json").write_bytes(orjson.dumps(config))
    rewards = {}
    for i, task in enumerate(tasks):
        trial = write_trial(job, f"{task}__{job_name[:4]}{i:03d}")
        result = orjson.loads((trial / "result.json").read_bytes())
        rewards[task] = float(i % 2)
        result |= {
            "source": dataset,
            "agent_info": {"name": agent, "version": "1", "model_info": {"name": "m"}},
            "verifier_result": {"rewards": {"reward": rewards[task]}},
        }
        (trial / "result.json").write_bytes(orjson.dumps(result))
    import_path(job)
    return Job.objects.get(name=job_name)


@pytest.fixture
def two_versions(db, tmp_path):
    base = harbor_job(tmp_path, "tb-v3-job", "terminal-bench", "3.0.0", "agent-a", V3_TASKS)
    cand = harbor_job(tmp_path, "tb-v4-job", "terminal-bench", "4.0.0", "agent-b", V4_TASKS)
    return base, cand


def test_the_harbor_job_config_gives_each_trial_its_dataset_version(two_versions):
    base, cand = two_versions
    assert set(Trial.objects.filter(job=base).values_list("dataset__name", "dataset__version")) == {
        ("terminal-bench", "3.0.0")
    }
    assert set(Trial.objects.filter(job=cand).values_list("dataset__version", flat=True)) == {"4.0.0"}


def test_two_versions_pair_the_tasks_both_hold_and_say_it_is_not_like_for_like(client_logged_in, two_versions):
    base, cand = two_versions
    both = set(V3_TASKS) & set(V4_TASKS)
    only_base, only_cand = set(V3_TASKS) - set(V4_TASKS), set(V4_TASKS) - set(V3_TASKS)
    assert both and only_base and only_cand  # the known answer, from the task lists the jobs were written with
    query = f"baseline_job={base.pk}&candidate_job={cand.pk}"
    body = client_logged_in.get(f"/api/comparisons/?{query}").json()
    c = body["comparison"]
    assert c["pairedTasks"] == len(both)
    assert body["tasksOnOneSide"] == {"baseline": sorted(only_base), "candidate": sorted(only_cand)}
    reason = (
        f"not like-for-like: terminal-bench 3.0.0 vs 4.0.0; {len(both)} tasks paired, "
        f"{len(only_base)} of the baseline's and {len(only_cand)} of the candidate's left out"
    )
    assert c["invalidReasons"] == [reason]
    assert c["valid"] is False and c["unpairedAcrossDatasets"] == []
    # never a like-for-like claim: the decision holds on it, whatever the scores
    assert c["decision"] == "hold"
    assert f"comparison is not valid: {reason}" in c["missingConditions"]
    paired = {r["task"] for r in body["tasks"] if r["baseline"] is not None and r["candidate"] is not None}
    assert paired == both
    page = client_logged_in.get(f"/comparisons/?{query}").content.decode()
    assert escape(reason) in page
    assert '<span id="pass-threshold">a trial passes at reward ≥ 1.0, ' in page  # (the pass rate's threshold, stated)


def test_the_grid_pairs_two_versions_on_the_task_name(client_logged_in, two_versions):
    base, cand = two_versions
    body = client_logged_in.get(f"/api/comparisons/grid/?side_jobs={base.pk},{cand.pk}&reference={base.pk}").json()
    side = body["sides"][1]
    assert side["paired_tasks"] == len(set(V3_TASKS) & set(V4_TASKS))
    assert side["invalid_reasons"][0].startswith("not like-for-like: terminal-bench 3.0.0 vs 4.0.0")
    assert sorted(t["task"] for t in body["tasks"]) == sorted(set(V3_TASKS) | set(V4_TASKS))


def test_two_dataset_names_with_the_same_task_names_pair_nothing_and_say_so(client_logged_in, db, tmp_path):
    base = harbor_job(tmp_path, "tb-job", "terminal-bench", "3.0.0", "agent-a", V3_TASKS)
    cand = harbor_job(tmp_path, "other-job", "other-bench", "3.0.0", "agent-b", V3_TASKS)
    query = f"baseline_job={base.pk}&candidate_job={cand.pk}"
    c = client_logged_in.get(f"/api/comparisons/?{query}").json()["comparison"]
    assert c["pairedTasks"] == 0
    assert {u["task"] for u in c["unpairedAcrossDatasets"]} == set(V3_TASKS)
    assert c["invalidReasons"][0] == ("dataset differs: baseline terminal-bench@3.0.0, candidate other-bench@3.0.0")
    assert not any(r.startswith("not like-for-like") for r in c["invalidReasons"])
    page = client_logged_in.get(f"/comparisons/?{query}").content.decode()
    assert f"{len(V3_TASKS)} tasks could not be paired: their datasets differ." in page


def test_one_task_in_two_versions_aligns_side_by_side_with_a_note(client_logged_in, two_versions):
    base, cand = two_versions
    left = Trial.objects.get(job=base, task__name="fix-git")
    right = Trial.objects.get(job=cand, task__name="fix-git")
    assert f"/trials/{left.pk}/side-by-side/{right.pk}/" in client_logged_in.get(f"/trials/{left.pk}/").content.decode()
    assert client_logged_in.get(f"/api/trials/{left.pk}/align/{right.pk}/").status_code == 200
    page = client_logged_in.get(f"/trials/{left.pk}/side-by-side/{right.pk}/").content.decode()
    assert 'id="not-like-for-like"' in page
    assert "not like-for-like: terminal-bench 3.0.0 vs 4.0.0" in page


def test_one_task_name_in_two_dataset_names_never_aligns(client_logged_in, db, tmp_path):
    base = harbor_job(tmp_path, "tb-job", "terminal-bench", "3.0.0", "agent-a", V3_TASKS)
    cand = harbor_job(tmp_path, "other-job", "other-bench", "3.0.0", "agent-b", V3_TASKS)
    left = Trial.objects.get(job=base, task__name="fix-git")
    right = Trial.objects.get(job=cand, task__name="fix-git")
    assert f"/side-by-side/{right.pk}/" not in client_logged_in.get(f"/trials/{left.pk}/").content.decode()
    response = client_logged_in.get(f"/api/trials/{left.pk}/align/{right.pk}/")
    assert response.status_code == 400 and "not of the same task" in response.json()["trials"][0]
