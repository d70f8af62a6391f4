"""The one place triage writes. Every function that changes a row runs in one transaction
and records an AuditEntry with who, when and {field: [old, new]}.

The Lime events a filing writes are in runtime_events.py, a scenario manifest's rows in
scenario_manifests.py. What the forms offer before a write is in prefill.py; reads several
pages share (the queue, P0 counts, blockers, waivers) in queries.py, so pages, the API and
the comparisons agree.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from trials.models import Step, ToolCall, Trial, nul_free, taxonomy
from trials.models.failure_classes import FailureClass
from trials.models.qc import (
    AuditEntry,
    Comment,
    FailureCluster,
    FailureMode,
    QCItem,
    QCItemCitation,
    QCScenario,
    QueueEntry,
    Severity,
    TriageAssignment,
    TriageTag,
)
from trials.triage import signatures
from trials.triage.prefill import parse_ref, step_ref, trajectory_names_of
from trials.triage.runtime_events import write_missing_events


def _jsonable(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "pk"):
        return str(value)
    return value


def audit(actor, action: str, *, item=None, trial=None, scenario=None, changes=None) -> AuditEntry:
    return AuditEntry.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        action=action,
        item=item,
        trial=trial if trial is not None else getattr(item, "trial", None),
        scenario=scenario,
        changes={k: [_jsonable(old), _jsonable(new)] for k, (old, new) in (changes or {}).items()},
    )


def _apply(obj, values: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Set attributes and return what really changed, for the audit row."""
    changed = {}
    for field, new in values.items():
        old = getattr(obj, field)
        if old != new:
            changed[field] = (old, new)
            setattr(obj, field, new)
    return changed


@transaction.atomic
def file_item(user, trial: Trial, data: dict[str, Any]) -> QCItem:
    """Create a QC item from a valid FeedbackForm's cleaned_data (and what it implies)."""
    item = _create_item(user, trial, data)
    audit(user, "filed", item=item, changes=_filed_changes(item))
    _after_filing(user, trial, item)
    return item


@transaction.atomic
def file_cluster(user, cluster: FailureCluster, trials: list[Trial], data: dict[str, Any]) -> QCItem:
    """One QC item for a whole failure cluster: filed on its first trial (the representative, whose
    evidence the form offered), citing every trial with its own evidence refs (the trial and the step
    where its failure shows, `evidence_of`); the item's own refs are the representative's when the
    form gave none; one audit entry."""
    representative = trials[0]
    evidence = evidence_of(trials, cluster.signature.get("tool") or "")
    if not data.get("evidence_refs"):
        data = data | {"evidence_refs": [f"{r['kind']}:{r['ref']}" for r in evidence[representative.pk]]}
    if not data.get("step_id"):
        first_step = next((r["ref"] for r in evidence[representative.pk] if r["kind"] == "step"), "")
        data = data | {"step_id": first_step}
    item = _create_item(user, representative, data, cluster=cluster)
    QCItemCitation.objects.bulk_create(
        QCItemCitation(item=item, trial=trial, evidence_refs=evidence[trial.pk]) for trial in trials
    )
    changes = _filed_changes(item) | {
        "cluster": (None, cluster.label),
        "trials": (None, [t.pk for t in trials]),
    }
    audit(user, "filed for a cluster", item=item, changes=changes)
    _after_filing(user, representative, item)
    return item


def evidence_of(trials: list[Trial], tool: str) -> dict[int, list[dict[str, str]]]:
    """{trial pk: its evidence refs}: the trial, and where its failure shows: its first call of the
    failing `tool`, else its last agent step, and its verifier's first failing test (a few queries)."""
    steps = failing_step_refs(trials, tool) if tool else {}
    steps |= last_agent_step_refs([t for t in trials if t.pk not in steps])
    refs: dict[int, list[dict[str, str]]] = {}
    for trial in trials:
        refs[trial.pk] = [{"kind": "trial", "ref": trial.key}]
        if trial.pk in steps:
            refs[trial.pk].append({"kind": "step", "ref": steps[trial.pk]})
        if test := trial.failing_test or signatures.first_failing_test(trial.ctrf_tests):
            refs[trial.pk].append({"kind": "criterion", "ref": test})
    return refs


