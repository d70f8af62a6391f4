"""Reading failure clusters: the classes and the list (one GROUP BY over Trial.cluster), one
cluster's breakdown by job and configuration and its facets (task, failing test), its
representative trial and failing step, and a passing attempt to set a failure beside. Signatures are written
by trials.triage.signatures (titled by cluster_titles); filing a cluster is trials.triage.services.file_cluster.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, Count, Max, Min, Q, QuerySet, Value, When
from django.http import QueryDict

from trials.filters import TrialFilter
from trials.models import Configuration, Step, Task, ToolCall, Trial
from trials.models.qc import FailureCluster
from trials.models.taxonomy import Category
from trials.triage import cluster_titles, prefill

TRIAL_IDS_LISTED = 1000  # per cluster in the API list: `count` says how many there are in all
FILTER_KEYS = ("job", "configuration", "dataset", "task", "role")


def clustered_trials(params: QueryDict | dict[str, Any] | None = None) -> QuerySet[Trial]:
    """Trials in a cluster, filtered like the trial list (job, configuration, dataset, task, role) and
    by their cluster's class (`class`)."""
    data = QueryDict(mutable=True)
    for key in FILTER_KEYS:
        if value := (params or {}).get(key):
            data[key] = value
    trials = Trial.objects.filter(cluster__isnull=False)
    if failure_class := (params or {}).get("class"):
        trials = trials.filter(cluster__failure_class=failure_class)
    return TrialFilter(data, queryset=trials).qs


