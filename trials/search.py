"""A text index over steps, so a search costs the same however long the trajectory.

SQLite: an FTS5 table with the trigram tokenizer over `trials_step.search_text`
(external content, kept in step by triggers). PostgreSQL: a pg_trgm GIN index, which
the planner uses for `LIKE '%…%'`. Needles shorter than a trigram fall back to a scan.
"""

from __future__ import annotations

from django.db import connection
from django.db.models.expressions import RawSQL

SQLITE_CREATE = [
    """CREATE VIRTUAL TABLE IF NOT EXISTS trials_step_fts USING fts5(
        search_text, content='trials_step', content_rowid='id', tokenize='trigram')""",
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
POSTGRES_CREATE = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX IF NOT EXISTS trials_step_search_trgm ON trials_step USING gin (search_text gin_trgm_ops)",
]
POSTGRES_DROP = ["DROP INDEX IF EXISTS trials_step_search_trgm"]


def create_index(apps, schema_editor) -> None:
    statements = {"sqlite": SQLITE_CREATE, "postgresql": POSTGRES_CREATE}.get(schema_editor.connection.vendor, [])
    for sql in statements:
        schema_editor.execute(sql)


def drop_index(apps, schema_editor) -> None:
    statements = {"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}.get(schema_editor.connection.vendor, [])
    for sql in statements:
        schema_editor.execute(sql)


def matching(queryset, needle: str):
    """Steps whose search text contains `needle` (already lower-cased)."""
    if connection.vendor == "sqlite" and len(needle) >= 3:
        phrase = '"' + needle.replace('"', '""') + '"'  # an FTS5 phrase: a substring for trigrams
        return queryset.filter(
            id__in=RawSQL("SELECT rowid FROM trials_step_fts WHERE trials_step_fts MATCH %s", [phrase])
        )
    return queryset.filter(search_text__contains=needle)
