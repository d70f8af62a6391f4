import importlib

from django.db import migrations

first_index = importlib.import_module("trials.migrations.0004_step_search_index")


def rebuild(apps, schema_editor) -> None:
    first_index.drop_index(apps, schema_editor)
    first_index.create_index(apps, schema_editor)


class Migration(migrations.Migration):
    """The step index keeps no token positions (detail=none): half the indexing cost."""

    dependencies = [("trials", "0004_step_search_index")]

    operations = [migrations.RunPython(rebuild, migrations.RunPython.noop)]
