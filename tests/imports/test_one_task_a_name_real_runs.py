"""A job's trials of one task are one task, whether a trial came with its own folder (its result.json names
the task's checksum) or only in the job's stats (its name alone): issue 39, Must 1. The SkillsBench job
publishes two trial folders beside stats naming 425 trials; known answers come from its result.json."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Job, Task

JOB = REFERENCE / "public-runs-1" / "skillsbench-claude-code-minimax" / "no_skills"


def trials_by_task() -> Counter[str]:
    """{task: how many trials the job's stats name for it} (a trial's name is `<task>__<id>`)."""
    [stats] = json.loads((JOB / "result.json").read_text())["stats"]["evals"].values()
    names = {name for names in stats["reward_stats"]["reward"].values() for name in names}
    names |= {name for names in stats["exception_stats"].values() for name in names}
    return Counter(name.rsplit("__", 1)[0] for name in names)


@pytest.mark.django_db
def test_a_tasks_trials_with_and_without_their_own_folder_are_one_task_on_the_job_page(client_logged_in):
    folders = {path.name.rsplit("__", 1)[0] for path in JOB.iterdir() if path.is_dir()}
    wanted = trials_by_task()
    assert folders and folders <= set(wanted)  # (the README: two trial folders, of tasks the stats name)
    import_path(JOB)
    for task in folders:
        assert Task.objects.filter(name=task).count() == 1, task
    job = Job.objects.filter(trials__name__startswith=sorted(folders)[0]).distinct().get()
    rows, number, more = [], 1, True
    while more:  # every page of the job's "Results by task"
        page = client_logged_in.get(f"/jobs/{job.pk}/?page={number}").content.decode()
        rows += re.findall(r"&amp;task=([^&\"]+)&amp;sort=task\">(\d+)</a>", page)
        number, more = number + 1, "next →</a>" in page
    for task in folders:  # one row of the task, counting every trial of it
        assert [int(n) for name, n in rows if name == task] == [wanted[task]], task