def last_agent_step_refs(trials: list[Trial]) -> dict[int, str]:
    """{trial pk: the step ref of the last agent step of its first trajectory} (two queries)."""
    if not trials:
        return {}
    rows = (
        Step.objects.filter(trial__in=trials, source="agent")
        .order_by("trial_id", "trajectory__position", "-index")
        .values_list("trial_id", "step_id", "trajectory_id")
    )
    last: dict[int, tuple[str, int]] = {}
    for trial_id, step_id, trajectory_id in rows:
        last.setdefault(trial_id, (step_id, trajectory_id))
    names = trajectory_names_of(list(last))
    return {
        trial_id: step_ref(step_id, names[trial_id].get(trajectory_id, ""))
        for trial_id, (step_id, trajectory_id) in last.items()
    }


def failing_step_refs(trials: list[Trial], tool: str) -> dict[int, str]:
    """{trial pk: the step ref of its first call of the failing `tool`} (two queries for them all)."""
    if not tool:
        return {}
    calls = (
        ToolCall.objects.filter(trial__in=trials, function_name=tool)
        .order_by("trial_id", "step__trajectory__position", "step__index")
        .values_list("trial_id", "step__step_id", "step__trajectory_id")
    )
    first: dict[int, tuple[str, int]] = {}
    for trial_id, step_id, trajectory_id in calls:
        first.setdefault(trial_id, (step_id, trajectory_id))
    names = trajectory_names_of(list(first))  # one query, not one per trial
    return {
        trial_id: step_ref(step_id, names[trial_id].get(trajectory_id, ""))
        for trial_id, (step_id, trajectory_id) in first.items()
    }


# A person's hand on the clusters: kept by trials.triage.signatures when trials are signed again.


@transaction.atomic
def merge_clusters(user, source: FailureCluster, target: FailureCluster) -> int:
    """Merge `source` into `target`: its trials move now, and any trial signed into it later lands in
    `target`. Returns how many trials moved."""
    if source.pk == target.pk or target.merged_into_id == source.pk:
        raise ValueError(f"{source.label} cannot be merged into {target.label}")
    target = FailureCluster.objects.get(pk=target.merged_into_id or target.pk)  # (kept one hop deep)
    FailureCluster.objects.filter(merged_into=source).update(merged_into=target)
    source.merged_into = target
    source.save(update_fields=["merged_into"])
    moved = Trial.objects.filter(cluster=source).update(cluster=target)
    audit(user, "clusters merged", changes={"cluster": (source.label, target.label), "trials": (None, moved)})
    return moved


@transaction.atomic
def split_cluster(user, cluster: FailureCluster, facet: str, value: str) -> FailureCluster:
    """Split the trials of `cluster` whose `facet` ("task" or "test") is `value` into a cluster of their own."""
    if facet not in ("task", "test"):
        raise ValueError(f"a cluster splits on its task or failing test, not {facet!r}")
    split_on = {facet: value[:200]}
    key = signatures.signature_key({"parent": cluster.key, "split": split_on})
    child, _ = FailureCluster.objects.get_or_create(
        key=key,
        defaults={
            "signature": cluster.signature | {"split": split_on},
            "failure_class": cluster.failure_class,
            "family": cluster.family,
            "split_from": cluster,
            "split_on": split_on,
        },
    )
    field = "task__name" if facet == "task" else "failing_test"
    moved = Trial.objects.filter(cluster=cluster, **{field: value}).update(cluster=child)
    audit(
        user,
        "cluster split",
        changes={"cluster": (cluster.label, child.label), facet: (None, value), "trials": (None, moved)},
    )
    return child


# The queue: trials a person adds, and tags put on them.


@transaction.atomic
def add_to_queue(user, trials: QuerySet[Trial]) -> int:
    """Queue these trials (a trials list filter, in one action): each once, however often it is added."""
    have = set(QueueEntry.objects.filter(trial__in=trials).values_list("trial_id", flat=True))
    new = [pk for pk in trials.values_list("pk", flat=True) if pk not in have]
    QueueEntry.objects.bulk_create([QueueEntry(trial_id=pk, added_by=user) for pk in new], ignore_conflicts=True)
    if new:
        audit(user, "added to the queue", changes={"trials": (None, len(new))})
    return len(new)


@transaction.atomic
def tag_trials(user, trials: list[Trial], name: str) -> int:
    """Put the tag `name` on these trials (from the queue); returns how many did not have it."""
    name = nul_free(name).strip().lower()[:60]
    if not name:
        raise ValueError("a tag needs a name")
    have = set(TriageTag.objects.filter(trial__in=trials, name=name).values_list("trial_id", flat=True))
    new = [t for t in trials if t.pk not in have]
    TriageTag.objects.bulk_create([TriageTag(trial=t, name=name, added_by=user) for t in new], ignore_conflicts=True)
    for trial in new:
        audit(user, "tagged", trial=trial, changes={"tag": (None, name)})
    return len(new)


