"""The trial and job lists: filters, sorts, and the previous / next trial of a list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.db.models import Avg, Count, F, FloatField, OrderBy, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.http import QueryDict

from core.ids import parse_pk
from trials.filters import TrialFilter, role_q
from trials.ingest.records import PASS_REWARD
from trials.models import Configuration, Dataset, Job, Trial
from trials.models.qc import FailureCluster
from trials.models.trial import PASSES, failures_q

TRIAL_SORTS: dict[str, tuple[str | OrderBy, ...]] = {
    "newest": ("-pk",),
    "oldest": ("pk",),
    "name": ("name", "pk"),
    "-name": ("-name", "-pk"),
    "job": ("job__name", "pk"),
    "-job": ("-job__name", "-pk"),
    "task": ("task__name", "attempt", "pk"),
    "-task": ("-task__name", "attempt", "pk"),
    "configuration": ("configuration__key", "pk"),
    "-configuration": ("-configuration__key", "-pk"),
    "status": ("status", "pk"),
    "-status": ("-status", "-pk"),
    "reward": (F("reward").asc(nulls_first=True), "pk"),
    "-reward": (F("reward").desc(nulls_last=True), "pk"),
    "duration": (F("duration_sec").asc(nulls_first=True), "pk"),
    "-duration": (F("duration_sec").desc(nulls_last=True), "pk"),
    "cost": (F("cost_usd").asc(nulls_first=True), "pk"),
    "-cost": (F("cost_usd").desc(nulls_last=True), "pk"),
    "failure": ("failure_category", "pk"),
    "-failure": ("-failure_category", "-pk"),
}


SORT_LABELS = {key: f"{key.lstrip('-')} {'↓' if key[0] == '-' else '↑'}" for key in TRIAL_SORTS}
SORT_LABELS |= {"newest": "newest first", "oldest": "oldest first"}


def trial_list(params: QueryDict) -> tuple[TrialFilter, QuerySet[Trial]]:
    """The filtered and sorted trial list for a query string (page, tab, q… are ignored)."""
    filterset = TrialFilter(params, queryset=Trial.objects.for_list())
    filterset.form.label_suffix = ""  # "Job", not "Job:": the form reads as the other pages' filters
    qs = filterset.qs
    if params.get("untriaged"):
        qs = qs.untriaged()
    if params.get("uncategorised"):
        qs = qs.filter(failure_category="")
    name_filters_by_id(filterset)
    return filterset, qs.order_by(*TRIAL_SORTS.get(params.get("sort", ""), TRIAL_SORTS["newest"]))


# The filters that take an id (a link's `?configuration=20`): the form names what the id is.
NAMED_BY_ID = {
    "job": (Job, lambda job: job.name),
    "dataset": (Dataset, lambda d: f"{d.name}@{d.version}" if d.version else d.name),
    "configuration": (Configuration, lambda c: c.key),
}


def name_filters_by_id(filterset: TrialFilter) -> None:
    """Each of the form's id fields holding an id shows the name of what it is ("Configuration: 20" reads
    as nothing): a choice of that one name, whose value stays the id; an unknown id says so."""
    for field, (model, name) in NAMED_BY_ID.items():
        pk = parse_pk(filterset.data.get(field) or "")
        if pk is None:
            continue
        found = model._default_manager.filter(pk=pk).first()
        if found is None:
            # (the bound field, made when the form was cleaned, holds its own copy of the help text)
            filterset.form[field].help_text = f"no {field} #{pk}"
            continue
        # (the bound field reads its widget from the form's own copy of the field)
        filterset.form.fields[field].widget = forms.Select(choices=[("", "any"), (str(pk), name(found))])


LIST_KEYS = set(TrialFilter.base_filters) | {"sort", "untriaged", "uncategorised"}


def list_query(params: QueryDict) -> str:
    """The part of a trial-list URL that defines the list (not its page): carried to trials."""
    kept = QueryDict(mutable=True)
    for key in sorted(params):
        if key in LIST_KEYS:
            kept.setlist(key, [v for v in params.getlist(key) if v != ""])
    return kept.urlencode()


@dataclass
class Neighbours:
    position: int  # 1-based; 0 when the trial is not in the list
    total: int
    prev_pk: int | None = None
    next_pk: int | None = None


def neighbours(trial: Trial, query: str) -> Neighbours:
    """Where the trial sits in the list it was opened from, and its previous / next trial."""
    _, qs = trial_list(QueryDict(query))
    ids = list(qs.values_list("pk", flat=True))
    if trial.pk not in ids:
        return Neighbours(0, len(ids))
    i = ids.index(trial.pk)
    return Neighbours(
        position=i + 1,
        total=len(ids),
        prev_pk=ids[i - 1] if i > 0 else None,
        next_pk=ids[i + 1] if i + 1 < len(ids) else None,
    )


TASK_SORTS = {
    "task": ("task_name",),
    "reward": (F("mean_reward").asc(nulls_first=True), "task_name"),
    "-reward": (F("mean_reward").desc(nulls_last=True), "task_name"),
    "passed": ("n_passed", "task_name"),
    "-passed": ("-n_passed", "task_name"),
    "duration": (F("mean_duration").asc(nulls_first=True), "task_name"),
    "-duration": (F("mean_duration").desc(nulls_last=True), "task_name"),
    "cost": (F("cost").asc(nulls_first=True), "task_name"),
    "-cost": (F("cost").desc(nulls_last=True), "task_name"),
    "-failed": ("-n_failed", "task_name"),
}


TASK_SORT_LABELS = {
    "task": "task name",
    "reward": "mean reward ↑",
    "-reward": "mean reward ↓",
    "passed": "passed ↑",
    "-passed": "passed ↓",
    "duration": "mean duration ↑",
    "-duration": "mean duration ↓",
    "cost": "cost ↑",
    "-cost": "cost ↓",
    "-failed": "failed ↓",
}


def job_task_rows(job: Job, params: QueryDict) -> QuerySet:
    """One row per task of the job: mean reward, passes, duration, tokens, cost."""
    qs = job.trials.all()
    if params.get("q"):
        qs = qs.filter(task__name__icontains=params["q"])
    if role := str(params.get("role", "")):
        qs = qs.filter(role_q(role))
    rows = (
        qs.annotate(task_name=Coalesce("task__name", Value("(no task)")))
        .values("task_name", "task_id")
        .annotate(
            n=Count("pk"),
            n_passed=Count("pk", filter=PASSES),  # (the job's totals' rule: trials.models.trial)
            n_failed=Count("pk", filter=failures_q()),
            mean_reward=Avg("reward"),
            mean_duration=Avg("duration_sec"),
            # None, shown "–", for a task none of whose trials counted tokens: not a measured 0
            tokens=Sum(
                Coalesce("input_tokens", 0) + Coalesce("output_tokens", 0),
                filter=Q(input_tokens__isnull=False) | Q(output_tokens__isnull=False),
            ),
            cost=Sum("cost_usd", output_field=FloatField()),
            n_zero_output=Count("pk", filter=Q(output_tokens=0)),  # (a usage that may be missing: said beside)
        )
    )
    if params.get("failing"):
        rows = rows.filter(n_failed__gt=0)
    return rows.order_by(*TASK_SORTS.get(params.get("sort", ""), TASK_SORTS["task"]))


def exception_types_by_task(job: Job, task_ids: list[int | None]) -> dict[int | None, list[str]]:
    pairs = (
        job.trials.filter(task_id__in=[t for t in task_ids if t is not None])
        .exclude(exception_type="")
        .values_list("task_id", "exception_type")
        .distinct()
    )
    out: dict[int | None, list[str]] = {}
    for task_id, exc in pairs:
        out.setdefault(task_id, []).append(exc)
    return out


def agents_by_job(job_ids: list[int]) -> dict[int, list[dict[str, str]]]:
    """Each job's configurations with their agent and model, one query for a page of jobs."""
    rows = (
        Trial.objects.filter(job_id__in=job_ids, configuration__isnull=False)
        .values("job_id", "configuration__key", "configuration__agent_name", "configuration__model_name")
        .distinct()
        .order_by("job_id", "configuration__key")
    )
    found: dict[int, list[dict[str, str]]] = {}
    for row in rows:
        found.setdefault(row["job_id"], []).append(
            {
                "configuration": row["configuration__key"],
                "agent": row["configuration__agent_name"],
                "model": row["configuration__model_name"],
            }
        )
    return found


def figure_filter(chosen: dict[str, Any]) -> str:
    """The hidden filters a figure's link set (a job page's counts, a comparison's), in words: "" for none."""
    unscored, passes = chosen.get("unscored"), chosen.get("passes")
    words = [
        "without a reward (unscored)" if unscored is True else "with a reward (scored)" if unscored is False else "",
        f"that passed (reward ≥ {PASS_REWARD}, however the run ended)" if passes is True else "",
        "that did not pass" if passes is False else "",
        f"whose failure class is {chosen['failure_class']}" if chosen.get("failure_class") else "",
        f"in a failure cluster of class {_class_label(chosen['cluster_class'])}" if chosen.get("cluster_class") else "",
        "whose agent timed out" if chosen.get("timed_out") is True else "",
        "with a side effect after a denied permission" if chosen.get("denied_side_effect") else "",
    ]
    return " and ".join(w for w in words if w)


def _class_label(value: str) -> str:
    return str(dict(FailureCluster.Class.choices).get(value, value)).lower()
