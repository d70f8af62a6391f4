"""A text index over steps, so a search costs the same however long the trajectory.

SQLite: an FTS5 word index over `trials_step.search_text` (external content, kept in
step by triggers). It finds the steps that hold every word of the needle, the last one
as a prefix; `search_text` then confirms the exact substring. So a needle that
starts at a word boundary is found through the index; one with no word in it (or on
PostgreSQL, and other databases) is found by a scan. A trigram index would also find
needles that start mid-word, but made imports five times slower (bench/README.md).
"""

from __future__ import annotations

import re

from django.db import connection
from django.db.models.expressions import RawSQL

SQLITE_CREATE = [
    """CREATE VIRTUAL TABLE IF NOT EXISTS trials_step_fts USING fts5(
        search_text, content='trials_step', content_rowid='id', tokenize='unicode61', detail=none, columnsize=0)""",
    """CREATE TRIGGER IF NOT EXISTS trials_step_fts_insert AFTER INSERT ON trials_step BEGIN
        INSERT INTO trials_step_fts(rowid, search_text) VALUES (new.id, new.search_text); END""",
    """CREATE TRIGGER IF NOT EXISTS trials_step_fts_delete AFTER DELETE ON trials_step BEGIN
        INSERT INTO trials_step_fts(trials_step_fts, rowid, search_text)
        VALUES ('delete', old.id, old.search_text); END""",
    """CREATE TRIGGER IF NOT EXISTS trials_step_fts_update AFTER UPDATE OF search_text ON trials_step BEGIN
        INSERT INTO trials_step_fts(trials_step_fts, rowid, search_text)
        VALUES ('delete', old.id, old.search_text);
        INSERT INTO trials_step_fts(rowid, search_text) VALUES (new.id, new.search_text); END""",
    "INSERT INTO trials_step_fts(trials_step_fts) VALUES ('rebuild')",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS trials_step_fts_insert",
    "DROP TRIGGER IF EXISTS trials_step_fts_delete",
    "DROP TRIGGER IF EXISTS trials_step_fts_update",
    "DROP TABLE IF EXISTS trials_step_fts",
]


def create_index(apps, schema_editor) -> None:
    statements = SQLITE_CREATE if schema_editor.connection.vendor == "sqlite" else []
    for sql in statements:
        schema_editor.execute(sql)


def drop_index(apps, schema_editor) -> None:
    statements = SQLITE_DROP if schema_editor.connection.vendor == "sqlite" else []
    for sql in statements:
        schema_editor.execute(sql)


WORD = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer keeps as a token


def matching(queryset, needle: str):
    """Steps whose search text contains `needle` (already lower-cased)."""
    exact = queryset.filter(search_text__contains=needle)
    words = WORD.findall(needle)
    if connection.vendor != "sqlite" or not words:
        return exact
    # Every word of the needle, the last one as a prefix; the exact filter above checks order.
    # (detail=none keeps no positions: half the indexing cost, and order is checked anyway.)
    query = " AND ".join(f'"{word}"' for word in words[:-1]) + (" AND " if len(words) > 1 else "") + f'"{words[-1]}"*'
    return exact.filter(id__in=RawSQL("SELECT rowid FROM trials_step_fts WHERE trials_step_fts MATCH %s", [query]))
