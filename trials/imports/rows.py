"""Rows built from parsed records: jobs, datasets, tasks, configurations, trials, events,
context records, permissions, criteria and artifacts.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from trials.ingest import completeness
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    ParsedContextRecord,
    ParsedCriterion,
    ParsedEvent,
    ParsedJob,
    ParsedPermission,
    ParsedStep,
    ParsedTrial,
    Problem,
    TaskRef,
)
from trials.ingest.signatures import StepSignature, step_signature
from trials.ingest.values import seconds_between
from trials.models import (
    Artifact,
    Configuration,
    ContextRecord,
    Dataset,
    Job,
    Pack,
    PermissionDecision,
    RewardCriterion,
    RuntimeEvent,
    Task,
    Trajectory,
    Trial,
)
from trials.storage.bulk_insert import create_in_batches
from trials.thresholds import decided_status
from trials.triage import services as triage


def upsert_job(parsed: ParsedJob, pack: Pack | None) -> tuple[Job, bool]:
    """The job by its key (or one stored under an earlier key of it, adopted), and whether this import
    applied its result: a job imported while it ran gets its result when a later import has it."""
    job = Job.objects.filter(key=parsed.key).first()
    if job is None and parsed.earlier_keys:
        job = Job.objects.filter(key__in=parsed.earlier_keys).first()
        if job is not None:
            job.key = parsed.key
            try:
                with transaction.atomic():
                    job.save(update_fields=["key"])
            except IntegrityError:  # another import made the job by its id meanwhile: its trials join it
                job = None
    if job is None:
        job, created = Job.objects.get_or_create(
            key=parsed.key,
            defaults={
                "name": parsed.name[:300],
                "source_format": parsed.source_format,
                "pack": pack,
                "started_at": parsed.started_at,
                "started_as_written": parsed.started_as_written,
                "finished_at": parsed.finished_at,
                "config": parsed.config,
                "result": parsed.result,
                "extra": parsed.extra,
            },
        )
        if created:
            return job, False
    if not finishes(job, parsed):
        return job, False
    job.started_at, job.started_as_written = parsed.started_at, parsed.started_as_written
    job.finished_at, job.result = parsed.finished_at, parsed.result
    job.config = job.config or parsed.config  # (a trial copied before its job's config.json)
    job.save(update_fields=["started_at", "started_as_written", "finished_at", "result", "config"])
    return job, True


def finishes(job: Job, parsed: ParsedJob) -> bool:
    """Whether this parsed job is the finish of a stored one still running (its finish may be a naive
    time, kept only as written in the result)."""
    stored_done = job.finished_at is not None or _written_finish(job.result)
    return not stored_done and (parsed.finished_at is not None or _written_finish(parsed.result))


def _written_finish(result: Any) -> bool:
    return isinstance(result, dict) and bool(result.get("finished_at"))


def join_trials_to_job(job: Job, trial_ids: list[int], earlier_keys: tuple[str, ...]) -> int:
    """Trials of a job's folder imported before their job was known (alone, or into a job stored under
    an earlier key of it) join it; an earlier job left empty is removed. How many joined."""
    stray = Trial.objects.filter(pk__in=trial_ids).exclude(job=job)
    joined = stray.filter(Q(job__isnull=True) | Q(job__key__in=earlier_keys)).update(job=job)
    Job.objects.filter(key__in=earlier_keys, trials__isnull=True).delete()
    return joined


def infer_job_configuration(job: Job) -> int:
    """A Harbor job runs one configuration: trials whose evidence pack is missing inherit it."""
    declared = set(
        job.trials.filter(configuration__isnull=False)
        .exclude(configuration__role="")
        .values_list("configuration_id", flat=True)
    )
    if len(declared) != 1:
        return 0
    config = Configuration.objects.get(pk=declared.pop())
    undeclared = job.trials.filter(
        configuration__role="", configuration__agent_name=config.agent_name, configuration__model_name=config.model_name
    )
    count, replaced = 0, set[int]()
    for trial in undeclared:
        replaced.add(trial.configuration_id)
        trial.configuration = config
        trial.problems.append(
            Problem(
                trial.name,
                f"no evidence pack: configuration {config.key!r} inferred from job {job.name!r}",
                severity="warning",
                kept="the Harbor agent and model as written",
            ).as_dict()
        )
        trial.save(update_fields=["configuration", "problems"])
        count += 1
    Configuration.objects.filter(pk__in=replaced, trials__isnull=True).delete()  # left with no trial
    return count


# Dataset.ref of a dataset made for a run that named none by its tasks (DatasetRef.task_ids), when no
# stored dataset held them yet: `adopt_named_by_tasks` moves its trials once one does.
NAMED_BY_TASKS = "named by its tasks"


def get_dataset(ref: DatasetRef | None) -> Dataset | None:
    if ref is None or not ref.name:
        return None
    if ref.task_ids and not ref.version and (holding := dataset_holding(ref.task_ids)) is not None:
        return holding
    named = (ref.ref or (NAMED_BY_TASKS if ref.task_ids and not ref.version else ""))[:500]
    dataset, _ = Dataset.objects.get_or_create(name=ref.name[:300], version=ref.version[:100], defaults={"ref": named})
    return dataset


def adopt_named_by_tasks() -> list[int]:
    """Trials of runs named by their tasks before the versioned dataset holding those tasks was stored
    move to it and its tasks, as if it had come first (the same answer whichever import came first);
    the dataset made for them goes. The ids of the trials moved."""
    moved: list[int] = []
    for loose in Dataset.objects.filter(version="", ref=NAMED_BY_TASKS):
        names = tuple(set(loose.task_set.values_list("name", flat=True)))
        holding = dataset_holding(names) if names else None
        if holding is None:
            continue
        held = {}  # name -> its task in the holding dataset (the first made, as get_task finds it)
        for pk, name in Task.objects.filter(dataset=holding, name__in=names).order_by("-pk").values_list("pk", "name"):
            held[name] = pk
        with transaction.atomic():
            for task_id, name in loose.task_set.values_list("pk", "name"):
                trials = Trial.objects.filter(task_id=task_id)
                moved += trials.values_list("pk", flat=True)
                # updated_at moves so stored comparisons and grids pair them anew
                trials.update(dataset=holding, task_id=held[name], updated_at=timezone.now())
            moved += Trial.objects.filter(dataset=loose).values_list("pk", flat=True)
            Trial.objects.filter(dataset=loose).update(dataset=holding, updated_at=timezone.now())
            loose.task_set.all().delete()
            loose.delete()
    return moved


def dataset_holding(task_names: tuple[str, ...]) -> Dataset | None:
    """The one stored versioned dataset holding every one of these tasks; None when none or several do."""
    found = list(
        Dataset.objects.exclude(version="")
        .filter(task__name__in=task_names)
        .annotate(n=Count("task__name", distinct=True))
        .filter(n=len(set(task_names)))[:2]
    )
    return found[0] if len(found) == 1 else None


def get_task(dataset: Dataset | None, ref: TaskRef | None) -> Task | None:
    if ref is None or not ref.name:
        return None
    if stored := stored_task(list(Task.objects.filter(dataset=dataset, name=ref.name[:300])), ref):
        return stored
    made, _ = Task.objects.get_or_create(
        dataset=dataset,
        name=ref.name[:300],
        checksum=ref.checksum[:128],
        defaults={"source": ref.source[:1000], "definition": ref.definition},
    )
    return made


def stored_task(same_name: list[Task], ref: TaskRef) -> Task | None:
    """Of the stored tasks of a ref's dataset and name, the one of its checksum; without one (a trial a job's
    stats alone name), the first; with one, a task stored without, filled in. None: make one."""
    checksum = ref.checksum[:128]
    if found := next((task for task in same_name if task.checksum == checksum), None):
        return found
    blank = next((task for task in same_name if not task.checksum), None) if checksum else None
    if blank is not None:
        blank.checksum, blank.source, blank.definition = checksum, ref.source[:1000], ref.definition
        blank.save(update_fields=["checksum", "source", "definition"])
        return blank
    return None if checksum or not same_name else same_name[0]


def get_configuration(ref: ConfigurationRef | None) -> Configuration | None:
    if ref is None or not ref.key:
        return None
    config, created = Configuration.objects.get_or_create(
        key=ref.key[:300],
        defaults={
            "role": ref.role,
            "agent_name": ref.agent_name[:200],
            "agent_version": ref.agent_version[:100],
            "model_name": ref.model_name[:200],
            "profiles": ref.profiles,
        },
    )
    if not created and ref.role and not config.role:
        Configuration.objects.filter(pk=config.pk).update(role=ref.role)
    return config


def apply_completeness(trial: Trial) -> None:
    result = completeness.evaluate(trial.benchmark, trial.runtime_correlation, trial.refs)
    trial.is_complete = result["joinable"]
    trial.missing = result["missing"]
    trial.lime_evidence = completeness.applies(trial.format_traits.lime_evidence, trial.runtime_correlation or {})


def trial_row(
    parsed: ParsedTrial,
    pack: Pack | None,
    job: Job | None,
    dataset: Dataset | None,
    task: Task | None,
    configuration: Configuration | None,
) -> Trial:
    """The trial's row, not saved yet."""
    duration = seconds_between(parsed.started_at, parsed.finished_at)
    duration = parsed.phases.get("total", {}).get("seconds") if duration is None else duration
    correlation = parsed.runtime_correlation
    return Trial(
        key=parsed.key[:500],
        files_sha256=parsed.files_sha256,
        trajectory_files_alone=parsed.trajectory_files_alone,
        source_format=parsed.source_format,
        name=parsed.name[:300],
        pack=pack,
        job=job,
        dataset=dataset,
        task=task,
        configuration=configuration,
        attempt=parsed.attempt if isinstance(parsed.attempt, int) and 0 <= parsed.attempt < 2**31 else None,
        status=decided_status(dataset, parsed.source_format, parsed.status or Trial.Status.UNKNOWN, parsed.reward),
        reward=parsed.reward,
        rewards=parsed.rewards,
        exception_type=parsed.exception_type[:200],
        exception_message=parsed.exception_message,
        exception_traceback=parsed.exception_traceback,
        failure_category=parsed.failure_category[:60],
        started_at=_aware(parsed.started_at),
        finished_at=_aware(parsed.finished_at),
        duration_sec=duration,
        phases=parsed.phases,
        input_tokens=column_count(parsed.input_tokens),
        cached_tokens=column_count(parsed.cached_tokens),
        output_tokens=column_count(parsed.output_tokens),
        cost_usd=parsed.cost_usd,
        session_id=str(correlation.get("sessionId") or "")[:200],
        run_id=str(correlation.get("runId") or "")[:200],
        benchmark=parsed.benchmark,
        runtime_correlation=correlation,
        refs=parsed.refs,
        provenance=parsed.provenance,
        documents=parsed.documents,
        texts=parsed.texts,
        ctrf_tests=parsed.ctrf_tests,
    )


