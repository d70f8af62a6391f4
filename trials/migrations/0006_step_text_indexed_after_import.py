import importlib

import django.contrib.postgres.search
import django.db.models.deletion
from django.db import migrations, models

trigger_index = importlib.import_module("trials.migrations.0004_step_search_index")

# The SQL as it was when this migration was written (trials/search.py may move on; a
# migration must keep doing what it did).
SQLITE_CREATE = [
    """CREATE VIRTUAL TABLE IF NOT EXISTS trials_step_fts USING fts5(
        search_text, content='trials_step', content_rowid='id', tokenize='unicode61', detail=none, columnsize=0)""",
    "INSERT INTO trials_step_fts(trials_step_fts) VALUES ('rebuild')",
]
SQLITE_DROP = trigger_index.SQLITE_DROP  # 0004's triggers and table, frozen there
POSTGRES_CREATE = ["CREATE INDEX IF NOT EXISTS trials_stepwords_words_gin ON trials_stepwords USING gin (words)"]
POSTGRES_DROP = ["DROP INDEX IF EXISTS trials_stepwords_words_gin"]


def create_index(apps, schema_editor) -> None:
    """SQLite: rebuild the index from every step there is (all indexed). PostgreSQL: the GIN index."""
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for sql in SQLITE_DROP + SQLITE_CREATE:
            schema_editor.execute(sql)
        apps.get_model("trials", "Trial").objects.update(step_text_indexed=True)
    elif vendor == "postgresql":
        for sql in POSTGRES_CREATE:  # trials already there are indexed by the next `index_pending`
            schema_editor.execute(sql)


def back_to_triggers(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    for sql in {"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}.get(vendor, []):
        schema_editor.execute(sql)
    trigger_index.create_index(apps, schema_editor)


class Migration(migrations.Migration):
    """Steps are indexed after their import, not as they are written; PostgreSQL gets an index too."""

    dependencies = [("trials", "0005_step_search_detail_none")]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="step_text_indexed",
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name="StepWords",
            fields=[
                (
                    "step",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="trials.step",
                    ),
                ),
                ("words", django.contrib.postgres.search.SearchVectorField()),
                (
                    "trial",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="trials.trial"
                    ),
                ),
            ],
            options={"verbose_name_plural": "step words"},
        ),
        migrations.RunPython(create_index, back_to_triggers),
    ]
