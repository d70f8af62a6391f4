"""Imports running at the same time keep one copy of everything."""

from __future__ import annotations

import pytest

from tests.builders import assert_every_stored_pack_is_named, import_path, run_concurrently, write_trial
from trials.imports.service import ImportRun, run_import
from trials.models import Blob, Pack, Step, Trial
from trials.queue import create_import

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_concurrent_imports_of_one_pack_keep_one_copy(tmp_path):
    trial_dir = write_trial(tmp_path)
    imports = run_concurrently(2, lambda: import_path(trial_dir))
    assert [imp.status for imp in imports] == ["done", "done"]
    assert Trial.objects.count() == 1
    assert Step.objects.count() == 2
    assert Pack.objects.count() == 1
    assert Blob.objects.count() == len({b for b in Blob.objects.values_list("sha256", flat=True)})
    assert_every_stored_pack_is_named()
    outcomes = sorted(imp.outcomes[0]["outcome"] for imp in imports)
    assert outcomes[0] in ("already imported", "imported")


def test_four_concurrent_imports_of_a_job_lose_no_trial_and_duplicate_none(tmp_path):
    job = tmp_path / "job"
    for i in range(6):
        write_trial(job, f"task-{i}__{i:07d}")
    (job / "config.json").write_text('{"job_name": "job"}')
    imports = run_concurrently(4, lambda: import_path(job))
    assert all(imp.status == "done" for imp in imports)
    assert Trial.objects.count() == 6
    assert Step.objects.count() == 12
    assert_every_stored_pack_is_named()


def test_an_import_resumed_after_its_worker_died_counts_the_trials_it_wrote_before_as_its_own(tmp_path):
    from trials.models import Import

    for name in ("task-a__AAAAAAA", "task-b__BBBBBBB", "task-c__CCCCCCC"):
        write_trial(tmp_path / "job", name)
    (tmp_path / "job" / "config.json").write_text('{"job_name": "job"}')  # one pack: a Harbor job
    imp = create_import(origin=Import.Origin.CLI, source_name="job", source_path=str(tmp_path / "job"))
    run_import(str(imp.pk))
    # As a worker killed after two trials leaves it: the pack half-written, the import running.
    Trial.objects.get(name="task-c__CCCCCCC").delete()
    Pack.objects.update(status=Pack.Status.IMPORTING)
    Import.objects.filter(pk=imp.pk).update(status=Import.Status.RUNNING)
    imp = run_import(str(imp.pk))  # what the recovery sweep's second delivery does
    [outcome] = imp.outcomes
    assert (outcome["outcome"], outcome["trials"], outcome["already"]) == ("imported", 3, 0)
    assert outcome["steps"] == Step.objects.count() and Trial.objects.count() == 3
    again = import_path(tmp_path / "job")  # another import of the same folder: everything was there already
    assert [o["outcome"] for o in again.outcomes] == ["already imported"]


def test_trials_another_import_wrote_first_are_not_counted_as_written_by_the_import_that_made_the_pack(
    tmp_path, monkeypatch
):
    from trials.models import Import

    job = tmp_path / "job"
    for i in range(3):
        write_trial(job, f"task-{i}__{i:07d}")
    (job / "config.json").write_text('{"job_name": "job"}')
    first, second = (create_import(origin=Import.Origin.CLI, source_name="job", source_path=str(job)) for _ in range(2))
    real = ImportRun.write_pack

    def second_import_writes_first(self, *args):
        if self.imp.pk == first.pk:  # `first` made the pack row; `second` writes its trials meanwhile
            run_import(str(second.pk))
        return real(self, *args)

    monkeypatch.setattr(ImportRun, "write_pack", second_import_writes_first)
    first = run_import(str(first.pk))
    second = Import.objects.get(pk=second.pk)
    assert Pack.objects.get().first_import_id == first.pk
    assert (second.outcomes[0]["trials"], second.outcomes[0]["already"]) == (3, 0)
    assert (first.outcomes[0]["trials"], first.outcomes[0]["already"]) == (0, 3)
    assert Trial.objects.count() == 3
