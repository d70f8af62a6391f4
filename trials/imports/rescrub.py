"""A redaction that arrives after the items it covers: the trial's index is scrubbed again.

An import scrubs a trial's files by the redactions among them (trials.ingest.redaction,
withhold_redacted). Events in a file of their own, or an evidence pack, are joined
to trials imported earlier; when they redact an item, what those trials already hold of it
(events, context records, documents, criteria, artifacts' entries, their trajectories'
steps) is scrubbed here, in the import's transaction. The stored packs keep their bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from django.db.models import Model

from trials import search
from trials.imports.blobs import StepBodies, release_blobs
from trials.imports.steps import write_steps
from trials.ingest import redaction
from trials.models import Artifact, ContextRecord, RewardCriterion, RuntimeEvent, Step, Trajectory, Trial

# What a trial row holds of its files: documents (Config, Verifier tabs), logs, its exception.
TRIAL_FIELDS = ("documents", "texts", "exception_message", "exception_traceback")

_M = TypeVar("_M", bound=Model)


def scrub_trial(trial: Trial, spool: Path) -> None:
    """Scrub what the trial holds by every redaction it now has."""
    named = trial.redactions()
    if not named:
        return
    events = list(RuntimeEvent.objects.filter(trial=trial).only("raw", "payload", "refs"))
    records = list(ContextRecord.objects.filter(trial=trial).only("kind", "record_id", "status", "data"))
    scrubbed = {field: redaction.scrub_tree(getattr(trial, field), named) for field in TRIAL_FIELDS}
    changed = {field: value for field, value in scrubbed.items() if value != getattr(trial, field)}
    if changed:
        for field, value in changed.items():
            setattr(trial, field, value)
        Trial.objects.filter(pk=trial.pk).update(**changed)
    for model, fields in ((RewardCriterion, ["raw", "evidence_refs"]), (Artifact, ["raw"])):
        _scrub_rows(model, list(model.objects.filter(trial=trial).only(*fields)), fields, named)
    _scrub_rows(RuntimeEvent, events, ["raw", "payload", "refs"], named)
    changed_records = {}
    for record in records:
        data = redaction.scrub_tree(record.data, named)
        if record.kind == "item" and record.record_id in named:
            data = redaction.scrub_redacted(data, named[record.record_id].get("fields"), force=True)
            if record.status != "redacted":
                record.status = record.redaction_state = "redacted"
                changed_records[record.pk] = record
        if data != record.data:
            record.data = data
            changed_records[record.pk] = record
    ContextRecord.objects.bulk_update(changed_records.values(), ["data", "status", "redaction_state"], batch_size=500)
    for trajectory in trial.trajectories.all():  # (a running live trial's steps are in segments: no step_bodies)
        withhold_in_stored(trajectory, named, spool)


def _scrub_rows(model: type[_M], rows: list[_M], fields: list[str], named: dict[str, dict[str, Any]]) -> None:
    """Write back the rows whose JSON fields a redaction changes."""
    changed = []
    for row in rows:
        scrubbed = [redaction.scrub_tree(getattr(row, field), named) for field in fields]
        if scrubbed != [getattr(row, field) for field in fields]:
            for field, value in zip(fields, scrubbed, strict=True):
                setattr(row, field, value)
            changed.append(row)
    model._default_manager.bulk_update(changed, fields, batch_size=500)


def withhold_in_stored(trajectory: Trajectory, named: dict[str, dict[str, Any]], spool: Path) -> None:
    """The trajectory's steps written again from scrubbed copies, if a redaction changes any of them."""
    stored = [step for _, _, step in search.stored_steps(Step.objects.filter(trajectory=trajectory))]
    raws = [step.raw for step in stored]
    scrubbed = [redaction.scrub_tree(raw, named) for raw in raws]
    header = redaction.scrub_tree(trajectory.header, named)
    if scrubbed == raws and header == trajectory.header:
        return
    search.unindex(trajectory.trial)  # the trial is indexed again from the new bodies
    before = {trajectory.step_bodies_id, *trajectory.steps.exclude(segment=None).values_list("segment_id", flat=True)}
    Step.objects.filter(trajectory=trajectory).delete()
    steps = [trajectory.read_step(raw, step.index) for raw, step in zip(scrubbed, stored, strict=True)]
    copies = StepBodies(spool)
    try:
        write_steps([(trajectory, steps, copies)])
        trajectory.step_bodies_id = copies.store()
    finally:
        copies.discard()
    trajectory.header, trajectory.withheld = header, True
    trajectory.save(update_fields=["step_bodies", "header", "withheld"])
    release_blobs(before)  # the unscrubbed bodies, unless the file itself or shared (a live trial's segments)
