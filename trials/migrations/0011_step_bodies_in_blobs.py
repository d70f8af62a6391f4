"""Step bodies move from a column of the step table to one blob per trajectory (trials.blobs.StepBodies)."""

import hashlib

import django.db.models.deletion
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import migrations, models


def move_bodies_to_blobs(apps, schema_editor):
    Blob = apps.get_model("trials", "Blob")
    Step = apps.get_model("trials", "Step")
    Trajectory = apps.get_model("trials", "Trajectory")
    storage = storages["blobs"]
    for trajectory in Trajectory.objects.filter(step_count__gt=0).iterator():
        bodies, offset, moved = [], 0, []
        for step in Step.objects.filter(trajectory=trajectory).order_by("index").only("pk", "raw_json").iterator():
            body = step.raw_json.encode()
            bodies.append(body)
            moved.append(Step(pk=step.pk, body_offset=offset, size=len(body)))
            offset += len(body)
        if not bodies:
            continue
        data = b"".join(bodies)
        sha = hashlib.sha256(data).hexdigest()
        name = f"{sha[:2]}/{sha[2:4]}/{sha}"
        if not storage.exists(name):
            storage.save(name, ContentFile(data))
        blob, _ = Blob.objects.get_or_create(sha256=sha, defaults={"size": len(data)})
        Step.objects.bulk_update(moved, ["body_offset", "size"], batch_size=500)
        Trajectory.objects.filter(pk=trajectory.pk).update(step_bodies=blob)


class Migration(migrations.Migration):
    dependencies = [
        ("trials", "0010_pack_other_trials"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="body_offset",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="trajectory",
            name="step_bodies",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="trials.blob",
            ),
        ),
        migrations.RunPython(move_bodies_to_blobs, migrations.RunPython.noop),
    ]
