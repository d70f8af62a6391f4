from django.db import migrations

from trials.search import create_index, drop_index


def rebuild(apps, schema_editor) -> None:
    drop_index(apps, schema_editor)
    create_index(apps, schema_editor)


class Migration(migrations.Migration):
    """The step index keeps no token positions (detail=none): half the indexing cost."""

    dependencies = [("trials", "0004_step_search_index")]

    operations = [migrations.RunPython(rebuild, migrations.RunPython.noop)]
