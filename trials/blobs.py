"""Content-addressed storage of raw bytes through a Django storage (local folder or S3)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.core.files import File
from django.core.files.storage import Storage, storages

from trials.models import Blob

CHUNK = 1024 * 1024


def blob_storage() -> Storage:
    return storages["blobs"]


def sha256_of_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def save_bytes(path: Path, blob: Blob) -> None:
    """Copy the file into the storage under its content name, unless it is there already."""
    storage = blob_storage()
    if storage.exists(blob.storage_name):
        return
    with open(path, "rb") as f:
        saved = storage.save(blob.storage_name, File(f))
    if saved != blob.storage_name:  # another process stored the same bytes first
        storage.delete(saved)


def store_file(path: Path, sha256: str | None = None, size: int | None = None) -> Blob:
    """Store a file's bytes once, keyed by their sha256, and return its Blob row."""
    if sha256 is None or size is None:
        sha256, size = sha256_of_file(path)
    return Blob.objects.get(pk=store_files([(path, sha256, size)])[sha256])


def store_files(files) -> dict[str, int]:
    """Store many (path, sha256, size) files; sha256 -> Blob id.

    The bytes go to the storage first, then the rows in one insert: a row never names
    bytes that are not stored. Known blobs are found with one query per 500.
    """
    files = list(files)
    shas = sorted({sha for _, sha, _ in files})
    known = _blob_ids(shas)
    new: dict[str, Blob] = {}
    for path, sha, size in files:
        if sha not in known and sha not in new:
            new[sha] = Blob(sha256=sha, size=size)
            save_bytes(path, new[sha])
    Blob.objects.bulk_create(new.values(), batch_size=500, ignore_conflicts=True)  # a racing import may win
    known.update(_blob_ids(sorted(new)))
    return known


def _blob_ids(shas: list[str]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for start in range(0, len(shas), 500):
        ids.update(Blob.objects.filter(sha256__in=shas[start : start + 500]).values_list("sha256", "id"))
    return ids
