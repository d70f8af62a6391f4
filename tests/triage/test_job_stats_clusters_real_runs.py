"""Clusters of the SkillsBench Harbor job's trials that only its result.json stats name (issue 39, Must 2).

Of its 425 trials the job publishes two folders; the rest are known by name, reward and exception
type alone. Those with a reward of 0 and no exception hold no error text, tests, tool or ending: only
their task. They are not one catch-all bin: one cluster a task, titled by it. Known answers are read
from the job's own result.json."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime

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


def own_starts() -> dict[str, datetime]:
    """{trial name: its start} of the trials whose own result.json the job publishes."""
    return {
        folder.name: datetime.fromisoformat(json.loads((folder / "result.json").read_text())["started_at"])
        for folder in JOB.iterdir()
        if (folder / "result.json").is_file()
    }


@pytest.mark.django_db
def test_a_clusters_first_seen_is_its_trials_own_start_never_the_import_time(client_logged_in):
    """A trial the stats alone name says nothing of when it ran: a cluster of such trials was first seen
    at no known time (blank), not at the import's; one holding a trial with its own file starts there."""
    import_path(JOB)
    starts = own_starts()
    assert len(starts) == 2
    names = dict(Trial.objects.values_list("pk", "name"))
    clusters = every_page(client_logged_in, "/api/qc/clusters/?page_size=100")
    known = 0
    for cluster in clusters:
        own = sorted(starts[names[pk]] for pk in cluster["trials"] if names[pk] in starts)
        wanted = (own[0], own[-1]) if own else (None, None)
        shown = tuple(datetime.fromisoformat(cluster[k]) if cluster[k] else None for k in ("first_seen", "last_seen"))
        assert shown == wanted, (cluster["label"], cluster["first_seen"], own)
        page = client_logged_in.get(f"/qc/clusters/{cluster['id']}/").content.decode()
        if own:
            known += 1
            assert f'<dd id="first-seen"><time datetime="{own[0].isoformat()}">' in page
        else:
            assert "none of its trials says when it started" in page
    assert known == 1 and len(clusters) > 50  # (the errored run with its own folder; the passing one is in none)
