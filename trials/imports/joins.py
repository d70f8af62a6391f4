"""Evidence that arrives apart from its trial: an evidence pack imported on its own, runtime
events in a file of their own (joined by correlation ids, before or after their trial).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from trials.imports import rescrub
from trials.imports.rows import apply_completeness, context_row, event_row, get_configuration, write_permissions
from trials.ingest import evidence
from trials.ingest.formats import lime
from trials.ingest.formats.harbor_jobstats import NAMED_ONLY
from trials.ingest.records import (
    ConfigurationRef,
    ParsedContextRecord,
    ParsedEvent,
    ParsedTrial,
)
from trials.models import (
    Configuration,
    ContextRecord,
    Job,
    Pack,
    PackFile,
    RuntimeEvent,
    Trial,
)


def find_trial(correlation: dict[str, Any]) -> Trial | None:
    """Join loose evidence to a trial by its ids: trial id first, then session, then run."""
    trial_id = correlation.get("trialId")
    if trial_id:
        found = Trial.objects.filter(name=trial_id).order_by("pk").first()
        if found:
            return found
    for field, key in (("session_id", "sessionId"), ("run_id", "runId")):
        value = correlation.get(key)
        if value:
            found = Trial.objects.filter(**{field: value}).order_by("pk").first()
            if found:
                return found
    return None


def stored_job(key: str) -> Job | None:
    """The job a trial names that is not in the trial's own pack (imported before, or never)."""
    return Job.objects.filter(key=key).first()


def adopt_job_trials(job: Job, job_id: str) -> int:
    """Trials imported on their own before their job's result.json: they name it by `job_id`
    (`config.job_id` of their result.json or config.json: ParsedJob.trials_name_it_as) and join it now."""
    if not job_id:
        return 0
    named = Q(documents__result__config__job_id=job_id) | Q(documents__config__job_id=job_id)
    return Trial.objects.filter(named, job__isnull=True, source_format=job.source_format).update(job=job)


def is_named_only(trial: ParsedTrial) -> bool:
    """A trial only its job's result.json stats name: no folder of it in this pack."""
    return trial.provenance.get("evidence") == NAMED_ONLY


def brought_elsewhere(trial: ParsedTrial) -> bool:
    """A trial the job's stats name that another pack of the job brought with its folder: the stats add nothing."""
    return is_named_only(trial) and Trial.objects.filter(job__key=trial.job_key, name=trial.name).exists()


def drop_named_only(job_key: str, names: list[str]) -> int:
    """Trials an earlier pack knew from the job's stats alone, whose folders have now come: the folders'
    trials replace them (a job imported in parts, each part with the job's result.json)."""
    if not names:
        return 0
    stand_ins = Trial.objects.filter(job__key=job_key, name__in=names, provenance__evidence=NAMED_ONLY)
    return stand_ins.delete()[1].get("trials.Trial", 0)


def find_trial_for_evidence_pack(parsed: ParsedTrial) -> Trial | None:
    trial_id = parsed.benchmark.get("trialId") or parsed.name
    return Trial.objects.filter(name=trial_id).exclude(source_format=parsed.source_format).order_by("pk").first()


def join_evidence_pack(trial: Trial, parsed: ParsedTrial) -> None:
    """An evidence pack that came on its own, joined to its stored trial by the one rule
    (trials.ingest.evidence). The trial's dataset and criteria were written with it and stay."""
    with transaction.atomic():
        facts = joinable_facts(trial)
        folder = str(trial.refs.get("harborTrialResultRef") or "").rpartition("/")[0]  # the trial's own folder

        def find(local: str) -> str | None:
            path = f"{folder}/{local}"
            if not folder or trial.pack_id is None:
                return None
            return path if PackFile.objects.filter(pack_id=trial.pack_id, path=path).exists() else None

        problems = evidence.join_evidence_pack(facts, parsed, parsed.files[0], find)
        parsed.problems += problems  # for the import's report
        trial.problems += [p.as_dict() for p in problems]
        trial.benchmark, trial.runtime_correlation = facts.benchmark, facts.runtime_correlation
        trial.refs, trial.documents = facts.refs, facts.documents
        trial.session_id = trial.session_id or str(trial.runtime_correlation.get("sessionId") or "")[:200]
        trial.run_id = trial.run_id or str(trial.runtime_correlation.get("runId") or "")[:200]
        trial.failure_category = facts.failure_category[:60]
        trial.attempt = facts.attempt
        replaced = trial.configuration
        if parsed.configuration:
            trial.configuration = get_configuration(facts.configuration)
        apply_completeness(trial)
        trial.save()
        rescrub.scrub_trial(trial, settings.IMPORT_SPOOL_DIR)  # (its `redactions` cover what the trial holds)
        if replaced is not None and replaced != trial.configuration:
            Configuration.objects.filter(pk=replaced.pk, trials__isnull=True).delete()  # left with no trial