def _aware(value: datetime | None) -> datetime | None:
    return value if value is None or value.tzinfo is not None else None


def step_row(trajectory: Trajectory, step: ParsedStep, offset: int, size: int, signed: StepSignature) -> dict[str, Any]:
    return {
        "trajectory_id": trajectory.pk,
        "trial_id": trajectory.trial_id,
        "index": step.index,
        "step_id": "" if step.step_id is None else str(step.step_id)[:40],  # (null, or no object at all)
        "source": step.source[:10],
        "timestamp": _aware(step.timestamp),
        "model_name": step.model_name[:200],
        "message_text": step.message_text,
        "reasoning": step.reasoning,
        "prompt_tokens": column_count(step.prompt_tokens),
        "completion_tokens": column_count(step.completion_tokens),
        "cached_tokens": column_count(step.cached_tokens),
        "cost_usd": step.cost_usd,
        "is_copied_context": step.is_copied_context,
        "llm_call_count": column_count(step.llm_call_count, bits=32),
        "context_management": step.context_management[:20],
        "skill": step.skill[:200],
        "tool_call_count": len(step.tool_calls),
        "body_offset": offset,
        "size": size,
        "align_key": signed.align_key,
        "signature": signed.signature,
        "chain": signed.chain,
    }


def sign_step(step: ParsedStep, previous_chain: str) -> StepSignature:
    """The step's alignment hashes, from what its rows keep (trials.ingest.signatures)."""
    return step_signature(
        step.source,
        step.message_text,
        [(call.function_name[:200], call.arguments) for call in step.tool_calls],
        [obs.content_text for obs in step.observations],
        previous_chain,
    )


