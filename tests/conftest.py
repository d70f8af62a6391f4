from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trials.imports.queue import create_import
from trials.imports.service import run_import
from trials.models import Import

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
REFERENCE = SHARED / "reference"
ATIF_SCHEMA = SHARED / "spec" / "harbor-0.25" / "atif-trajectory.schema.json"
# Debian's Chromium (`playwright install` cannot download browsers here); no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(autouse=True)
def isolated_storage(settings, tmp_path):
    """Blobs and spool files of each test live in its own folder; imports run inline."""
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "blobs")},
        },
    }
    settings.IMPORT_SPOOL_DIR = tmp_path / "spool"
    settings.IMPORTS_IN_THREAD = False  # imports run inline; test_import_in_thread.py covers the thread
    return tmp_path


def migrate_to(target: tuple[str, str] | None = None):
    """Migrate the test database to `target` (the latest when None); the models of that state.

    The graph is loaded anew each time, as `migrate` would load it.
    """
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    targets = [target] if target else executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def assert_every_stored_pack_is_named() -> None:
    """One copy on disk too: a pack whose files a racing import stored first is not left behind."""
    from trials.models import Blob
    from trials.storage.backend import blob_storage
    from trials.storage.blobs import PACKS_FOLDER

    folder = Path(blob_storage().location) / PACKS_FOLDER
    on_disk = {f"{PACKS_FOLDER}/{path.name}" for path in folder.iterdir()}
    assert on_disk == set(Blob.objects.exclude(pack="").values_list("pack", flat=True))


def import_path(path: Path) -> Import:
    """Import a file or folder through the same service the Celery task calls."""
    imp = create_import(origin=Import.Origin.CLI, source_name=path.name, source_path=str(path))
    return run_import(str(imp.pk))


@pytest.fixture
def user(db):
    """A reviewer: reads everything, imports packs, saves comparisons."""
    from benchviewer import roles

    reviewer = get_user_model().objects.create_user("reviewer", password="pw-reviewer-1")
    roles.add_to_group(reviewer, roles.REVIEWER)
    return reviewer


@pytest.fixture
def triager(db):
    from tests.triage_support import make_user  # it imports this module

    return make_user("tina", "triager")


@pytest.fixture
def failed(tmp_path):
    """The demo candidate job imported; its failed trials (errored ones first)."""
    from tests.triage_support import import_demo  # it imports this module

    return import_demo(tmp_path)


@pytest.fixture
def client_logged_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture(scope="module")
def browser():
    """The system Chromium, driven by Playwright, for one test module."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
