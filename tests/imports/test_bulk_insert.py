"""Writing rows a batch at a time (trials/storage/bulk_insert.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.factories import TrialFactory
from trials.models import PermissionDecision, Trial
from trials.storage.bulk_insert import create_in_batches, insert_rows

pytestmark = pytest.mark.django_db


def test_create_in_batches_writes_every_row_of_a_generator_a_batch_at_a_time():
    trial = TrialFactory()
    stored_when_asked: list[int] = []

    def decisions(trial: Trial) -> Iterator[PermissionDecision]:
        for number in range(7):
            stored_when_asked.append(PermissionDecision.objects.filter(trial=trial).count())
            yield PermissionDecision(trial=trial, action_id=f"a{number}", decision="approve")

    create_in_batches(PermissionDecision, decisions(trial), batch=3)

    assert sorted(trial.permissions.values_list("action_id", flat=True)) == [f"a{n}" for n in range(7)]
    # rows 1-3 are asked for before any is written, 4-6 once the first three are, 7 once six are
    assert stored_when_asked == [0, 0, 0, 3, 3, 3, 6]


def test_insert_rows_gives_a_column_the_rows_leave_out_its_fields_default_as_the_orm_would():
    trial = TrialFactory()
    insert_rows(PermissionDecision, [{"trial_id": trial.pk, "action_id": "a1", "decision": "approve"}])

    stored = PermissionDecision.objects.get(trial=trial)
    made = PermissionDecision(trial=trial, action_id="a2", decision="approve")
    left_out = [
        f.attname
        for f in PermissionDecision._meta.concrete_fields
        if f.attname not in {"id", "trial_id", "action_id", "decision"}
    ]
    assert left_out, "the model has columns the rows leave out"
    assert {name: getattr(stored, name) for name in left_out} == {name: getattr(made, name) for name in left_out}