def step_tokens(step: ParsedStep) -> int:
    """Prompt + completion tokens, as the viewer's token bar draws them (0 for nonsense counts)."""
    return (column_count(step.prompt_tokens) or 0) + (column_count(step.completion_tokens) or 0)


def column_count(value: int | None, bits: int = 64) -> int | None:
    """A count past its column's bits is not a real count: keep it only in the raw step."""
    return value if value is None or -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else None


def write_trial_children(trial: Trial, parsed: ParsedTrial, blobs: dict[str, int]) -> None:
    write_criteria(trial, parsed.criteria)
    Artifact.objects.bulk_create(
        Artifact(
            trial=trial,
            source=a.source[:1000],
            destination=a.destination[:1000],
            kind=a.kind[:20],
            status=a.status[:20],
            service=a.service[:100],
            blob_id=blobs.get(a.path),
            raw=a.raw,
        )
        for a in parsed.artifacts
    )
    create_in_batches(RuntimeEvent, (event_row(e, trial, trial.pack) for e in parsed.events))
    write_permissions(trial, parsed.permissions)
    ContextRecord.objects.bulk_create(context_row(r, trial, trial.pack) for r in parsed.context_records)
    if parsed.qc_items:  # (an export's: triage items again, through the one service that writes them)
        triage.import_items(trial, parsed.qc_items)


