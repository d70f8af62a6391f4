import django.db.models.deletion
from django.db import migrations, models


# The SQL as it was when this migration was written (trials/search.py may move on; a
# migration must keep doing what it did).
SQLITE_OLD_INDEX = """CREATE VIRTUAL TABLE trials_step_fts USING fts5(
    search_text, content='trials_step', content_rowid='id', tokenize='unicode61', detail=none, columnsize=0)"""
SQLITE_NEW_INDEX = """CREATE VIRTUAL TABLE trials_step_fts USING fts5(
    text, content='trials_steptext', content_rowid='step_id', tokenize='unicode61', detail=none, columnsize=0)"""
REBUILD = "INSERT INTO trials_step_fts(trials_step_fts) VALUES ('rebuild')"


def move_text(apps, schema_editor) -> None:
    """The search text of indexed trials moves to its own table; SQLite's index is rebuilt over it."""
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS trials_step_fts")
    schema_editor.execute(
        "INSERT INTO trials_steptext (step_id, trial_id, text) SELECT s.id, s.trial_id, s.search_text"
        " FROM trials_step s JOIN trials_trial t ON t.id = s.trial_id WHERE t.step_text_indexed"
    )
    if vendor == "sqlite":
        schema_editor.execute(SQLITE_NEW_INDEX)
        schema_editor.execute(REBUILD)


def move_text_back(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS trials_step_fts")
    schema_editor.execute(
        "UPDATE trials_step SET search_text = (SELECT text FROM trials_steptext WHERE step_id = trials_step.id)"
        " WHERE id IN (SELECT step_id FROM trials_steptext)"
    )
    if vendor == "sqlite":
        schema_editor.execute(SQLITE_OLD_INDEX)
        schema_editor.execute(REBUILD)


class Migration(migrations.Migration):
    """A step's search text gets a table of its own, which indexing only inserts into (trials.models.StepText)."""

    dependencies = [
        ("trials", "0012_remove_step_raw_json"),
    ]

    operations = [
        migrations.CreateModel(
            name="StepText",
            fields=[
                (
                    "step",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="search_text",
                        serialize=False,
                        to="trials.step",
                    ),
                ),
                ("text", models.TextField(blank=True)),
                (
                    "trial",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="trials.trial"
                    ),
                ),
            ],
        ),
        migrations.RunPython(move_text, move_text_back),
    ]
