"""Clusters of the SkillsBench Harbor job's trials that only its result.json stats name (issue 39, Must 2).

Of its 425 trials the job publishes two folders; the rest are known by name, reward and exception
type alone. Those with a reward of 0 and no exception hold no error text, tests, tool or ending: only
their task. They are not one catch-all bin: one cluster a task, titled by it. Known answers are read
from the job's own result.json."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.builders import REFERENCE, every_page, import_path
from trials.models import Trial

JOB = REFERENCE / "public-runs-1" / "skillsbench-claude-code-minimax" / "no_skills"


def zero_reward_trials_by_task() -> dict[str, set[str]]:
    """{task: names of its trials the stats list under reward 0.0 and under no exception}."""
    [stats] = json.loads((JOB / "result.json").read_text())["stats"]["evals"].values()
    raised = {name for names in stats["exception_stats"].values() for name in names}
    found: dict[str, set[str]] = defaultdict(set)
    for name in set(stats["reward_stats"]["reward"]["0.0"]) - raised:
        found[name.rsplit("__", 1)[0]].add(name)
    return found


@pytest.mark.django_db
def test_trials_known_only_by_task_and_a_zero_reward_are_one_cluster_a_task(client_logged_in):
    import_path(JOB)
    wanted = zero_reward_trials_by_task()
    assert sum(map(len, wanted.values())) > 250 and len(wanted) > 50  # (the old bin held 281)
    names = dict(Trial.objects.values_list("pk", "name"))
    found: dict[str, set[str]] = {}
    for cluster in every_page(client_logged_in, "/api/qc/clusters/?page_size=100"):
        mine = {names[pk] for pk in cluster["trials"]}
        if not mine & set().union(*wanted.values()):
            continue
        task = cluster["signature"]["task"]
        assert f"no error, task {task}, in tasks-no-skills" in cluster["description"], cluster["description"]
        assert task not in found
        found[task] = mine
        page = client_logged_in.get(f"/qc/clusters/{cluster['id']}/").content.decode()
        assert f"<dt>Task</dt><dd><code>{task}</code>" in page
    assert found == wanted
