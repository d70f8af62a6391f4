"""Live runs (issue 26): a running status, when a runner last reported, derived trajectories, the runner group."""

from django.db import migrations, models


def create_runner_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name="runner")


def remove_runner_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="runner").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("trials", "0023_failure_clusters"),
    ]

    operations = [
        migrations.AlterField(
            model_name="trial",
            name="status",
            field=models.CharField(
                choices=[
                    ("passed", "Passed"),
                    ("failed", "Failed"),
                    ("errored", "Errored"),
                    ("timeout", "Timeout"),
                    ("skipped", "Skipped"),
                    ("unknown", "Unknown"),
                    ("running", "Running"),
                ],
                default="unknown",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="trial",
            name="live_seen_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="trajectory",
            name="derived",
            field=models.BooleanField(default=False),
        ),
        migrations.AddIndex(
            model_name="runtimeevent",
            index=models.Index(fields=["trial", "event_id"], name="trials_runt_trial_i_222871_idx"),
        ),
        migrations.RunPython(create_runner_group, remove_runner_group),
    ]
