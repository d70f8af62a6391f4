"""Trials imported before `Trial.trajectory_files_alone`: the migration marks those of trajectory files alone."""

from __future__ import annotations

import pytest

from tests.builders import migrate_to
from trials.models import Trial


@pytest.mark.django_db(transaction=True)
def test_the_migration_marks_the_trials_made_of_trajectory_files_alone_and_no_folders_trial():
    old = migrate_to(("trials", "0036_received_batch"))
    OldTrial = old.get_model("trials", "Trial")
    OldTrial.objects.create(key="atif:session-1::trajectory.json", name="session-1", source_format="harbor")
    OldTrial.objects.create(key="harbor:job/trial-1", name="trial-1", source_format="harbor")
    migrate_to()
    marked = dict(Trial.objects.values_list("key", "trajectory_files_alone"))
    assert marked == {"atif:session-1::trajectory.json": True, "harbor:job/trial-1": False}
