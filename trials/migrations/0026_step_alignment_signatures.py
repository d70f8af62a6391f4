"""Steps get the hashes that align two trials' trajectories (trials.ingest.signatures).

Steps imported before are signed from their rows: tool calls, results' previews, message text.
"""

from django.db import migrations, models

import trials.storage.fields
from trials.ingest.signatures import step_signature

BATCH = 2000


def sign_stored_steps(apps, schema_editor):
    Step = apps.get_model("trials", "Step")
    ToolCall = apps.get_model("trials", "ToolCall")
    ObservationResult = apps.get_model("trials", "ObservationResult")
    Trajectory = apps.get_model("trials", "Trajectory")
    for trajectory_id in Trajectory.objects.values_list("pk", flat=True).iterator():
        chain = ""
        steps = list(Step.objects.filter(trajectory_id=trajectory_id).order_by("index"))
        for start in range(0, len(steps), BATCH):
            batch = steps[start : start + BATCH]
            ids = [step.pk for step in batch]
            calls: dict[int, list] = {}
            for step_id, name, arguments in (
                ToolCall.objects.filter(step_id__in=ids).order_by("pk").values_list("step_id", "function_name", "arguments")
            ):
                calls.setdefault(step_id, []).append((name, arguments))
            results: dict[int, list] = {}
            for step_id, preview in (
                ObservationResult.objects.filter(step_id__in=ids).order_by("pk").values_list("step_id", "preview")
            ):
                results.setdefault(step_id, []).append(preview)
            for step in batch:
                signed = step_signature(
                    step.source, step.message_text, calls.get(step.pk, []), results.get(step.pk, []), chain
                )
                step.align_key, step.signature, step.chain = signed
                chain = signed.chain
            Step.objects.bulk_update(batch, ["align_key", "signature", "chain"])


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0025_trial_list_sort_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="align_key",
            field=trials.storage.fields.CharField(blank=True, max_length=16),
        ),
        migrations.AddField(
            model_name="step",
            name="signature",
            field=trials.storage.fields.CharField(blank=True, max_length=16),
        ),
        migrations.AddField(
            model_name="step",
            name="chain",
            field=trials.storage.fields.CharField(blank=True, max_length=16),
        ),
        migrations.RunPython(sign_stored_steps, migrations.RunPython.noop),
    ]
