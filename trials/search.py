"""A text index over steps, so a search costs the same however long the trajectory.

SQLite: an FTS5 word index over `trials_step.search_text` (external content). It finds
the steps that hold every word of the needle, the last one as a prefix; `search_text`
then confirms the exact substring. So a needle that starts at a word boundary is found
through the index; one with no word in it (or on PostgreSQL, and other databases) is
found by a scan. A trigram index would also find needles that start mid-word, but made
imports five times slower (bench/README.md).

The index is filled after the import, not during it: tokenizing the text was half of
a big trajectory's import time. `trials_step_fts_trials` lists the trials whose steps
are in; until a trial is listed, its search scans `search_text`, which finds the same
steps, only slower. (The list is a table of its own, not a column of trials_trial: a
trigger on steps that named trials_trial would break SQLite's rebuild of that table in
a migration.)
"""

from __future__ import annotations

import re

from django.db import connection, transaction
from django.db.models.expressions import RawSQL

SQLITE_CREATE = [
    """CREATE VIRTUAL TABLE IF NOT EXISTS trials_step_fts USING fts5(
        search_text, content='trials_step', content_rowid='id', tokenize='unicode61', detail=none, columnsize=0)""",
    "CREATE TABLE IF NOT EXISTS trials_step_fts_trials (trial_id INTEGER PRIMARY KEY)",
    # An external-content index must only be told to delete rows it holds, or it breaks.
    """CREATE TRIGGER IF NOT EXISTS trials_step_fts_delete AFTER DELETE ON trials_step
        WHEN old.trial_id IN (SELECT trial_id FROM trials_step_fts_trials) BEGIN
        INSERT INTO trials_step_fts(trials_step_fts, rowid, search_text)
        VALUES ('delete', old.id, old.search_text); END""",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS trials_step_fts_insert",
    "DROP TRIGGER IF EXISTS trials_step_fts_delete",
    "DROP TRIGGER IF EXISTS trials_step_fts_update",
    "DROP TABLE IF EXISTS trials_step_fts",
    "DROP TABLE IF EXISTS trials_step_fts_trials",
]


def create_index(apps, schema_editor) -> None:
    """(Re)build the index from every step there is; every trial is then indexed."""
    if schema_editor.connection.vendor != "sqlite":
        return
    for sql in SQLITE_DROP + SQLITE_CREATE:
        schema_editor.execute(sql)
    schema_editor.execute("INSERT INTO trials_step_fts(trials_step_fts) VALUES ('rebuild')")
    schema_editor.execute("INSERT INTO trials_step_fts_trials (trial_id) SELECT id FROM trials_trial")


def drop_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_DROP:
            schema_editor.execute(sql)


def has_index() -> bool:
    return connection.vendor == "sqlite"


def is_indexed(trial_pk: int) -> bool:
    if not has_index():
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM trials_step_fts_trials WHERE trial_id = %s", [trial_pk])
        return cursor.fetchone() is not None


def index_pending(limit: int | None = None) -> int:
    """Add the steps of trials not yet indexed to the index, one transaction per trial.

    Safe to run twice at once: a trial is claimed by the same insert that lists it.
    Returns how many trials this call indexed.
    """
    from trials.models import Trial

    if not has_index():
        return 0
    listed = RawSQL("SELECT trial_id FROM trials_step_fts_trials", [])
    pending = Trial.objects.exclude(pk__in=listed).order_by("pk").values_list("pk", flat=True)
    done = 0
    for trial_pk in list(pending[:limit] if limit else pending):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT OR IGNORE INTO trials_step_fts_trials (trial_id) VALUES (%s)", [trial_pk])
            if cursor.rowcount != 1:
                continue  # another worker indexed it
            cursor.execute(
                "INSERT INTO trials_step_fts(rowid, search_text) SELECT id, search_text FROM trials_step"
                " WHERE trial_id = %s",
                [trial_pk],
            )
        done += 1
    with connection.cursor() as cursor:  # trials deleted since (their steps left the index with them)
        cursor.execute("DELETE FROM trials_step_fts_trials WHERE trial_id NOT IN (SELECT id FROM trials_trial)")
    return done


WORD = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer keeps as a token


def matching(queryset, needle: str, indexed: bool = True):
    """Steps whose search text contains `needle` (already lower-cased).

    `indexed` says the steps' trials are in the index (`is_indexed`); without it, or
    without a word in the needle, or off SQLite, the steps are scanned.
    """
    exact = queryset.filter(search_text__contains=needle)
    words = WORD.findall(needle)
    if not (indexed and has_index() and words):
        return exact
    # Every word of the needle, the last one as a prefix; the exact filter above checks order.
    # (detail=none keeps no positions: half the indexing cost, and order is checked anyway.)
    query = " AND ".join(f'"{word}"' for word in words[:-1]) + (" AND " if len(words) > 1 else "") + f'"{words[-1]}"*'
    return exact.filter(id__in=RawSQL("SELECT rowid FROM trials_step_fts WHERE trials_step_fts MATCH %s", [query]))
