"""The step text index finds what a scan finds, for needles that start at a word start.

(A needle that starts mid-word is not found through the word index on SQLite: a
trigram index would find it but made imports five times slower. See trials/search.py.)
Steps reach the index after their import (`search.index_pending`); until then a search scans."""

from __future__ import annotations

import re

import orjson
import pytest
from django.db import connection

from tests.conftest import import_path
from tests.test_import_bad_input import atif
from trials import search
from trials.models import Step, Trial

pytestmark = pytest.mark.django_db

MESSAGES = ['Run "pytest -q" now', "unique-needle-42 here", "naïve café", "ab", 'quote " inside', "mixed CASE Text"]
NEEDLES = ['"pytest -q"', "unique-needle-42", "café", "ab", 'quote "', "case text", "zzz", "e"]


def import_trial(folder, messages=MESSAGES) -> Trial:
    steps = [{"step_id": i + 1, "source": "user", "message": m} for i, m in enumerate(messages)]
    folder.mkdir(exist_ok=True)
    (folder / "t.json").write_bytes(orjson.dumps({**atif(steps), "session_id": f"search-{folder.name}"}))
    import_path(folder / "t.json")
    return Trial.objects.order_by("-pk").first()


@pytest.fixture
def trial(tmp_path):
    return import_trial(tmp_path / "one")


def index_is_sound() -> None:
    """FTS5's own check that the index and the step table agree (raises if not)."""
    if search.has_index():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO trials_step_fts(trials_step_fts, rank) VALUES ('integrity-check', 1)")


@pytest.mark.parametrize("indexed", [False, True], ids=["before indexing", "after indexing"])
@pytest.mark.parametrize("needle", NEEDLES)
def test_index_and_scan_agree(trial, needle, indexed):
    if indexed:
        assert search.index_pending() == (1 if search.has_index() else 0)
    indexed = search.is_indexed(trial.pk)
    needle = needle.lower()
    steps = Step.objects.filter(trial=trial)
    found = set(search.matching(steps, needle, indexed=indexed).values_list("index", flat=True))
    # SQLite's word index finds needles that start at a word start; a scan finds them anywhere.
    word_index = indexed and re.match(r"[^\W_]", needle)
    at_word_start = re.compile(r"(?:^|[\W_])" + re.escape(needle)) if word_index else None
    scanned = {
        s.index for s in steps if (at_word_start.search(s.search_text) if at_word_start else needle in s.search_text)
    }
    assert found == scanned


def test_a_new_import_is_searchable_at_once_by_scan_then_through_the_index(trial):
    assert not search.is_indexed(trial.pk)
    assert list(
        search.matching(Step.objects.filter(trial=trial), "needle", indexed=False).values_list("index", flat=True)
    ) == [1]
    search.index_pending()
    assert search.is_indexed(trial.pk) == search.has_index()
    assert list(search.matching(Step.objects.filter(trial=trial), "needle").values_list("index", flat=True)) == [1]
    assert search.index_pending() == 0  # nothing left to do: a second run is a no-op
    index_is_sound()


def test_deleting_trials_indexed_or_not_keeps_the_index_sound(tmp_path, trial):
    search.index_pending()
    later = import_trial(tmp_path / "two", ["another unique-needle-42"])
    assert not search.is_indexed(later.pk)
    later.delete()  # never indexed: the index must not be told to forget its rows
    index_is_sound()
    Trial.objects.all().delete()
    index_is_sound()
    assert not search.matching(Step.objects.all(), "unique-needle-42").exists()


def test_the_index_trigger_survives_every_migration():
    """A migration that rebuilds trials_step on SQLite would drop the trigger without a word."""
    if not search.has_index():
        pytest.skip("the word index is SQLite's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'trials_step'")
        assert [name for (name,) in cursor.fetchall()] == ["trials_step_fts_delete"]
