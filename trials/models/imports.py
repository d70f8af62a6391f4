"""Raw bytes and the imports that brought them: Blob, Import, Pack, PackFile."""

from __future__ import annotations

import uuid
from typing import IO

from django.conf import settings
from django.db import models
from django.urls import reverse

from core import locks
from trials.storage.backend import open_blob
from trials.storage.fields import CharField, JSONField


class Blob(models.Model):
    """Content-addressed bytes: the same content is stored once, whoever imports it."""

    sha256 = CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    # Small files are stored together (trials.imports.blobs.store_pack): the storage name of the pack
    # object holding these bytes, from `offset`. Blank: in a file of their own.
    pack = CharField(max_length=60, blank=True, db_index=True)  # (indexed: trials.imports.blobs.remove_unnamed_packs)
    offset = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"

    @property
    def storage_name(self) -> str:
        """The name of the object in the storage that holds these bytes (a pack, or their own)."""
        return self.pack or f"{self.sha256[:2]}/{self.sha256[2:4]}/{self.sha256}"

    def open(self) -> IO[bytes]:
        return open_blob(self)

    def read(self) -> bytes:
        with self.open() as f:
            return f.read()


class Import(models.Model):
    """One request to import: an upload, an API call or a CLI path. Runs as a Celery task."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Origin(models.TextChoices):
        UPLOAD = "upload"
        API = "api"
        CLI = "cli"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    origin = CharField(max_length=10, choices=Origin.choices)
    source_name = CharField(max_length=500)  # file name or path as the user gave it
    source_path = CharField(max_length=2000, blank=True)  # CLI: a path on this machine
    upload = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT)
    status = CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    # One line per pack: {"pack": path, "kind": ..., "outcome": imported|already imported|rejected, ...}
    outcomes = JSONField(default=list)
    problems = JSONField(default=list)  # Problem.as_dict() entries
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.source_name} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("import-detail", args=[self.pk])

    @property
    def rejected_count(self) -> int:
        return sum(1 for o in self.outcomes if o.get("outcome") == "rejected" or o.get("rejected"))

    @property
    def nothing_new(self) -> bool:
        """Done, and every pack was already imported: a re-import, told apart from the first one."""
        packs = [o for o in self.outcomes if o.get("outcome") not in ("skipped", "extracted")]
        return (
            self.status == self.Status.DONE and bool(packs) and all(o["outcome"] == "already imported" for o in packs)
        )

    @property
    def has_trials(self) -> bool:
        """Did any pack bring, find or join a trial? (A wholly rejected upload has none to list.)"""
        return any(o.get(k) for o in self.outcomes for k in ("trials", "already", "joined"))

    @property
    def worker_gone(self) -> bool:
        """Running, but no worker holds it: killed, out of memory, its machine lost (trials/imports/recovery.py)."""
        return self.status == self.Status.RUNNING and bool(locks.unheld([str(self.pk)]))

    def pack_ids(self) -> set[int]:
        """The packs this import read: the ones it stored first, and the ones it found already stored."""
        named = {o["pack_id"] for o in self.outcomes if isinstance(o.get("pack_id"), int)}
        return named | set(Pack.objects.filter(first_import=self).values_list("pk", flat=True))


class Pack(models.Model):
    """A detected trial pack (a job dir, a trial dir, a JSON or JSONL file), stored whole.

    `sha256` is the hash of its content (for a folder, of its sorted file list and
    file hashes), so importing the same pack again finds this row and adds nothing.
    """

    class Status(models.TextChoices):
        IMPORTING = "importing"  # rows are being written; a re-import finishes the job
        IMPORTED = "imported"
        REJECTED = "rejected"  # bytes kept, nothing could be read from them

    sha256 = CharField(max_length=64, unique=True)
    kind = CharField(max_length=40)
    name = CharField(max_length=500)
    status = CharField(max_length=10, choices=Status.choices, default=Status.IMPORTING)
    first_import = models.ForeignKey(Import, null=True, on_delete=models.SET_NULL)
    problems = JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    # Trials this pack holds that another pack brought in first, or that its evidence joined.
    other_trials = models.ManyToManyField("trials.Trial", related_name="also_in_packs", blank=True)

    def __str__(self) -> str:
        return f"{self.kind}: {self.name}"

    def all_trials(self) -> models.QuerySet:
        return self.other_trials.model.objects.held_by([self.pk])  # (Trial, whose module imports this one)


class PackFile(models.Model):
    pack = models.ForeignKey(Pack, on_delete=models.CASCADE, related_name="files")
    path = CharField(max_length=1000)
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pack", "path"], name="unique_pack_path")]

    def __str__(self) -> str:
        return self.path
