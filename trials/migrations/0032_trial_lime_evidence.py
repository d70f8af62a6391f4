from django.db import migrations, models
from django.db.models import Q


def mark_lime_evidence(apps, schema_editor):
    """Trials imported before: a Lime or Agent QC format, or a runtime correlation, carries the facts."""
    Trial = apps.get_model("trials", "Trial")
    correlated = Q(runtime_correlation__has_any_keys=["sessionId", "threadId", "turnId", "runId"])
    Trial.objects.filter(Q(source_format__in=["lime", "agentqc"]) | correlated).update(lime_evidence=True)


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0031_received_spans"),
    ]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="lime_evidence",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_lime_evidence, migrations.RunPython.noop),
    ]
