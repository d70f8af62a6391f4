"""The upload page in a real browser (system Chromium via Playwright), on the embedded default:
the form answers at once and the import page follows the import to its end."""

from __future__ import annotations

import os
import subprocess
import threading
from contextlib import contextmanager

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import expect

from core import roles
from tests.builders import write_trial
from trials.models import Trial
from trials.queue import embedded_worker

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, live_server, transactional_db):
    uploader = get_user_model().objects.create_user("uploader", password="pw-uploader-1")
    roles.add_to_group(uploader, roles.REVIEWER)
    client = Client()
    client.force_login(uploader)
    context = browser.new_context(base_url=live_server.url)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    yield context.new_page()
    context.close()


@contextmanager
def uploaded_while_the_worker_is_busy(page, files):
    """Upload on /imports/ while the embedded worker is held: what the page first shows (queued) is certain.

    The worker is let go when the block ends, whatever the block asserted.
    """
    gate = threading.Event()
    embedded_worker().submit(gate.wait, 60)
    try:
        page.goto("/imports/")
        page.set_input_files("input[type=file]", files)
        page.get_by_role("button", name="Import", exact=True).click()
        yield
    finally:
        gate.set()


def test_an_upload_answers_at_once_and_its_page_follows_the_import_to_done(page, settings, tmp_path):
    settings.IMPORTS_IN_THREAD = True
    trial = write_trial(tmp_path / "src")
    archive = tmp_path / "trial.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(trial.parent), trial.name], check=True)

    with uploaded_while_the_worker_is_busy(page, str(archive)):
        expect(page.locator("#import-status")).to_have_text("queued")
        expect(page.locator("#import-trials")).to_be_hidden()
    expect(page.locator("#import-status")).to_have_text("done", timeout=30_000)  # the page polls the API
    expect(page.locator("#import-count")).to_have_text("1 / 1")
    expect(page.locator("#import-outcomes tbody")).to_contain_text("imported")
    steps = Trial.objects.get().step_count
    expect(page.locator("#import-outcomes tbody")).to_contain_text(f"1 trial · {steps} steps")  # as the server draws it
    assert Trial.objects.get().name == trial.name
    page.locator("#import-outcomes tbody a", has_text="1 trial").click()  # drawn by the poll, not the server
    expect(page.locator("#trial-rows, table").first).to_contain_text(trial.name)
    page.go_back()
    page.get_by_role("link", name="The trials of this import →").click()
    expect(page.locator("#from-import")).to_contain_text("trial.tar.gz")


def test_several_uploads_at_once_are_followed_to_done_on_the_imports_list(page, settings, tmp_path):
    settings.IMPORTS_IN_THREAD = True
    archives = []
    for name in ("task-a__AAAAAAA", "task-b__BBBBBBB"):
        trial = write_trial(tmp_path / "src", name)
        archives.append(tmp_path / f"{name}.tar.gz")
        subprocess.run(["tar", "-czf", str(archives[-1]), "-C", str(trial.parent), trial.name], check=True)

    with uploaded_while_the_worker_is_busy(page, [str(a) for a in archives]):
        expect(page.locator("tr.import-row [data-field=status]")).to_have_text(["queued", "queued"])
    statuses = page.locator("tr.import-row [data-field=status]")
    expect(statuses).to_have_text(["done", "done"], timeout=30_000)  # the list polls each import
    expect(page.locator("tr.import-row [data-field=count]")).to_have_text(["1 / 1", "1 / 1"])
    assert Trial.objects.count() == 2


def test_a_rejected_upload_says_so_beside_done_with_its_badges_and_empty_tables_kept(page, settings, tmp_path):
    settings.IMPORTS_IN_THREAD = True
    broken = tmp_path / "broken.json"
    broken.write_bytes(b'{"schema_version": "ATIF-v1.6", "steps": [')
    with uploaded_while_the_worker_is_busy(page, str(broken)):  # the page polls from "queued"
        expect(page.locator("#import-status")).to_have_text("queued")
        expect(page.locator("#import-rejected")).to_be_hidden()
    expect(page.locator("#import-status")).to_have_text("done", timeout=30_000)
    expect(page.locator("#import-rejected")).to_have_text("1 rejected")
    expect(page.locator("#import-rejected")).to_be_visible()
    expect(page.locator("#import-outcomes tbody .badge.rejected")).to_have_text("rejected")
    expect(page.locator("#import-problems tbody .badge.error")).to_have_text("error")
    expect(page.locator("#import-problems tbody")).to_contain_text("broken.json")
    expect(page.locator("#import-trials")).to_be_hidden()  # no trial to list, so no link to an empty list
    page.reload()  # and the server's own rendering agrees
    expect(page.locator("#import-trials")).to_be_hidden()
    page.goto("/imports/")
    expect(page.locator("tr.import-row [data-field=rejected]")).to_have_text("1 rejected")
