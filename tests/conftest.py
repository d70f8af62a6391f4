from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from hypothesis import HealthCheck, settings

from core import errors
from tests.builders import REFERENCE, free_port, import_demo, make_user, reads_shared

# A verdict never rests on the machine's speed: on a loaded machine Hypothesis's own timing checks (a
# deadline per example, "generating inputs is too slow") failed tests whose every example passed.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

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


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: a marker without a reason fails every run
def pytest_collection_modifyitems(config, items):
    """`sqlite_only("why")`: the test runs on SQLite only; every other test runs on PostgreSQL too
    (`make test-postgres` deselects these with -m). The reason is required, and on another
    database the test is skipped with it rather than failing."""
    for item in items:
        for marker in item.iter_markers("sqlite_only"):
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
            if not isinstance(reason, str) or not reason.strip():
                raise pytest.UsageError(
                    f'{item.nodeid}: say why it runs on SQLite only: @pytest.mark.sqlite_only("why")'
                )
            if connection.vendor != "sqlite":
                item.add_marker(pytest.mark.skip(reason=f"SQLite only: {reason}"))


@pytest.hookimpl(tryfirst=True)  # before skip marks are read: an empty parameter set is one too
def pytest_runtest_setup(item):
    """A test that reads ../shared fails, naming the missing path, instead of running fewer: a
    parameter list globbed from a missing folder is empty, and the suite would pass without it."""
    module = getattr(item, "module", None)
    if module is not None and reads_shared(module, getattr(item, "function", None)) and not REFERENCE.is_dir():
        pytest.fail(
            f"{REFERENCE} is missing: {item.nodeid} reads the reference samples of ../shared "
            "(clone it beside this repository, or set BENCHVIEWER_SHARED to where it is)",
            pytrace=False,
        )


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
    settings.IMPORTS_IN_THREAD = False  # imports run inline; imports/test_import_in_thread.py covers the thread
    return tmp_path


@pytest.fixture(autouse=True)
def celery_config_left_as_found():
    """A test that changes this process's Celery config (eager, broker) undoes it (`on_broker`):
    otherwise every later test of the process runs its tasks on a broker nobody reads."""
    from benchviewer.celery import app

    yield
    left = {key: app.conf.changes[key] for key in ("task_always_eager", "broker_url") if key in app.conf.changes}
    assert not left, f"Celery config left changed: {left} (use tests.builders.on_broker)"


@pytest.fixture(autouse=True)
def own_embedded_worker():
    """Each test gets its own embedded worker: a job an earlier test left on the process's one worker (an
    import, a batch of spans) cannot hold this test's imports queued, however slow the machine."""
    from trials.queue import embedded_worker

    yield
    if embedded_worker.cache_info().currsize:
        embedded_worker().close()
    embedded_worker.cache_clear()


@pytest.fixture
def user(db):
    """A reviewer: reads everything, imports packs, saves comparisons."""
    from core import roles

    reviewer = get_user_model().objects.create_user("reviewer", password="pw-reviewer-1")
    roles.add_to_group(reviewer, roles.REVIEWER)
    return reviewer


@pytest.fixture
def triager(db):
    return make_user("tina", "triager")


@pytest.fixture
def failed(tmp_path):
    """The demo candidate job imported; its failed trials (errored ones first)."""
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


@pytest.fixture
def database_unreachable(transactional_db) -> Iterator[None]:
    """The app's database at an address where nothing answers (SQLite: a file it cannot open)."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/proc/benchviewer-no-such-dir/db.sqlite3"
    else:
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


@pytest.fixture
def fresh_outage(monkeypatch) -> None:
    """This process has seen no database outage before the test's (another test's may still be recent)."""
    monkeypatch.setattr(errors, "DATABASE_OUTAGE", errors.Outage())
