from django.db import migrations

# The index as it was first built: filled by triggers as steps were written
# (0006 replaced the triggers with indexing after the import; see trials/search.py).
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
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_CREATE:
            schema_editor.execute(sql)


def drop_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_DROP:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("trials", "0003_qc_groups")]

    operations = [migrations.RunPython(create_index, drop_index)]