def class_rows(params: QueryDict | dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The level a person opens first: per class, its clusters and trials (one GROUP BY)."""
    unfiltered = {k: v for k, v in (params or {}).items() if k != "class"}
    counts = {
        row["cluster__failure_class"]: row
        for row in clustered_trials(unfiltered)
        .order_by()
        .values("cluster__failure_class")
        .annotate(trials=Count("pk"), clusters=Count("cluster_id", distinct=True))
    }
    return [
        {
            "value": value,
            "label": label,
            "trials": counts.get(value, {}).get("trials", 0),
            "clusters": counts.get(value, {}).get("clusters", 0),
        }
        for value, label in FailureCluster.Class.choices
    ]


def facets(
    cluster: FailureCluster, params: QueryDict | dict[str, Any] | None = None
) -> dict[str, list[tuple[str, int, dict[str, Any] | None]]]:
    """Its trials per task (its dataset and name: Inspect's sample 56 of two logs are two tasks) and per
    first failing verifier test: inside a cluster, not part of it. A task's dataset is named (`label`)
    when the cluster's tasks come from more than one."""
    trials = clustered_trials(params).filter(cluster=cluster).order_by()
    dataset = ("task__dataset_id", "task__dataset__name", "task__dataset__version")
    tasks = (
        trials.values_list("task__name", *dataset)
        .annotate(n=Count("pk"))
        .order_by("-n", "task__name", "task__dataset_id")[:FACETS_SHOWN]
    )
    several = len({row[1] for row in tasks}) > 1
    tests = trials.values_list("failing_test").annotate(n=Count("pk")).order_by("-n", "failing_test")[:FACETS_SHOWN]
    return {
        "task": [
            (name or "", n, {"id": pk, "label": (f"{ds}@{v}" if v else ds) if several else ""} if pk else None)
            for name, pk, ds, v, n in tasks
        ],
        "test": [(t or "", n, None) for t, n in tests],
    }


FACETS_SHOWN = 20
# The category a cluster's form offers when its cause names none (a plain wrong answer): by its class.
CLASS_CATEGORY: dict[str, str] = {
    FailureCluster.Class.INFRASTRUCTURE: Category.ENVIRONMENT,
    FailureCluster.Class.TASK_QUALITY: Category.VERIFIER,
    FailureCluster.Class.CAPABILITY: Category.MODEL,
    FailureCluster.Class.SAFETY: Category.RUNTIME,
    FailureCluster.Class.FLAGGED_PASS: Category.RUNTIME,  # (how the run ended, not its answer)
}


def form_category(cluster: FailureCluster, representative: Trial) -> str:
    """The category the form offers: its cause's, else its representative's guess, else its class's."""
    return (
        cluster.signature.get("category")
        or prefill.prefill(representative).category
        or CLASS_CATEGORY.get(cluster.failure_class, Category.RUNTIME)
    )


def passing_attempt(trial: Trial) -> Trial | None:
    """A passing attempt of the same task (its dataset and name) to set this failure beside: of its
    configuration first, else of the reference (baseline) one, else of any other configuration (Terminal-Bench
    and Inspect configurations have no role). An unflagged pass before a flagged one (a pass that timed out
    with a reward still passed; the side-by-side page labels its flags)."""
    passing = Trial.objects.of_task(trial.task).passes().exclude(pk=trial.pk)
    same = Q(configuration_id=trial.configuration_id) if trial.configuration_id is not None else Q(pk__in=[])
    reference = Q(configuration__role=Configuration.Role.BASELINE)
    return (
        passing.annotate(
            nearness=Case(When(same, then=Value(0)), When(reference, then=Value(1)), default=Value(2)),
        )
        .order_by("nearness", "is_flagged", "-pk")
        .first()
    )


def with_passing_attempt(trials: list[Trial]) -> set[int]:
    """Which of these failures `passing_attempt` finds one for, in one query (the pages hide the link for the
    rest, and for a trial that passed itself)."""
    tasks = [t.task for t in trials if t.task is not None]
    if not tasks:
        return set()
    passes: dict[tuple[int | None, str], set[int]] = defaultdict(set)
    found = Trial.objects.passes().filter(task__in=Task.objects.same_as(*tasks))
    for pk, dataset_id, name in found.values_list("pk", "task__dataset_id", "task__name"):
        passes[(dataset_id, name)].add(pk)
    passed = set().union(*passes.values())  # (a flagged pass is in a cluster, yet has nothing to be set beside)
    return {t.pk for t in trials if t.task is not None and t.pk not in passed and passes[t.task.identity] - {t.pk}}


def cluster_rows(params: QueryDict | dict[str, Any] | None = None) -> QuerySet:
    """One row per cluster with trials under the filters: its count, when it was first and last
    seen (its trials' own start times: None when none says, never the import's time passed off as the
    run's), and how many of its trials are candidate's and baseline's; the biggest first."""
    role = "configuration__role"
    return (
        clustered_trials(params)
        .order_by()
        .values("cluster_id")
        .annotate(
            count=Count("pk"),
            first_seen=Min("started_at"),
            last_seen=Max("started_at"),
            candidates=Count("pk", filter=Q(**{role: Configuration.Role.CANDIDATE})),
            baselines=Count("pk", filter=Q(**{role: Configuration.Role.BASELINE})),
        )
        .order_by("-count", "cluster_id")
    )


@dataclass
class ClusterRow:
    cluster: FailureCluster
    count: int
    first_seen: Any
    last_seen: Any
    candidates: int
    baselines: int
    trial_ids: list[int] = field(default_factory=list)
    by_configuration: dict[str, int] = field(default_factory=dict)
    by_job: dict[str, int] = field(default_factory=dict)

    @property
    def pk(self) -> int:
        return self.cluster.pk

    @property
    def signature(self) -> dict[str, Any]:
        return self.cluster.signature

    @property
    def description(self) -> str:
        return cluster_titles.describe(self.cluster.signature)

    @property
    def title(self) -> str:
        """What sets the cluster apart, beside its class badge on the list."""
        return cluster_titles.cause_words(self.cluster.signature)

    @property
    def new_in_candidate(self) -> bool:
        """Candidate trials hit it and no baseline trial did."""
        return self.candidates > 0 and self.baselines == 0

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "label": self.cluster.label,
            "class": self.cluster.failure_class,
            "signature": self.signature,
            "description": self.description,
            "title": self.title,
            "count": self.count,
            "trials": self.trial_ids,
            "by_configuration": self.by_configuration,
            "by_job": self.by_job,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "new_in_candidate": self.new_in_candidate,
        }


def with_details(rows: list[dict[str, Any]], params: QueryDict | dict[str, Any] | None = None) -> list[ClusterRow]:
    """A page of `cluster_rows` with each cluster's signature, trial ids and counts per
    configuration and job: three queries for the page, whatever its size."""
    ids = [row["cluster_id"] for row in rows]
    clusters = FailureCluster.objects.in_bulk(ids)
    trial_ids: dict[int, list[int]] = defaultdict(list)
    by_configuration: dict[int, Counter[str]] = defaultdict(Counter)
    by_job: dict[int, Counter[str]] = defaultdict(Counter)
    trials = clustered_trials(params).filter(cluster_id__in=ids)
    for cluster_id, pk in trials.order_by("cluster_id", "pk").values_list("cluster_id", "pk"):
        if len(trial_ids[cluster_id]) < TRIAL_IDS_LISTED:
            trial_ids[cluster_id].append(pk)
    groups = trials.order_by().values("cluster_id", "configuration__key", "job__name").annotate(n=Count("pk"))
    for group in groups:
        by_configuration[group["cluster_id"]][group["configuration__key"] or "(none)"] += group["n"]
        by_job[group["cluster_id"]][group["job__name"] or "(none)"] += group["n"]
    return [
        ClusterRow(
            cluster=clusters[row["cluster_id"]],
            count=row["count"],
            first_seen=row["first_seen"],
            last_seen=row["last_seen"],
            candidates=row["candidates"],
            baselines=row["baselines"],
            trial_ids=trial_ids[row["cluster_id"]],
            by_configuration=dict(by_configuration[row["cluster_id"]].most_common()),
            by_job=dict(by_job[row["cluster_id"]].most_common()),
        )
        for row in rows
        if row["cluster_id"] in clusters
    ]


def cluster_row(cluster: FailureCluster, params: QueryDict | dict[str, Any] | None = None) -> ClusterRow:
    rows = list(cluster_rows(params).filter(cluster_id=cluster.pk))
    if not rows:  # no trial of it under these filters
        return ClusterRow(cluster=cluster, count=0, first_seen=None, last_seen=None, candidates=0, baselines=0)
    return with_details(rows, params)[0]


def breakdown(cluster: FailureCluster, params: QueryDict | dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Its trials per job and configuration, the biggest group first."""
    return list(
        clustered_trials(params)
        .filter(cluster=cluster)
        .order_by()
        .values("job_id", "job__name", "configuration_id", "configuration__key", "configuration__role")
        .annotate(n=Count("pk"))
        .order_by("-n", "job__name", "configuration__key")
    )


@dataclass
class Representative:
    trial: Trial
    step_number: int | None  # 1-based, in its first trajectory: the trial page's step permalink
    step_id: str


def representative(cluster: FailureCluster) -> Representative | None:
    """Its first trial, and the step that called the failing tool first (else its last step)."""
    trial = Trial.objects.for_list().filter(cluster=cluster).order_by("pk").first()
    if trial is None:
        return None
    tool = cluster.signature.get("tool") or ""
    steps = Step.objects.filter(trial=trial, trajectory__position=trial_first_position(trial))
    step = None
    if tool:
        call = (
            ToolCall.objects.filter(step__in=steps, function_name=tool)
            .order_by("step__index")
            .values_list("step__index", "step__step_id")
            .first()
        )
        step = call
    if step is None:
        step = steps.order_by("-index").values_list("index", "step_id").first()
    if step is None:
        return Representative(trial, None, "")
    return Representative(trial, step[0] + 1, step[1])


def trial_first_position(trial: Trial) -> int:
    return trial.trajectories.order_by("position").values_list("position", flat=True).first() or 0
