"""Reads several pages share: the triage queue (filtered, sorted), progress, P0 items and the QC fingerprint
of a set of trials (the comparisons use them), blockers, waivers, scenarios and failure modes.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.db.models import Case, Count, F, IntegerField, Max, Prefetch, Q, QuerySet, Value, When
from django.http import QueryDict
from django.utils import timezone

from core.ids import parse_pk
from trials.filters import TrialFilter
from trials.models import Trial
from trials.models.qc import QCItem, QCScenario, Severity, TriageAssignment, TriageTag
from trials.triage import signatures

EXPIRING_SOON = timedelta(days=14)


def p0_qc_items_for_trials(trial_ids) -> int:
    """Open P0 QC facts filed against these trials that no active waiver covers.

    Counts every kind but waivers (failure modes, replay fixtures, verifier criteria,
    release blockers), status open. A waiver covers its item only until it expires, so an
    expired waiver counts for nothing. This is the comparison's p0QcGateRegressionCount.
    """
    return open_p0_items(trial_ids).count()


def open_p0_items(trial_ids) -> QuerySet[QCItem]:
    """The items p0_qc_items_for_trials counts (the comparison's P0 figure lists them)."""
    return QCItem.objects.filter(trial_id__in=trial_ids, severity=Severity.P0).unwaived()


def qc_fingerprint_for_trials(trial_ids) -> list[Any]:
    """Changes whenever a QC item of these trials is filed, edited, waived or a waiver lapses."""
    items = QCItem.objects.filter(Q(trial_id__in=trial_ids) | Q(waived_item__trial_id__in=trial_ids))
    agg = items.aggregate(n=Count("pk"), last=Max("updated_at"))
    return [agg["n"], agg["last"].isoformat() if agg["last"] else None, p0_qc_items_for_trials(trial_ids)]


QUEUE_SORTS: dict[str, str] = {
    "trial": "pk",
    "name": "name",
    "task": "task__name",
    "job": "job__name",
    "configuration": "configuration__key",
    "category": "failure_category",
    "cluster": "cluster_id",
    "status": "status",
    "reward": "reward",
    "assignee": "triage_assignment__assignee__username",
}
QUEUE_FILTERS = ("cluster", "category", "job", "configuration", "task", "assignee", "flag", "tag")
UNASSIGNED = "none"


def queue(params: QueryDict | dict[str, Any], user=None) -> QuerySet[Trial]:
    """Untriaged failures (failed, unscored, or flagged whatever their reward), filtered and sorted.

    Filters: cluster (its id), category (the trial's or its cluster's), job, configuration,
    task (as on the trial list), assignee (a user name, "me", or "none"), flag (one of
    signatures.FLAG_LABELS, or "any"), tag (a triage tag's name). `sort` is a QUEUE_SORTS key, "-" first for descending.
    """
    trial_filters = QueryDict(mutable=True)
    for key in ("job", "configuration", "task"):
        if value := params.get(key):
            trial_filters[key] = value
    qs = TrialFilter(trial_filters, queryset=Trial.objects.untriaged()).qs
    if cluster := params.get("cluster"):
        qs = qs.filter(cluster_id=parse_pk(cluster) or 0)
    if category := params.get("category"):
        qs = qs.filter(Q(failure_category__iexact=category) | Q(cluster__signature__category=category.lower()))
    if assignee := params.get("assignee"):
        if assignee == UNASSIGNED:
            qs = qs.filter(triage_assignment__isnull=True)
        else:
            name = user.get_username() if assignee == "me" and user is not None else assignee
            qs = qs.filter(triage_assignment__assignee__username=name)
    if flag := params.get("flag"):
        # (a JSON list: its text holds the flag in quotes, on SQLite and PostgreSQL alike)
        qs = qs.filter(is_flagged=True) if flag == "any" else qs.filter(safety_flags__icontains=f'"{flag}"')
    if tag := params.get("tag"):
        qs = qs.filter(pk__in=TriageTag.objects.filter(name=tag.strip().lower()).values("trial_id"))
    sort = params.get("sort") or "trial"
    column = QUEUE_SORTS.get(sort.removeprefix("-"), "pk")
    ordering = F(column).desc(nulls_last=True) if sort.startswith("-") else F(column).asc(nulls_last=True)
    return (
        qs.select_related("task", "job", "configuration", "cluster", "triage_assignment__assignee")
        .prefetch_related("triage_tags")
        .order_by(ordering, "-pk")
    )


def next_untriaged(user, params: QueryDict | dict[str, Any]) -> Trial | None:
    """A triager's next trial: the first of the queue (as filtered) that nobody has claimed, them included
    (a trial they claimed is theirs already: "next" hands them a new one)."""
    rows = queue({k: v for k, v in params.items() if k != "assignee"}, user)
    return rows.filter(triage_assignment__isnull=True).first()


def queue_reasons(trial: Trial) -> list[str]:
    """Why a trial is in the queue: its failed status (with its exception) or no score, and its safety flags."""
    reasons = []
    if trial.status in Trial.FAILED_STATUSES:
        reasons.append(f"{trial.status}: {trial.exception_type}" if trial.exception_type else trial.status)
    elif trial.status == Trial.Status.UNKNOWN and trial.reward is None:
        reasons.append("unscored")
    reasons += [signatures.FLAG_LABELS.get(flag, flag) for flag in trial.safety_flags or []]
    if not reasons:
        reasons.append("added by hand")
    return reasons


def assignee_progress() -> list[dict[str, Any]]:
    """Per assignee: assigned trials that have a QC item (done) and those still without one."""
    rows = (
        TriageAssignment.objects.values("assignee__username")
        .annotate(
            total=Count("pk", distinct=True),
            done=Count("pk", filter=Q(trial__qc_items__isnull=False), distinct=True),
        )
        .order_by("assignee__username")
    )
    return [
        {
            "assignee": r["assignee__username"],
            "done": r["done"],
            "remaining": r["total"] - r["done"],
            "total": r["total"],
        }
        for r in rows
    ]


def blockers() -> QuerySet[QCItem]:
    """Release blockers: open ones first, P0 before P1…, newest first; `waived_by`: their active waivers."""
    return (
        QCItem.objects.filter(kind=QCItem.Kind.RELEASE_BLOCKER)
        .select_related("trial", "trial__task", "scenario", "assignee", "created_by")
        .prefetch_related(Prefetch("waivers", QCItem.objects.active_waivers(), to_attr="waived_by"))
        .annotate(
            open_rank=Case(
                When(status=QCItem.Status.OPEN, then=Value(0)), default=Value(1), output_field=IntegerField()
            )
        )
        .order_by("open_rank", "severity", "-created_at")
    )


def waivers() -> QuerySet[QCItem]:
    return QCItem.objects.filter(kind=QCItem.Kind.WAIVER).select_related(
        "trial", "approver", "waived_item", "created_by"
    )


def expiring_waivers(within: timedelta = EXPIRING_SOON) -> QuerySet[QCItem]:
    """Open waivers that expire soon or already have (expired ones still need a decision)."""
    return waivers().filter(status=QCItem.Status.OPEN, expires_at__lte=timezone.now() + within).order_by("expires_at")


def scenario_rows() -> QuerySet[QCScenario]:
    open_items = Q(items__status=QCItem.Status.OPEN) & ~Q(items__kind=QCItem.Kind.WAIVER)
    return QCScenario.objects.annotate(
        p0_open=Count("items", filter=open_items & Q(items__severity=Severity.P0), distinct=True),
        p1_open=Count("items", filter=open_items & Q(items__severity=Severity.P1), distinct=True),
        trials_hit=Count("items__trial", distinct=True),
        mode_count=Count("failure_modes", distinct=True),
    ).order_by("-p0_open", "-p1_open", "risk", "scenario_id")


def failure_mode_rows(scenario: QCScenario) -> list[dict[str, Any]]:
    """Each failure mode with the trials that hit it and its status (open, fixed, waived)."""
    items = list(
        scenario.items.facts()
        .select_related("trial", "failure_mode")
        .prefetch_related("waivers")
        .order_by("failure_mode_id", "-created_at")
    )
    by_mode: dict[int | None, list[QCItem]] = defaultdict(list)
    for item in items:
        by_mode[item.failure_mode_id].append(item)
    rows = []
    for mode in scenario.failure_modes.all():
        hits = by_mode.get(mode.pk, [])
        rows.append({"mode": mode, "items": hits, "status": _mode_status(hits)})
    if by_mode.get(None):
        rows.append({"mode": None, "items": by_mode[None], "status": _mode_status(by_mode[None])})
    return rows


def _is_waived(item: QCItem) -> bool:
    now = timezone.now()
    return any(w.status == QCItem.Status.OPEN and w.expires_at and w.expires_at > now for w in item.waivers.all())


def _mode_status(items: list[QCItem]) -> str:
    open_items = [i for i in items if i.status == QCItem.Status.OPEN]
    if not items:
        return "not hit"
    if not open_items:
        return "fixed"
    if all(_is_waived(i) for i in open_items):
        return "waived"
    return "open"
