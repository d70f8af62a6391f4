"""Content-addressed storage of raw bytes: each file stored once, as a Blob row, small ones packed."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from django.core.files.storage import FileSystemStorage
from django.db import transaction

from trials.models import Blob
from trials.storage.backend import (
    CHUNK,
    PARTIAL_FOLDER,
    STALE_PARTIAL_SECONDS,
    blob_storage,
    remove_empty_folders,
    remove_stale_partials,
    save_bytes,
    sha256_of_file,
)


def store_file(path: Path, sha256: str | None = None, size: int | None = None) -> Blob:
    """Store a file's bytes once, keyed by their sha256, and return its Blob row."""
    if sha256 is None or size is None:
        sha256, size = sha256_of_file(path)
    return Blob.objects.get(pk=store_files([(path, sha256, size)])[sha256])


# A file smaller than this is stored in a pack with the other new files of its import, not
# in a file of its own: creating a file costs about a millisecond on a local disk (a
# request on S3), more than the bytes of a small file do, and a job is thousands of small
# files (bench/README.md). A packed blob is read whole into memory when opened, so this
# also bounds that.
PACKED_BELOW = 4 * 1024 * 1024


# A pack is closed, and its rows written, once it holds this much: a worker killed while
# storing a job of gigabytes leaves what it stored before for the next attempt.
PACK_BYTES = 256 * 1024 * 1024


PACKS_FOLDER = "packs"


def store_files(files: Iterable[tuple[Path, str, int]], move: bool = False) -> dict[str, int]:
    """Store many (path, sha256, size) files; sha256 -> Blob id.

    The new small files go one after another into pack objects of up to PACK_BYTES, the
    others into files of their own. The bytes go to the storage first, then their rows: a
    row never names bytes that are not stored. Known blobs are found with one query per 500.
    """
    files = list(files)
    shas = sorted({sha for _, sha, _ in files})
    known = _blob_ids(shas)
    new: dict[str, tuple[Path, Blob]] = {}
    for path, sha, size in files:
        if sha not in known and sha not in new:
            new[sha] = (path, Blob(sha256=sha, size=size))
    packs: list[list[tuple[Path, Blob]]] = [[]]
    pack_size = 0
    for path, blob in new.values():
        if blob.size < PACKED_BELOW:
            if pack_size >= PACK_BYTES:
                packs.append([])
                pack_size = 0
            packs[-1].append((path, blob))
            pack_size += blob.size
    written = []
    for pack in packs:
        if len(pack) > 1:
            store_pack(pack)
            written.append(pack[0][1].pack)
            _add_rows([blob for _, blob in pack])
    alone = [(path, blob) for path, blob in new.values() if not blob.pack]
    for path, blob in alone:
        save_bytes(path, blob.storage_name, blob.size, move)
    _add_rows([blob for _, blob in alone])
    stored = _blob_rows(sorted(new))
    named = {pack for _, pack in stored.values()}
    for name in written:
        if name not in named:  # a racing import stored every one of its files first
            blob_storage().delete(name)
    known.update((sha, blob_id) for sha, (blob_id, _) in stored.items())
    return known


def _add_rows(blobs: list[Blob]) -> None:
    Blob.objects.bulk_create(blobs, batch_size=500, ignore_conflicts=True)  # a racing import may win


def store_pack(files: list[tuple[Path, Blob]]) -> None:
    """Copy the files one after another into a new pack object, and set each blob's place in it.

    The pack is written under a temporary name, then put in place whole, before any row
    names it. Its name is new each time: two imports storing the same bytes at once each
    write a pack, and the blob row of one of them wins (the other's bytes are never named).
    """
    storage = blob_storage()
    # (a rename stays on one file system)
    folder = Path(storage.location) / PARTIAL_FOLDER if isinstance(storage, FileSystemStorage) else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    name = f"{PACKS_FOLDER}/{uuid.uuid4().hex}"
    fd, partial = tempfile.mkstemp(dir=folder, prefix="pack-")
    try:
        with os.fdopen(fd, "wb", buffering=0) as out:  # (unbuffered: copy_to writes to its descriptor)
            offset = 0
            for path, blob in files:
                blob.pack, blob.offset = name, offset
                with open(path, "rb") as f:
                    copied = copy_to(f, out)
                if copied != blob.size:
                    raise OSError(f"{path} changed while it was imported: {blob.size} bytes hashed, {copied} copied")
                offset += copied
        save_bytes(Path(partial), name, sum(blob.size for _, blob in files), move=True)
    finally:
        Path(partial).unlink(missing_ok=True)


def _blob_ids(shas: list[str]) -> dict[str, int]:
    return {sha: blob_id for sha, (blob_id, _) in _blob_rows(shas).items()}


def _blob_rows(shas: list[str]) -> dict[str, tuple[int, str]]:
    """sha256 -> (Blob id, its pack) of the ones stored, one query per 500."""
    rows: dict[str, tuple[int, str]] = {}
    for start in range(0, len(shas), 500):
        found = Blob.objects.filter(sha256__in=shas[start : start + 500]).values_list("sha256", "id", "pack")
        rows.update((sha, (blob_id, pack)) for sha, blob_id, pack in found)
    return rows


