import importlib

from django.db import migrations

from trials.search import create_index, drop_index

trigger_index = importlib.import_module("trials.migrations.0004_step_search_index")


def back_to_triggers(apps, schema_editor) -> None:
    drop_index(apps, schema_editor)
    trigger_index.create_index(apps, schema_editor)


class Migration(migrations.Migration):
    """Steps are indexed after their import, not by triggers as they are written."""

    dependencies = [("trials", "0005_step_search_detail_none")]

    operations = [migrations.RunPython(create_index, back_to_triggers)]
