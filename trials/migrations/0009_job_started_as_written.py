from django.db import migrations, models


def from_result(apps, schema_editor):
    """Jobs imported before: a start with no time zone was left only in result.json."""
    Job = apps.get_model("trials", "Job")
    for job in Job.objects.filter(started_at__isnull=True).only("pk", "result").iterator(chunk_size=100):
        written = job.result.get("started_at") if isinstance(job.result, dict) else None
        if written:
            Job.objects.filter(pk=job.pk).update(started_as_written=str(written)[:40])


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0008_trajectory_max_step_tokens"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="started_as_written",
            field=models.CharField(blank=True, max_length=40),
        ),
        migrations.RunPython(from_result, migrations.RunPython.noop),
    ]
