"""The step text index finds what a scan finds, for needles that start at a word start.

(A needle that starts mid-word is not found through the word index: a trigram index
would find it but made imports five times slower. See trials/search.py.) Steps reach the
index after their import (`search.index_pending`); until then a search scans."""

from __future__ import annotations

import re

import orjson
import pytest
from django.db import connection

from tests.builders import atif, import_path, migrate_to, run_concurrently
from trials import search
from trials.models import Step, StepText, StepWords, Trial

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


def found(trial: Trial, needle: str) -> set[int]:
    trial.refresh_from_db()
    return set(search.matching(trial, needle).values_list("index", flat=True))


def index_is_sound() -> None:
    """SQLite: FTS5's own check that the index and the step table agree (raises if not)."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO trials_step_fts(trials_step_fts, rank) VALUES ('integrity-check', 1)")


@pytest.mark.parametrize("indexed", [False, True], ids=["before indexing", "after indexing"])
@pytest.mark.parametrize("needle", NEEDLES)
def test_index_and_scan_agree(trial, needle, indexed):
    if indexed:
        assert search.index_pending() == 1
    needle = needle.lower()
    # The word index finds needles that start at a word start; a scan finds them anywhere.
    at_word_start = re.compile(r"(?:^|[\W_])" + re.escape(needle)) if indexed and re.match(r"[^\W_]", needle) else None
    written = {
        index
        for index, message in enumerate(MESSAGES)
        if (at_word_start.search(message.lower()) if at_word_start else needle in message.lower())
    }
    assert found(trial, needle) == written


def test_a_new_import_is_searchable_at_once_by_scan_then_through_the_index(trial):
    assert not trial.step_text_indexed
    assert found(trial, "needle") == {1}
    assert search.index_pending() == 1
    trial.refresh_from_db()
    assert trial.step_text_indexed
    assert found(trial, "needle") == {1}
    assert search.index_pending() == 0  # nothing left to do: a second run is a no-op
    index_is_sound()


def test_the_index_really_is_used(trial):
    """A step the index does not know is not found once the trial counts as indexed."""
    search.index_pending()
    text = StepText.objects.get(step__trial=trial, step__index=1)
    text.text += " planted-later"
    text.save(update_fields=["text"])
    assert found(trial, "planted") == set()
    assert set(search.scan(trial, "planted").values_list("index", flat=True)) == {1}  # the scan sees it


def test_indexing_writes_each_steps_search_text_from_its_stored_body(trial):
    assert not StepText.objects.exists()  # the import leaves it to the index
    search.index_pending()
    texts = dict(StepText.objects.values_list("step__index", "text"))
    assert texts == {i: f"{message}\n".lower() for i, message in enumerate(MESSAGES)}  # message, empty reasoning
    assert set(StepText.objects.values_list("trial", flat=True)) == {trial.pk}


def test_deleting_trials_indexed_or_not_keeps_the_index_sound(tmp_path, trial):
    search.index_pending()
    later = import_trial(tmp_path / "two", ["another unique-needle-42"])
    assert not later.step_text_indexed
    later.delete()  # never indexed: the index must not be told to forget its rows
    index_is_sound()
    Trial.objects.all().delete()
    index_is_sound()
    assert not StepWords.objects.exists() and not StepText.objects.exists()


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_keeps_long_words_cut_and_scans_steps_with_too_many(tmp_path):
    long_word = "x" * 400
    many_words = " ".join(f"w{i:06d}" for i in range(80_000))  # > 512 kB of distinct words
    trial = import_trial(tmp_path / "pg", [f"start {long_word} end", many_words, "plain"])
    search.index_pending()
    words = dict(StepWords.objects.filter(trial=trial).values_list("step__index", "words"))
    assert words[1] == search.TOO_MANY_WORDS and "plain" in words[2]
    assert found(trial, "x" * 300) == {0}  # a needle word past the cut: scanned
    assert found(trial, "start " + "x" * 100) == {0}  # a prefix of the long word: through the index
    assert found(trial, "w079999") == {1}  # a step with too many words: scanned, still found


@pytest.mark.django_db(transaction=True)
def test_two_indexing_runs_at_once_index_every_trial_once(tmp_path, monkeypatch):
    for i in range(7):
        import_trial(tmp_path / f"t{i}", [f"message {i}", "shared words"])
    monkeypatch.setattr(search, "CLAIM_BATCH", 2)  # several batches each, so the runs interleave
    done = run_concurrently(2, search.index_pending)
    assert sum(done) == 7  # PostgreSQL: SKIP LOCKED splits them; SQLite: one writer at a time
    assert Trial.objects.filter(step_text_indexed=False).count() == 0
    for trial in Trial.objects.all():
        assert found(trial, "shared") == {1}
    if connection.vendor == "postgresql":
        assert StepWords.objects.count() == Step.objects.count()  # no step twice (it is the key)
    index_is_sound()


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_the_search_text_to_its_own_table_and_back():
    before = ("trials", "0012_remove_step_raw_json")
    old = migrate_to(before)
    texts = {}
    for key, indexed in (("indexed", True), ("not-yet", False)):
        trial = old.get_model("trials", "Trial").objects.create(
            key=key, name=key, source_format="atif", step_text_indexed=indexed
        )
        trajectory = old.get_model("trials", "Trajectory").objects.create(trial=trial, path="t.json", role="main")
        for index in range(2):
            text = f"{key} step {index} unique-needle-{index}" if indexed else ""
            step = old.get_model("trials", "Step").objects.create(
                trajectory=trajectory,
                trial=trial,
                index=index,
                step_id=str(index + 1),
                source="agent",
                search_text=text,
            )
            texts[step.pk] = text
        if indexed and connection.vendor == "sqlite":  # as 0012's index_pending indexed a trial
            with connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO trials_step_fts(rowid, search_text) SELECT id, search_text FROM trials_step"
                    " WHERE trial_id = %s",
                    [trial.pk],
                )
    migrate_to()
    indexed = Trial.objects.get(key="indexed")
    assert dict(StepText.objects.values_list("step_id", "text")) == {pk: t for pk, t in texts.items() if t}
    index_is_sound()
    if connection.vendor == "sqlite":  # (PostgreSQL's words are in StepWords, which the migration leaves alone)
        assert found(indexed, "unique-needle-1") == {1}
    old = migrate_to(before)
    assert dict(old.get_model("trials", "Step").objects.values_list("pk", "search_text")) == texts
    migrate_to()
