"""The one place triage writes. Every function that changes a row runs in one transaction
and records an AuditEntry with who, when and {field: [old, new]}.

Reads used by several views (pre-fill, evidence choices, the queue, P0 counts) live here
too, so pages, the API and the comparisons app agree.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Case, Count, IntegerField, Max, Prefetch, Q, QuerySet, Value, When
from django.utils import timezone

from trials.models import Artifact, Document, RewardCriterion, RuntimeEvent, Step, ToolCall, Trial, nul_free
from trials.triage import taxonomy
from trials.triage.models import AuditEntry, Comment, FailureMode, QCItem, QCScenario, Severity, TriageAssignment

LIME_SCHEMA_VERSION = "lime-profile-0.4.0"
RUNTIME_ID = "benchviewer"
EXPIRING_SOON = timedelta(days=14)
MAX_EVIDENCE_CHOICES = 2000  # per kind; a trial with more still files, it just offers the first ones
MANIFEST_KIND = "agentqc-scenario-manifest"


# ----------------------------------------------------------------------------- audit


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


# ----------------------------------------------------------------------------- pre-fill


@dataclass
class Prefill:
    category: str
    code: str
    source: str  # where the guess came from, shown next to the form
    verifier_errors: list[str]


def _failure_event_category(trial: Trial) -> tuple[str, str]:
    """failureCategory from the pack's benchmark events (trial.failed first, then the others).

    Only imported ones: those triage wrote (no pack) repeat a triager's call, not the pack's.
    """
    types = ("benchmark.trial.failed", "benchmark.trial.completed", "benchmark.reward.recorded")
    events = trial.events.filter(pack__isnull=False, type__in=types).values_list("type", "payload")
    by_type = {etype: payload or {} for etype, payload in events}
    for etype in ("benchmark.trial.failed", "benchmark.reward.recorded", "benchmark.trial.completed"):
        value = str(by_type.get(etype, {}).get("failureCategory") or "")
        if value.lower() not in taxonomy.NOT_A_FAILURE:
            return value, etype
    return "", ""


def verifier_errors(trial: Trial) -> list[str]:
    """Errors the verifier wrote in reward-details (criteria with an `error`)."""
    errors = []
    for name, raw in trial.criteria.values_list("name", "raw"):
        error = (raw or {}).get("error") if isinstance(raw, dict) else None
        if error:
            errors.append(f"{name}: {error}")
    return errors


def prefill(trial: Trial) -> Prefill:
    """Category and code as the pack already says them (seed 000: failureCategory first)."""
    errors = verifier_errors(trial)
    value, etype = _failure_event_category(trial)
    if value:
        return Prefill(taxonomy.category_for(value), taxonomy.normalise_code(value), f"{etype} failureCategory", errors)
    if trial.failure_category and trial.failure_category.lower() not in taxonomy.NOT_A_FAILURE:
        value = trial.failure_category
        return Prefill(taxonomy.category_for(value), taxonomy.normalise_code(value), "trial failure category", errors)
    if trial.exception_type:
        category = taxonomy.category_from_exception(trial.exception_type)
        code = "timeout" if "timeout" in trial.exception_type.lower() else ""
        return Prefill(category, code, f"exception {trial.exception_type}", errors)
    if errors:
        return Prefill(taxonomy.Category.VERIFIER, "", "verifier errors", errors)
    return Prefill("", "", "", errors)


def queue_category(trial_values: dict[str, Any]) -> str:
    """The cheap pre-fill for list pages: from the trial row only (no event query)."""
    return (
        taxonomy.category_for(trial_values.get("failure_category"))
        or taxonomy.category_from_exception(trial_values.get("exception_type"))
        or "unclassified"
    )


# ----------------------------------------------------------------------------- evidence refs


def trajectory_names(trial: Trial) -> dict[int, str]:
    """Trajectory pk -> its name in a step ref: "" for the trial's first trajectory; for the others
    (continuations, subagents, multi-step parts, whose step ids repeat the first's) the shortest
    end of its path that no other trajectory of the trial ends with."""
    paths = dict(trial.trajectories.order_by("position").values_list("pk", "path"))
    names = {}
    for i, (pk, path) in enumerate(paths.items()):
        parts = path.split("/")
        name = path
        for n in range(1, len(parts)):
            name = "/".join(parts[-n:])
            if not any(o == name or o.endswith("/" + name) for opk, o in paths.items() if opk != pk):
                break
        names[pk] = "" if i == 0 else name[-250:]  # (a ref fits QCItem.step_id)
    return names


def step_ref(step_id: str, trajectory_name: str) -> str:
    """How an item cites a step: its step_id, with its file's name past the trial's first trajectory."""
    return f"{step_id}@{trajectory_name}" if trajectory_name else step_id


def step_choices(trial: Trial) -> list[tuple[str, str]]:
    names = trajectory_names(trial)
    seen: dict[str, str] = {}
    rows = (
        Step.objects.filter(trial=trial)
        .order_by("trajectory__position", "index")
        .values_list("trajectory_id", "step_id", "source")
    )
    for trajectory_id, step_id, source in rows[:MAX_EVIDENCE_CHOICES]:
        name = names[trajectory_id]
        seen.setdefault(step_ref(step_id, name), f"step {step_id} ({source})" + (f" in {name}" if name else ""))
    return list(seen.items())


def evidence_choices(trial: Trial) -> list[tuple[str, list[tuple[str, str]]]]:
    """Grouped choices "kind:ref" for the evidence multi-select: only refs this trial has."""
    limit = MAX_EVIDENCE_CHOICES
    tool_calls = (
        ToolCall.objects.filter(trial=trial)
        .exclude(tool_call_id="")
        .order_by("pk")
        .values_list("tool_call_id", "function_name", "step__step_id")[:limit]
    )
    artifacts = Artifact.objects.filter(trial=trial).order_by("pk").values_list("destination", "source")[:limit]
    criteria = RewardCriterion.objects.filter(trial=trial).order_by("pk").values_list("name", "score")[:limit]
    groups = [
        ("Trial", [(f"trial:{trial.key}", f"the whole trial ({trial.name})")]),
        ("Steps", [(f"step:{sid}", label) for sid, label in step_choices(trial)]),
        (
            "Tool calls",
            list(dict.fromkeys((f"tool_call:{cid}", f"{cid} · {fn} (step {sid})") for cid, fn, sid in tool_calls)),
        ),
        ("Artifacts", list(dict.fromkeys((f"artifact:{dest or src}", dest or src) for dest, src in artifacts))),
        (
            "Reward criteria",
            list(dict.fromkeys((f"criterion:{name}", f"{name} = {score}") for name, score in criteria)),
        ),
    ]
    return [(label, options) for label, options in groups if options]


def parse_ref(value: str) -> dict[str, str]:
    kind, _, ref = value.partition(":")
    return {"kind": kind, "ref": ref}


def ref_text(ref: dict[str, str], trial: Trial) -> str:
    """An evidence ref as one string for the Lime evidence pack."""
    if ref.get("kind") == "trial":
        return f"trial:{ref['ref']}"
    return f"trial:{trial.key}#{ref.get('kind')}:{ref.get('ref')}"


# ----------------------------------------------------------------------------- failure modes


def similar_failure_modes(name: str, code: str = "", exclude_scenario: QCScenario | None = None) -> QuerySet:
    """Existing failure modes a new one would duplicate: same name (any case) or same code."""
    query = Q()
    if name.strip():
        query |= Q(name__iexact=name.strip())
    if code:
        query |= Q(code=code)
    if not query:
        return FailureMode.objects.none()
    modes = FailureMode.objects.filter(query).select_related("scenario")
    return modes


# ----------------------------------------------------------------------------- filing


@transaction.atomic
def file_item(user, trial: Trial, data: dict[str, Any]) -> QCItem:
    """Create a QC item from a valid FeedbackForm's cleaned_data (and what it implies)."""
    kind = data["kind"]
    scenario = data.get("scenario")
    failure_mode = data.get("failure_mode")
    if kind == QCItem.Kind.FAILURE_MODE:
        scenario, failure_mode = _scenario_and_mode(user, trial, data)
    item = QCItem.objects.create(
        kind=kind,
        trial=trial,
        step_id=data.get("step_id") or "",
        category=data["category"],
        code=data.get("code") or "",
        severity=data.get("severity") or Severity.P2,
        evidence_refs=[parse_ref(v) for v in data.get("evidence_refs") or []],
        note=nul_free(data.get("note") or ""),
        scenario=scenario,
        failure_mode=failure_mode,
        target_name=nul_free(data.get("target_name") or ""),
        assignee=data.get("assignee"),
        waived_item=data.get("waived_item") if kind == QCItem.Kind.WAIVER else None,
        approver=data.get("approver") if kind == QCItem.Kind.WAIVER else None,
        reason=nul_free(data.get("reason") or ""),
        scope=nul_free(data.get("scope") or ""),
        expires_at=data.get("expires_at") if kind == QCItem.Kind.WAIVER else None,
        created_by=user,
    )
    audit(
        user,
        "filed",
        item=item,
        changes={
            f: (None, getattr(item, f))
            for f in ("kind", "category", "code", "severity", "step_id", "scenario", "failure_mode", "target_name")
            if getattr(item, f)
        }
        | {"evidence_refs": (None, [f"{r['kind']}:{r['ref']}" for r in item.evidence_refs])}
        | (
            {f: (None, getattr(item, f)) for f in ("waived_item", "approver", "reason", "scope", "expires_at")}
            if item.is_waiver
            else {}
        ),
    )
    if scenario is not None and kind != QCItem.Kind.WAIVER and scenario.status == QCScenario.Status.FIXED:
        # A new failure on a scenario marked fixed reopens it.
        _set_scenario_status(user, scenario, QCScenario.Status.OPEN, action="reopened by a new failure")
    write_missing_events(trial, item)
    return item


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


@transaction.atomic
def import_manifest(user, document: Document) -> tuple[int, int]:
    """Seed QCScenario / FailureMode rows from an imported Lime scenario manifest.

    Idempotent: importing again updates titles and adds new failure modes; a scenario's
    status and the items filed against it are kept. Returns (scenarios created, failure
    modes created).
    """
    data = document.data or {}
    created_scenarios = created_modes = 0
    for entry in data.get("scenarios") or []:
        if not isinstance(entry, dict) or not entry.get("id"):
            continue
        risk = entry.get("risk") if entry.get("risk") in Severity.values else Severity.P1
        scenario, created = QCScenario.objects.update_or_create(
            scenario_id=str(entry["id"])[:200],
            defaults={
                "title": str(entry.get("title") or entry["id"])[:500],
                "risk": risk,
                "source": QCScenario.Source.MANIFEST,
                "executor": str(entry.get("executor") or "")[:60],
                "lanes": entry.get("lanes") or [],
                "goal": str(entry.get("goal") or ""),
                "verifier": str(entry.get("verifier") or ""),
                "evidence_required": entry.get("evidenceRequired") or [],
                "evidence_layers": entry.get("evidenceLayers") or [],
                "manifest": document,
            },
        )
        created_scenarios += created
        for name in entry.get("failureModes") or []:
            name = str(name)[:300]
            code = taxonomy.normalise_code(name.replace(" ", "-"))
            _, mode_created = FailureMode.objects.get_or_create(
                scenario=scenario, name=name, defaults={"code": code, "category": taxonomy.category_for(code)}
            )
            created_modes += mode_created
    audit(
        user,
        "manifest imported",
        changes={
            "manifest": (None, document.path),
            "scenarios": (None, created_scenarios),
            "failure_modes": (None, created_modes),
        },
    )
    return created_scenarios, created_modes


def manifests() -> QuerySet[Document]:
    return Document.objects.filter(kind=MANIFEST_KIND).select_related("pack").order_by("-pk")


# ----------------------------------------------------------------------------- runtime events


def _correlation(trial: Trial) -> dict[str, str]:
    rc = trial.runtime_correlation or {}
    return {
        "sessionId": str(rc.get("sessionId") or trial.session_id or f"benchviewer-trial-{trial.pk}"),
        "taskId": str(rc.get("taskId") or (trial.task.name if trial.task else "") or trial.name),
        "runId": str(rc.get("runId") or trial.run_id or trial.key),
        **{k: str(rc[k]) for k in ("threadId", "turnId", "traceId") if rc.get(k)},
    }


def _benchmark_block(trial: Trial) -> dict[str, str]:
    bench = {k: str(v) for k, v in (trial.benchmark or {}).items() if isinstance(v, str | int | float)}
    bench.setdefault("datasetId", trial.dataset.name if trial.dataset else "")
    if trial.dataset and trial.dataset.version:
        bench.setdefault("datasetVersion", trial.dataset.version)
    bench.setdefault("taskId", trial.task.name if trial.task else trial.name)
    bench.setdefault("trialId", trial.name)
    if trial.configuration:
        bench.setdefault("configurationId", trial.configuration.key)
        if trial.configuration.role and "role" not in bench:
            bench["role"] = trial.configuration.role
    if bench.get("role") not in (None, "baseline", "candidate", "control"):
        bench.pop("role")
    return {k: v for k, v in bench.items() if v != ""}


def lime_event(trial: Trial, etype: str, payload: dict[str, Any], sequence: int) -> dict[str, Any]:
    """A Lime profile event envelope (agentruntime-lime-profile-event.schema.json)."""
    ids = _correlation(trial)
    refs = {k: v for k, v in (trial.refs or {}).items() if isinstance(v, str)}
    return {
        "type": etype,
        "eventId": f"evt_bv_{uuid.uuid4().hex}",
        "timestamp": timezone.now().isoformat().replace("+00:00", "Z"),
        "schemaVersion": LIME_SCHEMA_VERSION,
        "runtimeId": RUNTIME_ID,
        **ids,
        "sequence": sequence,
        "benchmark": _benchmark_block(trial),
        "refs": refs,
        "payload": payload,
    }


def write_missing_events(trial: Trial, item: QCItem) -> list[RuntimeEvent]:
    """Write benchmark.trial.failed / benchmark.reward.recorded where the pack lacked them,
    so the runtime facts and the QC facts join on the same ids."""
    have = set(trial.events.filter(type__startswith="benchmark.").values_list("type", flat=True))
    sequence = (trial.events.aggregate(m=Max("sequence"))["m"] or 0) + 1
    wanted = []
    if trial.is_failure and "benchmark.trial.failed" not in have:
        payload = {"failureCategory": item.code or item.category, "source": "triage", "qcItemId": item.label}
        if trial.exception_type:
            payload["exceptionType"] = trial.exception_type
        wanted.append(("benchmark.trial.failed", payload))
    if trial.reward is not None and "benchmark.reward.recorded" not in have:
        criteria = list(trial.criteria.values_list("name", flat=True))
        payload = {"reward": trial.reward, "criteria": criteria, "failureCategory": item.code or item.category}
        wanted.append(("benchmark.reward.recorded", payload | {"source": "triage", "qcItemId": item.label}))
    rows = []
    for offset, (etype, payload) in enumerate(wanted):
        event = lime_event(trial, etype, payload, sequence + offset)
        correlation = {k: event[k] for k in ("sessionId", "taskId", "runId", "threadId", "turnId") if k in event}
        rows.append(
            RuntimeEvent(
                trial=trial,
                pack=None,
                type=etype,
                event_id=event["eventId"],
                timestamp=timezone.now(),
                sequence=event["sequence"],
                session_id=event["sessionId"][:200],
                run_id=event["runId"][:200],
                correlation=correlation,
                payload=payload,
                refs=event["refs"],
                raw=event,
            )
        )
    return RuntimeEvent.objects.bulk_create(rows)


# ----------------------------------------------------------------------------- reads


def p0_qc_items_for_trials(trial_ids) -> int:
    """Open P0 QC facts filed against these trials that no active waiver covers.

    Counts every kind but waivers (failure modes, replay fixtures, verifier criteria,
    release blockers), status open. A waiver covers its item only until it expires, so an
    expired waiver counts for nothing. This is the comparison's p0QcGateRegressionCount.
    """
    return QCItem.objects.filter(trial_id__in=trial_ids, severity=Severity.P0).unwaived().count()


def qc_fingerprint_for_trials(trial_ids) -> list[Any]:
    """Changes whenever a QC item of these trials is filed, edited, waived or a waiver lapses."""
    items = QCItem.objects.filter(Q(trial_id__in=trial_ids) | Q(waived_item__trial_id__in=trial_ids))
    agg = items.aggregate(n=Count("pk"), last=Max("updated_at"))
    return [agg["n"], agg["last"].isoformat() if agg["last"] else None, p0_qc_items_for_trials(trial_ids)]


def queue_groups(limit: int = 1000) -> list[dict[str, Any]]:
    """Failed trials without a QC item, grouped by failure category and task."""
    rows = (
        Trial.objects.untriaged()
        .order_by("task__name", "-pk")
        .values(
            "pk",
            "name",
            "status",
            "failure_category",
            "exception_type",
            "task__name",
            "configuration__key",
            "configuration__role",
            "triage_assignment__assignee__username",
        )[:limit]
    )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(queue_category(row), row["task__name"] or "(no task)")].append(row)
    return [
        {"category": category, "task": task, "trials": trials}
        for (category, task), trials in sorted(groups.items(), key=lambda kv: (kv[0][0] == "unclassified", kv[0]))
    ]


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
