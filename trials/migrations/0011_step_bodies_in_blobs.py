"""Step bodies move from a column of the step table to one blob per trajectory (trials.blobs.StepBodies)."""

import hashlib
import os
import tempfile
from pathlib import Path

import django.db.models.deletion
from django.core.files import File
from django.core.files.storage import FileSystemStorage, storages
from django.db import migrations, models


def move_bodies_to_blobs(apps, schema_editor):
    Blob = apps.get_model("trials", "Blob")
    Step = apps.get_model("trials", "Step")
    Trajectory = apps.get_model("trials", "Trajectory")
    storage = storages["blobs"]
    local = isinstance(storage, FileSystemStorage)
    folder = Path(storage.location) if local else None  # a rename into place needs the same file system
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        for leftover in folder.glob(".steps-*"):  # of a run of this migration that was killed
            leftover.unlink()
    with_steps = list(Trajectory.objects.filter(steps__isnull=False).values_list("pk", flat=True).distinct())
    for trajectory_pk in with_steps:
        digest, offset, moved = hashlib.sha256(), 0, []
        fd, name = tempfile.mkstemp(dir=folder, prefix=".steps-")
        partial = Path(name)
        try:
            with os.fdopen(fd, "wb") as out:  # streamed: a trajectory's bodies may be hundreds of MB
                steps = Step.objects.filter(trajectory_id=trajectory_pk).order_by("index").only("pk", "raw_json")
                for step in steps.iterator(chunk_size=200):
                    body = step.raw_json.encode()
                    out.write(body)
                    digest.update(body)
                    moved.append(Step(pk=step.pk, body_offset=offset, size=len(body)))
                    offset += len(body)
            sha = digest.hexdigest()
            publish(storage, f"{sha[:2]}/{sha[2:4]}/{sha}", partial, offset)
        finally:
            partial.unlink(missing_ok=True)
        blob, _ = Blob.objects.get_or_create(sha256=sha, defaults={"size": offset})
        Step.objects.bulk_update(moved, ["body_offset", "size"], batch_size=500)
        Trajectory.objects.filter(pk=trajectory_pk).update(step_bodies=blob)


def publish(storage, name: str, partial: Path, size: int) -> None:
    """Put the file under its content name whole: never a cut-short file there, even if this
    migration is killed and run again (a file of the wrong size there is replaced)."""
    if storage.exists(name) and storage.size(name) == size:
        return
    if not isinstance(storage, FileSystemStorage):
        if storage.exists(name):
            storage.delete(name)
        with open(partial, "rb") as f:
            storage.save(name, File(f))  # an object store's PUT is whole or nothing
        return
    target = Path(storage.path(name))
    target.parent.mkdir(parents=True, exist_ok=True)
    if storage.file_permissions_mode is not None:
        os.chmod(partial, storage.file_permissions_mode)
    os.replace(partial, target)


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
