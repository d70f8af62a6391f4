import importlib

import django.contrib.postgres.search
import django.db.models.deletion
from django.db import migrations, models

from trials.search import create_index, drop_index

trigger_index = importlib.import_module("trials.migrations.0004_step_search_index")


def back_to_triggers(apps, schema_editor) -> None:
    drop_index(apps, schema_editor)
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