def _create_item(user, trial: Trial, data: dict[str, Any], **extra: Any) -> QCItem:
    kind = data["kind"]
    scenario = data.get("scenario")
    failure_mode = data.get("failure_mode")
    if kind == QCItem.Kind.FAILURE_MODE:
        scenario, failure_mode = _scenario_and_mode(user, trial, data)
    fields: dict[str, Any] = {
        "kind": kind,
        "trial": trial,
        "step_id": data.get("step_id") or "",
        "category": data["category"],
        "code": data.get("code") or "",
        "severity": data.get("severity") or Severity.P2,
        "evidence_refs": [parse_ref(v) for v in data.get("evidence_refs") or []],
        "note": nul_free(data.get("note") or ""),
        "scenario": scenario,
        "failure_mode": failure_mode,
        "target_name": nul_free(data.get("target_name") or ""),
        "assignee": data.get("assignee"),
        "waived_item": data.get("waived_item") if kind == QCItem.Kind.WAIVER else None,
        "approver": data.get("approver") if kind == QCItem.Kind.WAIVER else None,
        "reason": nul_free(data.get("reason") or ""),
        "scope": nul_free(data.get("scope") or ""),
        "expires_at": data.get("expires_at") if kind == QCItem.Kind.WAIVER else None,
        "created_by": user,
    }
    return QCItem.objects.create(**(fields | extra))


def import_items(trial: Trial, items: list[dict[str, Any]]) -> list[QCItem]:
    """The QC items an export of the trial carried (trials/export.py `qc_items`), filed on it here by the
    import (no user), each with its audit entry. A value this instance has no choice for is left blank."""
    made: dict[str, QCItem] = {}
    for data in items:
        kind = data.get("kind")
        if kind not in QCItem.Kind.values:
            continue
        scenario = failure_mode = None
        if scenario_id := str(data.get("scenarioId") or "")[:200]:
            scenario, _ = QCScenario.objects.get_or_create(scenario_id=scenario_id, defaults={"title": scenario_id})
            if name := str(data.get("failureMode") or "")[:300]:
                failure_mode, _ = FailureMode.objects.get_or_create(scenario=scenario, name=name)
        item = QCItem.objects.create(
            kind=kind,
            trial=trial,
            step_id=str(data.get("stepId") or "")[:300],
            category=_choice(data.get("category"), taxonomy.Category.values, taxonomy.Category.values[0]),
            code=_choice(data.get("code"), [code for code, _ in taxonomy.CODE_CHOICES], ""),
            severity=_choice(data.get("severity"), Severity.values, Severity.P2),
            status=_choice(data.get("status"), QCItem.Status.values, QCItem.Status.OPEN),
            evidence_refs=[r for r in data.get("evidenceRefs") or [] if isinstance(r, dict)],
            note=nul_free(str(data.get("note") or "")),
            scenario=scenario,
            failure_mode=failure_mode,
            target_name=nul_free(str(data.get("targetName") or ""))[:300],
            waived_item=made.get(str(data.get("waives") or "")),
            reason=nul_free(str(data.get("reason") or "")),
            scope=nul_free(str(data.get("scope") or ""))[:500],
            expires_at=parse_datetime(str(data.get("expiresAt") or "")),
        )
        made[str(data.get("id") or item.pk)] = item
        changes = _filed_changes(item) | {"exported as": (None, data.get("id"))}
        audit(None, "imported from an export", item=item, changes=changes)
    return list(made.values())


def _choice(value: Any, choices: list[str], default: str) -> str:
    return value if isinstance(value, str) and value in choices else default


def _filed_changes(item: QCItem) -> dict[str, tuple[Any, Any]]:
    return (
        {
            f: (None, getattr(item, f))
            for f in ("kind", "category", "code", "severity", "step_id", "scenario", "failure_mode", "target_name")
            if getattr(item, f)
        }
        | {"evidence_refs": (None, [f"{r['kind']}:{r['ref']}" for r in item.evidence_refs])}
        | (
            {f: (None, getattr(item, f)) for f in ("waived_item", "approver", "reason", "scope", "expires_at")}
            if item.is_waiver
            else {}
        )
    )


