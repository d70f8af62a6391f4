from django.db import migrations

from trials.search import create_index, drop_index


class Migration(migrations.Migration):
    dependencies = [("trials", "0003_qc_groups")]

    operations = [migrations.RunPython(create_index, drop_index)]