def write_criteria(trial: Trial, criteria: Iterable[ParsedCriterion]) -> None:
    RewardCriterion.objects.bulk_create(
        RewardCriterion(
            trial=trial,
            name=c.name[:300],
            score=c.score,
            weight=c.weight,
            reasoning=c.reasoning,
            evidence_refs=c.evidence_refs,
            raw=c.raw,
        )
        for c in criteria
    )


def write_permissions(trial: Trial, permissions: Iterable[ParsedPermission]) -> None:
    create_in_batches(
        PermissionDecision,
        (
            PermissionDecision(
                trial=trial,
                action_id=p.action_id[:200],
                tool_call_id=p.tool_call_id[:200],
                step_id=str(p.step_id)[:40],
                action_type=p.action_type[:100],
                tool_name=p.tool_name[:200],
                scope=p.scope,
                prompt=p.prompt,
                decision=p.decision,
                decided_by=p.decided_by[:200],
                reason=p.reason,
                side_effect_after_denial=p.side_effect_after_denial,
                requested_at=_aware(p.requested_at),
                resolved_at=_aware(p.resolved_at),
                raw=p.raw,
            )
            for p in permissions
        ),
    )


def event_row(event: ParsedEvent, trial: Trial | None, pack: Pack | None) -> RuntimeEvent:
    return RuntimeEvent(**event_values(event, trial.pk if trial else None, pack.pk if pack else None))


def event_values(event: ParsedEvent, trial_id: int | None, pack_id: int | None) -> dict[str, Any]:
    """An event's row as column values (insert_rows takes these: a live POST of thousands of events)."""
    return {
        "trial_id": trial_id,
        "pack_id": pack_id,
        "type": event.type[:100],
        "event_id": event.event_id[:200],
        "timestamp": _aware(event.timestamp),
        "sequence": column_count(event.sequence) if isinstance(event.sequence, int) else None,
        "session_id": str(event.correlation.get("sessionId") or "")[:200],
        "run_id": str(event.correlation.get("runId") or "")[:200],
        "correlation": event.correlation,
        "payload": event.payload,
        "refs": event.refs,
        "raw": event.raw,
    }


def context_row(record: ParsedContextRecord, trial: Trial | None, pack: Pack | None) -> ContextRecord:
    return ContextRecord(
        trial=trial,
        pack=pack,
        kind=record.kind[:20],
        record_id=record.record_id[:300],
        context_id=record.context_id[:200],
        status=record.status[:20],
        reason=record.reason,
        redaction_state=record.redaction_state[:30],
        step_id=str(record.correlation.get("stepId") or "")[:40],
        tool_call_id=str(record.correlation.get("toolCallId") or "")[:200],
        correlation=record.correlation,
        data=record.data,
    )