def _after_filing(user, trial: Trial, item: QCItem) -> None:
    scenario = item.scenario
    if scenario is not None and not item.is_waiver and scenario.status == QCScenario.Status.FIXED:
        # A new failure on a scenario marked fixed reopens it.
        _set_scenario_status(user, scenario, QCScenario.Status.OPEN, action="reopened by a new failure")
    write_missing_events(trial, item)


def _scenario_and_mode(user, trial: Trial, data: dict[str, Any]) -> tuple[QCScenario, FailureMode]:
    mode = data.get("failure_mode")
    if mode is not None:
        return mode.scenario, mode
    scenario = data.get("scenario")
    if scenario is None:
        scenario = QCScenario.objects.create(
            scenario_id=data["new_scenario_id"],
            title=data.get("new_scenario_title") or data["new_scenario_id"],
            risk=data.get("severity") or Severity.P1,
            source=QCScenario.Source.TRIAGE,
            executor="harbor",
        )
        audit(
            user,
            "scenario created",
            trial=trial,
            scenario=scenario,
            changes={"scenario_id": (None, scenario.scenario_id), "title": (None, scenario.title)},
        )
    mode, created = FailureMode.objects.get_or_create(
        scenario=scenario,
        name=data["new_failure_mode"].strip(),
        defaults={"category": data["category"], "code": data.get("code") or ""},
    )
    if created:
        audit(
            user,
            "failure mode added",
            trial=trial,
            scenario=scenario,
            changes={"failure_mode": (None, mode.name), "category": (None, mode.category), "code": (None, mode.code)},
        )
    return scenario, mode


EDITABLE_FIELDS = ("status", "severity", "assignee", "note", "reason", "scope", "expires_at")


@transaction.atomic
def update_item(user, item: QCItem, values: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    item = QCItem.objects.select_for_update().get(pk=item.pk)
    changed = _apply(item, {k: v for k, v in values.items() if k in EDITABLE_FIELDS})
    if changed:
        item.save()
        audit(user, "edited", item=item, changes=changed)
    return changed


@transaction.atomic
def set_failure_class(user, trial: Trial, failure_class: str, reason: str = "") -> bool:
    """A triager's class for one failing trial ("" goes back to the rules' class); audited with the reason."""
    if failure_class and failure_class not in FailureClass.__members__.values():
        raise ValueError(f"{failure_class!r} is not a failure class")
    with transaction.atomic():
        changes = _apply(trial, {"failure_class_override": failure_class})
        if not changes:
            return False
        # updated_at moves with it: stored comparisons and grids are computed again
        trial.save(update_fields=["failure_class_override", "updated_at"])
        if reason:
            changes["reason"] = ("", reason)
        audit(user, "failure class set" if failure_class else "failure class reset", trial=trial, changes=changes)
    signatures.sign_trials([trial.pk])  # its cluster opens at its class: it moves with the override
    return True


def add_comment(user, trial: Trial, text: str, *, step_id: str = "", item: QCItem | None = None) -> Comment:
    comment = Comment.objects.create(trial=trial, step_id=step_id, item=item, author=user, text=nul_free(text))
    audit(user, "commented", item=item, trial=trial, changes={"comment": (None, comment.text[:200])})
    return comment


@transaction.atomic
def assign_trials(user, trials: list[Trial], assignee) -> int:
    count = 0
    for trial in trials:
        assignment = TriageAssignment.objects.filter(trial=trial).select_related("assignee").first()
        old = assignment.assignee if assignment else None
        if old == assignee:
            continue
        if assignee is None:
            assert assignment is not None  # (it had an assignee: `old`)
            assignment.delete()
        else:
            TriageAssignment.objects.update_or_create(trial=trial, defaults={"assignee": assignee, "assigned_by": user})
        audit(user, "assigned", trial=trial, changes={"assignee": (old, assignee)})
        count += 1
    return count


def _set_scenario_status(user, scenario: QCScenario, status: str, action: str = "status changed") -> bool:
    if scenario.status == status:
        return False
    old = scenario.status
    scenario.status = status
    scenario.save(update_fields=["status", "updated_at"])
    audit(user, action, scenario=scenario, changes={"status": (old, status)})
    return True


@transaction.atomic
def set_scenario_status(user, scenario: QCScenario, status: str) -> bool:
    return _set_scenario_status(user, scenario, status)
