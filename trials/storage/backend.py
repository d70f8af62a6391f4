"""Bytes in the blob storage (a local folder or S3): copied in once, read whole or by range.

No rows here: the models read their bytes through this module (trials.imports.blobs writes the rows)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import IO, TYPE_CHECKING

from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages

if TYPE_CHECKING:  # (the models read their bytes through this module)
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


# Copies on their way into a local storage, in a folder of its own inside it (so the rename
# into place stays on one file system), where one a killed process left can be found.
PARTIAL_FOLDER = ".partial"


STALE_PARTIAL_SECONDS = 3600  # a live copy is written to, or renamed into place, well within this


def save_bytes(path: Path, name: str, size: int, move: bool = False) -> None:
    """Copy (or move) the file into the storage under `name`, unless it is there already."""
    storage = blob_storage()
    if isinstance(storage, FileSystemStorage):
        target = Path(storage.path(name))
        partials = Path(storage.location) / PARTIAL_FOLDER
        save_locally(path, target, size, move, storage.file_permissions_mode, partials)
        return
    if storage.exists(name):
        if storage.size(name) == size:
            return
        storage.delete(name)  # cut short by a crash (Storage.save writes in place): written again
    with open(path, "rb") as f:
        saved = storage.save(name, _Moved(f, path) if move else File(f))
    if saved != name:  # another process stored the same bytes first
        storage.delete(saved)


def save_locally(path: Path, target: Path, size: int, move: bool, mode: int | None, partials: Path) -> None:
    """A local folder's blob: written under a temporary name in `partials`, then renamed into place.

    So a blob is never seen half-written, even after a crash; what a crash leaves in
    `partials` goes with `remove_stale_partials`. One of the wrong size (cut short by a
    crash of a version that wrote in place) is written again. The copy is the kernel's;
    Storage.save's own copy, locks and checks cost more than the rest of the import of a
    job of small files.
    """
    if target.exists() and target.stat().st_size == size:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partials.mkdir(exist_ok=True)
    partial = partials / f"{target.name}.{uuid.uuid4().hex}"
    try:
        if move:
            try:
                os.replace(path, partial)
            except OSError:  # another file system
                shutil.copyfile(path, partial)
        else:
            shutil.copyfile(path, partial)
        if mode is not None:
            os.chmod(partial, mode)
        os.replace(partial, target)  # a racing import's same bytes may be replaced: they are equal
    finally:
        partial.unlink(missing_ok=True)


def remove_stale_partials() -> None:
    """Copies into the local storage that a killed process left half-done, an hour ago or more."""
    storage = blob_storage()
    if not isinstance(storage, FileSystemStorage):
        return
    cutoff = time.time() - STALE_PARTIAL_SECONDS
    try:
        entries = list(os.scandir(Path(storage.location) / PARTIAL_FOLDER))
    except FileNotFoundError:
        return
    for entry in entries:
        try:
            if entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
        except FileNotFoundError:  # renamed into place, or swept by another worker, meanwhile
            pass


def remove_empty_folders(older_than: float = STALE_PARTIAL_SECONDS, dry_run: bool = False) -> list[str]:
    """Folders of a local storage that hold nothing and were last changed `older_than` seconds ago or
    more; their names (removed unless `dry_run`), children before their parents.

    A file of its own lives in folders named by its sha256 (`ab/cd/`); a blob forgotten (the step
    bodies a live POST replaced) leaves them empty: 2,914 after 3,000 one-step POSTs. One changed
    within the hour may be one an import has just made for a file it is about to rename into it.
    """
    storage = blob_storage()
    if not isinstance(storage, FileSystemStorage):
        return []  # (an object store has no folders)
    root = Path(storage.location)
    cutoff = time.time() - older_than
    # Ages read before anything goes: removing a folder changes its parent's.
    changed = {folder: os.stat(folder).st_mtime for folder, _, _ in os.walk(root)}
    gone: set[str] = set()
    for folder, subfolders, files in os.walk(root, topdown=False):
        if Path(folder) in (root, root / PARTIAL_FOLDER) or files or changed.get(folder, time.time()) > cutoff:
            continue
        if any(os.path.join(folder, name) not in gone for name in subfolders):
            continue
        if not dry_run:
            try:
                os.rmdir(folder)
            except OSError:  # something was put in it meanwhile
                continue
        gone.add(folder)
    return sorted(
        (f"{Path(folder).relative_to(root).as_posix()}/" for folder in gone), key=lambda n: (-n.count("/"), n)
    )


class _Moved(File):
    """A file a local storage may move into place (as it moves uploads) instead of copying."""

    def __init__(self, file: IO[bytes], path: Path) -> None:
        super().__init__(file)
        self.path = path

    def temporary_file_path(self) -> str:
        return str(self.path)


def read_range(blob: Blob, offset: int, size: int) -> bytes:
    """`size` bytes of the blob from `offset`: one step's body, out of its trajectory's bodies."""
    size = min(size, blob.size - offset)  # never into the next blob of a pack
    if size <= 0:
        return b""
    start = blob.offset + offset  # (a packed blob's bytes start at its offset in the pack)
    storage = blob_storage()
    if hasattr(storage, "bucket"):
        # S3 (django-storages): its file object downloads the whole object on the first read;
        # a ranged GET fetches only these bytes.
        # (the bucket key: the prefix and the name; S3Storage's own method, not in Storage's stubs)
        key = storage._normalize_name(blob.storage_name)  # type: ignore[attr-defined]
        found = storage.bucket.Object(key).get(Range=f"bytes={start}-{start + size - 1}")
        return found["Body"].read()
    with storage.open(blob.storage_name, "rb") as f:
        f.seek(start)
        return f.read(size)


def open_blob(blob: Blob) -> IO[bytes]:
    """The blob's bytes as a file: its own file, or its part of a pack read into memory (it is small)."""
    if blob.pack:
        return io.BytesIO(read_range(blob, 0, blob.size))
    return blob_storage().open(blob.storage_name, "rb")
