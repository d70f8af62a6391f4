"""No page's query count grows with the number of trials.

Each test builds N trials (bulk_create: fast, and the pages read rows the same way
whoever wrote them), counts the queries of one request, adds 3N more trials (new tasks,
jobs, imports and QC items with them) and counts again: the two counts must be equal.
N is below the page size (50), so a query per row would show as more queries at 4N.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.builders import import_path
from trials.demo import write_job
from trials.models import Configuration, Dataset, Import, Job, Task, Trial
from trials.models.qc import AuditEntry, FailureCluster, QCItem, QCScenario, TriageAssignment
from trials.triage import signatures

N = 12  # 4N = 48 rows still fit on one page, so every row is rendered both times
STATUSES = ("passed", "failed", "errored", "timeout")

pytestmark = pytest.mark.django_db


class Data:
    """Two configurations x tasks x 2 attempts, grown in batches; the ids pages link to."""

    def __init__(self, user) -> None:
        self.user = user
        self.dataset = Dataset.objects.create(name="scale/tasks", version="1.0")
        self.baseline = Configuration.objects.create(key="scale-baseline", role="baseline", agent_version="1")
        self.candidate = Configuration.objects.create(key="scale-candidate", role="candidate", agent_version="1")
        self.jobs = {
            conf.pk: Job.objects.create(key=f"job-{conf.key}", name=f"job {conf.key}", source_format="harbor")
            for conf in (self.baseline, self.candidate)
        }
        self.scenario = QCScenario.objects.create(scenario_id="QC-SCALE-1", title="scale")
        self.tasks = 0
        self.batches = 0

    @property
    def job(self) -> Job:
        return self.jobs[self.baseline.pk]

    def add(self, trials: int) -> None:
        """`trials` more trials (4 per new task), with imports, extra jobs and QC items in proportion."""
        self.batches += 1
        new_tasks = Task.objects.bulk_create(
            [
                Task(dataset=self.dataset, name=f"task-{i:04d}", checksum=f"sum-{i}")
                for i in range(self.tasks, self.tasks + trials // 4)
            ]
        )
        self.tasks += len(new_tasks)
        rows = []
        for task in new_tasks:
            for conf in (self.baseline, self.candidate):
                for attempt in (1, 2):
                    status = STATUSES[len(rows) % len(STATUSES)]
                    reward = {"passed": 1.0, "failed": 0.0, "timeout": 0.0}.get(status)
                    rows.append(
                        Trial(
                            key=f"{conf.key}:{task.name}:{attempt}",
                            source_format="harbor",
                            name=f"{task.name}__{conf.role[0]}{attempt}",
                            job=self.jobs[conf.pk],
                            dataset=self.dataset,
                            task=task,
                            configuration=conf,
                            attempt=attempt,
                            status=status,
                            reward=reward,
                            rewards={} if reward is None else {"reward": reward},
                            exception_type="AgentTimeoutError" if status == "timeout" else "",
                            failure_category="stream-stuck" if status == "errored" else "",
                            duration_sec=60.0,
                            input_tokens=1000,
                            output_tokens=100,
                            cost_usd=0.01,
                            is_complete=attempt == 1,
                        )
                    )
        trials = Trial.objects.bulk_create(rows)
        signatures.sign_trials([t.pk for t in trials])  # as an import does: failure clusters
        extra = range(len(trials) // 4)
        Job.objects.bulk_create(
            [Job(key=f"extra-{self.batches}-{i}", name="extra", source_format="harbor") for i in extra]
        )
        Import.objects.bulk_create([Import(origin="cli", source_name=f"pack-{self.batches}-{i}") for i in extra])
        self.add_qc(trials)

    def add_qc(self, trials: list[Trial]) -> None:
        """A QC item on some failed trials (failure modes, blockers, waivers); the rest assigned."""
        failed = [t for t in trials if t.status in Trial.FAILED_STATUSES]
        items = []
        for i, trial in enumerate(failed):
            if i % 3 == 0:
                items.append(QCItem(kind="failure-mode", trial=trial, category="runtime", severity="P1"))
            elif i % 3 == 1:
                items.append(
                    QCItem(kind="release-blocker", trial=trial, category="tool", severity="P0", scenario=self.scenario)
                )
        items = QCItem.objects.bulk_create(items)
        waivers = QCItem.objects.bulk_create(
            [
                QCItem(
                    kind="waiver",
                    trial=item.trial,
                    category=item.category,
                    waived_item=item,
                    approver=self.user,
                    reason="known",
                    scope="this release",
                    expires_at=timezone.now() + timedelta(days=7),
                )
                for item in items
                if item.kind == "release-blocker"
            ]
        )
        AuditEntry.objects.bulk_create(
            [AuditEntry(actor=self.user, action="filed", item=item, trial=item.trial) for item in items + waivers]
        )
        TriageAssignment.objects.bulk_create(
            [TriageAssignment(trial=t, assignee=self.user) for i, t in enumerate(failed) if i % 3 == 2]
        )


@pytest.fixture
def data(user) -> Data:
    return Data(user)


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(queries)


def assert_flat(client, data: Data, url: Callable[[Data], str], *, warm: bool = False) -> None:
    """Queries for N trials == queries for 4N. `warm` requests once first (a cache to fill)."""
    data.add(N)
    if warm:
        client.get(url(data))
    small = count_queries(client, url(data))
    data.add(3 * N)
    if warm:
        client.get(url(data))
    large = count_queries(client, url(data))
    assert large == small, f"{url(data)}: {small} queries with {N} trials, {large} with {4 * N}"


def test_home_page_query_count_does_not_grow_with_trials(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/")


def test_imports_page_query_count_does_not_grow_with_imports(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/imports/")


def test_jobs_list_query_count_does_not_grow_with_jobs_or_trials(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/jobs/")


def test_job_page_query_count_does_not_grow_with_its_tasks_and_trials(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/jobs/{d.job.pk}/")


def test_trial_list_by_dataset_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/trials/?dataset={d.dataset.name}@{d.dataset.version}")


def test_failed_trials_of_a_configuration_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/trials/?configuration={d.candidate.key}&status=failed")


def test_trial_list_by_task_and_minimum_reward_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/trials/?task=task-0001&reward_min=0.5")


def test_sorted_triage_queue_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/triage/?sort=-job")


def test_queue_api_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/api/qc/queue/?sort=assignee")


def test_cluster_list_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/qc/clusters/")


def test_cluster_api_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/api/qc/clusters/?configuration={d.candidate.pk}")


def test_cluster_page_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/qc/clusters/{FailureCluster.objects.order_by('pk').first().pk}/")


def test_trial_api_list_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/api/trials/?job={d.job.pk}")


def test_trial_api_detail_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/api/trials/{d.job.trials.order_by('pk').first().pk}/")


def test_comparison_page_query_count_does_not_grow_when_computed(client_logged_in, data):
    # Without REDIS_URL the task runs in-process: a request after new trials computes again.
    # The very first request also creates the comparison row, so it is left out of the count.
    data.add(N)
    url = f"/comparisons/?baseline={data.baseline.pk}&candidate={data.candidate.pk}"
    client_logged_in.get(url)
    data.add(N)
    small = count_queries(client_logged_in, url)
    data.add(2 * N)
    large = count_queries(client_logged_in, url)
    assert large == small, f"{small} queries with {2 * N} trials, {large} with {4 * N}"


def test_comparison_page_query_count_does_not_grow_from_the_cache(client_logged_in, data):
    url = lambda d: f"/comparisons/?baseline={d.baseline.pk}&candidate={d.candidate.pk}"  # noqa: E731
    assert_flat(client_logged_in, data, url, warm=True)


def test_p0_regressions_page_query_count_does_not_grow(client_logged_in, data):
    assert_flat(
        client_logged_in, data, lambda d: f"/comparisons/p0/?baseline={d.baseline.pk}&candidate={d.candidate.pk}"
    )


@pytest.mark.parametrize("figure", ["unscored=true", "denied_side_effect=true", "status=errored"])
def test_trial_list_a_comparison_figure_opens_query_count_does_not_grow(client_logged_in, data, figure):
    assert_flat(client_logged_in, data, lambda d: f"/trials/?configuration={d.candidate.pk}&{figure}")


def test_saved_comparisons_list_query_count_does_not_grow_with_saves(client_logged_in, data):
    data.add(N)
    url = f"/api/comparisons/save/?baseline={data.baseline.pk}&candidate={data.candidate.pk}"
    counts = []
    for saves in (N, 3 * N):
        for _ in range(saves):
            assert client_logged_in.post(url).status_code == 201
        counts.append(
            (
                count_queries(client_logged_in, "/comparisons/saved/"),
                count_queries(client_logged_in, "/api/comparisons/saved/"),
            )
        )
    assert counts[0] == counts[1], f"page and API queries with {N} saves, then {4 * N}: {counts}"


def test_grid_page_query_count_does_not_grow_computed_or_stored(client_logged_in, data):
    # Computed (new trials since the last request), after a first request that creates its row.
    url = f"/comparisons/grid/?sides={data.baseline.pk},{data.candidate.pk}"
    data.add(N)
    client_logged_in.get(url)
    data.add(N)
    small = count_queries(client_logged_in, url)
    data.add(2 * N)
    large = count_queries(client_logged_in, url)
    assert large == small, f"{small} queries with {2 * N} trials, {large} with {4 * N}"
    assert count_queries(client_logged_in, url) < small  # stored: no trial read


def test_grid_page_query_count_does_not_grow_from_the_stored_grid(client_logged_in, data):
    url = lambda d: f"/comparisons/grid/?sides={d.baseline.pk},{d.candidate.pk}"  # noqa: E731
    assert_flat(client_logged_in, data, url, warm=True)


def test_trend_page_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: f"/comparisons/trend/?dataset={d.dataset.pk}", warm=True)


def test_triage_queue_query_count_does_not_grow(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/triage/")


def test_qc_home_query_count_does_not_grow_with_qc_items(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/qc/")


def test_blocker_board_query_count_does_not_grow_with_blockers(client_logged_in, data):
    assert_flat(client_logged_in, data, lambda d: "/qc/blockers/")


@pytest.fixture
def imported_trial(tmp_path: Path) -> Trial:
    """One trial imported whole (trajectory, context, permissions, events), for the trial page."""
    job = write_job(tmp_path / "packs", "one-trial", role="baseline", configuration_id="one", agent="terminus-2",
                    model="openai/gpt-5.4", tasks=1, attempts=1, steps_per_trial=8)  # fmt: skip
    assert import_path(job).status == "done"
    return Trial.objects.get()


def test_trial_page_query_count_does_not_grow_with_other_trials(client_logged_in, data, imported_trial):
    assert_flat(client_logged_in, data, lambda d: f"/trials/{imported_trial.pk}/")


def test_trial_page_opened_from_a_list_query_count_does_not_grow(client_logged_in, data, imported_trial):
    # The previous / next links read the list the trial was opened from.
    assert_flat(client_logged_in, data, lambda d: f"/trials/{imported_trial.pk}/?list=status%3Dpassed")


@pytest.mark.parametrize(
    "url",
    ["/", "/jobs/", "/trials/?status=failed", "/comparisons/?baseline={baseline}&candidate={candidate}"],
)
def test_list_pages_do_not_load_each_jobs_result_json(client_logged_in, data, url):
    # A Harbor job's result.json names every trial (0.5 MB at 5,000 trials): a page that
    # loads it per row grows with the job's size even at a constant query count.
    data.add(N)
    with CaptureQueriesContext(connection) as queries:
        response = client_logged_in.get(url.format(baseline=data.baseline.pk, candidate=data.candidate.pk))
    assert response.status_code == 200
    assert not [q["sql"] for q in queries if '"trials_job"."result"' in q["sql"]]