def joinable_facts(trial: Trial) -> ParsedTrial:
    """What the evidence-pack rule reads and merges, of a stored trial."""
    config = trial.configuration
    return ParsedTrial(
        key=trial.key,
        source_format=trial.source_format,
        name=trial.name,
        configuration=None
        if config is None
        else ConfigurationRef(
            key=config.key,
            role=config.role,
            agent_name=config.agent_name,
            agent_version=config.agent_version,
            model_name=config.model_name,
            profiles=dict(config.profiles),
        ),
        attempt=trial.attempt,
        failure_category=trial.failure_category,
        benchmark=dict(trial.benchmark),
        runtime_correlation=dict(trial.runtime_correlation),
        refs=dict(trial.refs),
        documents=dict(trial.documents),
    )


def adopt_loose_events(trial_ids: list[int], spool: Path) -> None:
    """Events imported before their trial (in a file of their own, joined to no trial then): joined to it
    now by its session or run id, and a redaction among them, or the trial's own, applied to what it holds."""
    if not trial_ids or not RuntimeEvent.objects.filter(trial=None).exists():
        return
    for trial in Trial.objects.filter(pk__in=trial_ids):
        ids = Q(session_id=trial.session_id) if trial.session_id else Q()
        ids |= Q(run_id=trial.run_id) if trial.run_id else Q()
        if not ids:
            continue
        with transaction.atomic():
            loose = RuntimeEvent.objects.filter(ids, trial=None)
            raws = list(loose.values_list("raw", flat=True))
            if not raws:
                continue
            loose.update(trial=trial)
            rescrub.scrub_trial(trial, spool)  # (a redaction among them, or the trial's own of an item they carry)


def write_loose_events(events: list[ParsedEvent], records: list[ParsedContextRecord], pack: Pack, spool: Path) -> int:
    """Events from a file of their own, joined to trials by correlation ids; a redaction among them scrubs
    what the trials it joins hold already, and a trial's own scrubs them (`rescrub.scrub_trial`)."""
    cache: dict[tuple, Trial | None] = {}

    def trial_for(correlation: dict[str, Any]) -> Trial | None:
        key = tuple(sorted((k, str(v)) for k, v in correlation.items() if k in ("trialId", "sessionId", "runId")))
        if key not in cache:
            cache[key] = find_trial(correlation)
        return cache[key]

    with transaction.atomic():
        existing = set(RuntimeEvent.objects.filter(pack=pack).values_list("event_id", flat=True))
        rows = [event_row(e, trial_for(e.correlation), pack) for e in events if e.event_id not in existing]
        RuntimeEvent.objects.bulk_create(rows)
        by_trial: dict[int, list[ParsedEvent]] = {}
        for event, row in zip([e for e in events if e.event_id not in existing], rows, strict=True):
            if row.trial is not None:
                by_trial.setdefault(row.trial.pk, []).append(event)
                if (attempt := lime.attempt_of(event)) is not None:
                    Trial.objects.filter(pk=row.trial.pk, attempt__isnull=True).update(
                        attempt=attempt, updated_at=timezone.now()
                    )
                category = (event.payload or {}).get("failureCategory")
                if event.type == lime.TRIAL_FAILED and category and category != "none":
                    Trial.objects.filter(pk=row.trial.pk, failure_category="").update(
                        failure_category=category, updated_at=timezone.now()
                    )
        for trial_pk, trial_events in by_trial.items():
            trial = Trial.objects.get(pk=trial_pk)
            write_permissions(trial, lime.permissions_from_events(trial_events))
        record_rows = []
        if not ContextRecord.objects.filter(pack=pack).exists():
            record_rows = ContextRecord.objects.bulk_create(
                context_row(r, trial_for(r.correlation), pack) for r in records
            )
        # A redaction among them, or one the trial had of an item they carry (its permissions too).
        written: list[RuntimeEvent | ContextRecord] = [*rows, *record_rows]
        for trial in Trial.objects.filter(pk__in={row.trial_id for row in written if row.trial_id is not None}):
            rescrub.scrub_trial(trial, spool)
    return len(rows)
