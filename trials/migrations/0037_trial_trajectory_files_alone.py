from django.db import migrations, models


def mark_trajectory_files_alone(apps, schema_editor):
    """Trials imported before: one of trajectory files alone was keyed `atif:…` (harbor_trajectories)."""
    Trial = apps.get_model("trials", "Trial")
    Trial.objects.filter(key__startswith="atif:").update(trajectory_files_alone=True)


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0036_received_batch"),
    ]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="trajectory_files_alone",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_trajectory_files_alone, migrations.RunPython.noop),
    ]
