"""Shared helpers for the triage tests: role users and an imported demo job with failed trials."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model

from benchviewer import roles
from tests.conftest import import_path
from trials.demo import write_demo
from trials.models import Trial

ROLES = ("viewer", "reviewer", "triager", "approver")
PASSWORD = "pw-triage-1"


def make_user(name: str, group: str | None = None):
    user = get_user_model().objects.create_user(name, password=PASSWORD)
    if group:
        roles.add_to_group(user, group)
    return user


def import_demo(tmp_path: Path, tasks: int = 3, attempts: int = 2) -> list[Trial]:
    """Import the demo's candidate job; returns its failed trials (errored ones first)."""
    for job in write_demo(tmp_path / "demo", tasks=tasks, attempts=attempts):
        if job.name == "candidate-job":
            import_path(job)
    failed = list(Trial.objects.failed().order_by("pk"))
    failed.sort(key=lambda t: not t.events.filter(type="benchmark.trial.failed").exists())
    return failed
