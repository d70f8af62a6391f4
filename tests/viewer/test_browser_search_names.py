"""The search page's Task cell in a real browser, on a real Inspect log (issue 39, Must 8): a long dataset
name stays on one line, never broken inside a word, the whole name in the cell's title."""

from __future__ import annotations

import os
import zipfile

import orjson
import pytest

from tests.builders import PASSWORD, REFERENCE, import_path, make_user
from trials import search

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop in this thread
pytestmark = pytest.mark.browser

LOG = REFERENCE / "public-runs-2" / "docent-sample-eval" / "log.eval"


def dataset_of_log() -> str:
    """The task the log ran ("inspect_evals/luce_intercode_ctf"), from its header."""
    with zipfile.ZipFile(LOG) as log:
        return orjson.loads(log.read("header.json"))["eval"]["task"]


@pytest.mark.parametrize("viewport", [(1280, 800), (1440, 900)])
def test_a_long_dataset_name_stays_on_one_line_whole_in_its_title(browser, live_server, transactional_db, viewport):
    import_path(LOG)
    assert search.index_pending() > 0  # (what the import's worker does after it: the word index)
    make_user("rita", "reviewer")
    width, height = viewport
    page = browser.new_context(base_url=live_server.url, viewport={"width": width, "height": height}).new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto("/search/?q=flag")
    cells = page.locator("#search-hits .task-label")
    assert cells.count() > 3
    dataset = dataset_of_log()
    for n in range(cells.count()):
        cell = cells.nth(n)
        assert dataset in (cell.get_attribute("title") or "")
        shown = cell.locator(".task-dataset")
        line = float(shown.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || e.offsetHeight"))
        box = shown.bounding_box()
        assert box is not None and box["height"] <= line * 1.2, (n, box, line)  # one line, never broken
        text = shown.inner_text()
        assert dataset.rsplit("/", 1)[-1] in text, text  # its own name, whole, beside its task
