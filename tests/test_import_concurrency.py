"""Imports running at the same time keep one copy of everything."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from tests.conftest import import_path
from tests.test_import_bad_input import write_trial
from trials.models import Blob, Pack, Step, Trial

pytestmark = pytest.mark.django_db(transaction=True)


def run_concurrently(count: int, target) -> list:
    results: list = [None] * count
    errors: list = []
    barrier = threading.Barrier(count)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target()
        except Exception as exc:  # surfaced below, with the thread's own error
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    return results


def test_two_concurrent_imports_of_one_pack_keep_one_copy(tmp_path):
    trial_dir = write_trial(tmp_path)
    imports = run_concurrently(2, lambda: import_path(trial_dir))
    assert [imp.status for imp in imports] == ["done", "done"]
    assert Trial.objects.count() == 1
    assert Step.objects.count() == 2
    assert Pack.objects.count() == 1
    assert Blob.objects.count() == len({b for b in Blob.objects.values_list("sha256", flat=True)})
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
