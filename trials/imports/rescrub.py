"""A redaction that arrives after the items it covers: what the trial holds is scrubbed again.

An import scrubs a trial's files by the redactions among them (trials.ingest.redaction,
withhold_redacted). Events in a file of their own, an evidence pack, a live POST or a later
import may redact an item a trial already holds: then every text and JSON column of every
table holding the trial's content is scrubbed here (`trial_columns`, read from the models, so
a new table or column is covered as it comes), and its trajectories' steps are written again
from scrubbed copies (`withhold_in_stored`), in the caller's transaction. The stored packs keep
their bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.apps import apps
from django.db import models

from trials import search
from trials.imports.blobs import StepBodies, release_blobs
from trials.imports.steps import write_steps
from trials.ingest import redaction
from trials.models import ContextRecord, Step, Trajectory, Trial

BATCH = 500


@dataclass(frozen=True)
class Columns:
    """A table holding a trial's content: how its rows name the trial, and its text and JSON columns."""

    model: type[models.Model]
    trial_lookup: str  # "pk" for Trial itself, else its foreign key to Trial
    fields: tuple[models.Field, ...]


def is_text_or_json(field: models.Field) -> bool:
    return isinstance(field, (models.CharField, models.TextField, models.JSONField)) and not field.primary_key


@cache
def trial_columns() -> tuple[Columns, ...]:
    """Every model with a foreign key to Trial (Trial too), in any app, and its text and JSON columns.

    Left out: the rows made from a trajectory's step bodies (Step and the tables with a key to it),
    which `withhold_in_stored` writes again from the scrubbed bodies."""
    found = []
    for model in apps.get_models():
        keys = [f for f in model._meta.concrete_fields if f.is_relation and f.related_model is Trial]
        if model is Step or any(f.is_relation and f.related_model is Step for f in model._meta.concrete_fields):
            continue
        if model is not Trial and not keys:
            continue
        fields = tuple(f for f in model._meta.concrete_fields if is_text_or_json(f))
        if fields:
            found.append(Columns(model, "pk" if model is Trial else keys[0].name, fields))
    return tuple(found)


def scrub_trial(trial: Trial, spool: Path) -> None:
    """Scrub what the trial holds by every redaction it now has."""
    named = trial.redactions()
    if not named:
        return
    for trajectory in trial.trajectories.all():  # (first: a changed header marks its trajectory withheld)
        withhold_in_stored(trajectory, named, spool)
    for columns in trial_columns():
        changed = scrub_rows(columns, trial, named)
        if columns.model is Trial:
            for field, value in changed.get(trial.pk, {}).items():
                setattr(trial, field, value)  # (the caller's copy, as stored)
    _mark_named_items(trial, named)


def scrub_rows(columns: Columns, trial: Trial, named: dict[str, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Write back each row of the trial whose text or JSON a redaction changes; {pk: {field: value}}."""
    names = [f.name for f in columns.fields]
    rows = columns.model._default_manager.filter(**{columns.trial_lookup: trial.pk}).values_list("pk", *names)
    changed: dict[Any, dict[str, Any]] = {}
    for pk, *values in rows.iterator(chunk_size=2000):
        for field, value in zip(columns.fields, values, strict=True):
            scrubbed = redaction.scrub_tree(value, named)
            if scrubbed != value:
                max_length = field.max_length if isinstance(field, models.CharField) else None
                changed.setdefault(pk, {})[field.name] = scrubbed[:max_length] if max_length else scrubbed
    by_fields: dict[tuple[str, ...], list[models.Model]] = {}
    for pk, values in changed.items():  # (only the columns that changed: a concurrent write to another stays)
        by_fields.setdefault(tuple(sorted(values)), []).append(columns.model(pk=pk, **values))
    for fields, written in by_fields.items():
        columns.model._default_manager.bulk_update(written, list(fields), batch_size=BATCH)
    return changed


def _mark_named_items(trial: Trial, named: dict[str, dict[str, Any]]) -> None:
    """A context item a redaction names is redacted whatever it said of itself, its values blanked
    even where its record does not carry its id."""
    changed = []
    for record in ContextRecord.objects.filter(trial=trial, kind="item", record_id__in=list(named)):
        data = redaction.scrub_redacted(record.data, named[record.record_id].get("fields"), force=True)
        if data != record.data or record.status != "redacted" or record.redaction_state != "redacted":
            record.data, record.status, record.redaction_state = data, "redacted", "redacted"
            changed.append(record)
    ContextRecord.objects.bulk_update(changed, ["data", "status", "redaction_state"], batch_size=BATCH)


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