def sweep_storage(dry_run: bool = False) -> list[str]:
    """What is left in the storage, an hour old or more: packs killed imports left unnamed, then
    folders left empty (their names, removed unless `dry_run`), and half-written copies.
    Beat runs it hourly; so does `manage.py sweep_storage`."""
    removed = remove_unnamed_packs(dry_run=dry_run)
    if not dry_run:
        remove_stale_partials()
    return removed + remove_empty_folders(dry_run=dry_run)


def remove_unnamed_packs(older_than: float = STALE_PARTIAL_SECONDS, dry_run: bool = False) -> list[str]:
    """Pack objects no Blob row names, put in place `older_than` seconds ago or more; their names.

    A worker killed between putting a pack in place and writing its rows leaves one (the
    next attempt stores those files again). The rows follow their pack within moments, and
    a row never comes to name an older pack, so one unnamed this long stays unnamed.
    """
    storage = blob_storage()
    try:
        _, names = storage.listdir(PACKS_FOLDER)
    except FileNotFoundError:  # (a local storage that has stored no pack yet)
        return []
    names = [f"{PACKS_FOLDER}/{name}" for name in names]
    named: set[str] = set()
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        named.update(Blob.objects.filter(pack__in=chunk).values_list("pack", flat=True).distinct())
    cutoff = time.time() - older_than
    removed = []
    for name in names:
        if name in named or storage.get_modified_time(name).timestamp() > cutoff:
            continue
        if not dry_run:
            storage.delete(name)
        removed.append(name)
    return removed


def release_blobs(blob_ids: Iterable[int | None]) -> None:
    """Forget the blobs of these that nothing points to any more (a live trial's segments once compacted,
    the unscrubbed bodies a re-scrub replaced): one query a table per 500. Their rows go now; a pack
    object one alone filled is removed by the storage sweep (remove_unnamed_packs), a file of its
    own once this commits.
    """
    ids = sorted({blob_id for blob_id in blob_ids if blob_id is not None})
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        named: set[int] = set()
        for relation in Blob._meta.related_objects:  # (every row that may point to a blob: files, steps…)
            model = relation.related_model
            assert not isinstance(model, str)  # (resolved once the apps are loaded)
            rows = model._default_manager.filter(**{f"{relation.field.name}__in": chunk})
            named.update(rows.values_list(relation.field.attname, flat=True))
        gone = list(Blob.objects.filter(pk__in=[blob_id for blob_id in chunk if blob_id not in named]))
        Blob.objects.filter(pk__in=[blob.pk for blob in gone]).delete()
        names = [blob.storage_name for blob in gone if not blob.pack]
        transaction.on_commit(functools.partial(_delete_names, names))


def _delete_names(names: list[str]) -> None:
    storage = blob_storage()
    for name in names:
        storage.delete(name)


def copy_to(source: BinaryIO, target: BinaryIO) -> int:
    """Append the whole of one open file to another (in the kernel where it can); the bytes copied."""
    copied = 0
    try:
        while sent := os.sendfile(target.fileno(), source.fileno(), None, CHUNK * 8):
            copied += sent
    except OSError:  # not between these two files here
        source.seek(copied)
        target.seek(0, os.SEEK_END)
        while chunk := source.read(CHUNK):
            copied += len(chunk)
            unwritten = memoryview(chunk)
            while unwritten:  # (an unbuffered write may take part of it)
                unwritten = unwritten[target.write(unwritten) :]
    return copied


class StepBodies:
    """One trajectory's step bodies (each step's JSON), one after another in one blob: for a trajectory
    whose steps' places in its own file are not known (trials.ingest.formats.atif.step_spans).

    A step row keeps its body's offset and size in that blob, not the body itself: the
    bodies are most of a trajectory's bytes, and writing them into the database (twice, in
    SQLite's WAL) was most of the import of large observations (bench/README.md). The
    same steps give the same bytes, so a re-import stores nothing new.
    """

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix="steps-")
        self.path = Path(name)
        self.file = os.fdopen(fd, "wb")  # (not NamedTemporaryFile: its wrapper costs a call per write)
        self.digest = hashlib.sha256()
        self.size = 0

    def add(self, body: bytes) -> int:
        """Append one step's JSON; its offset."""
        offset = self.size
        self.file.write(body)
        self.digest.update(body)
        self.size += len(body)
        return offset

    def store(self) -> int | None:
        """Store what was added as a blob (moved, not copied, on a local disk); its id, or None for no steps."""
        self.file.close()
        try:
            if not self.size:
                return None
            sha = self.digest.hexdigest()
            return store_files([(self.path, sha, self.size)], move=True)[sha]
        finally:
            self.path.unlink(missing_ok=True)

    def discard(self) -> None:
        self.file.close()
        self.path.unlink(missing_ok=True)
