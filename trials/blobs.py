"""Content-addressed storage of raw bytes through a Django storage (local folder or S3)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages

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


def store_file(path: Path, sha256: str | None = None, size: int | None = None) -> Blob:
    """Store a file's bytes once, keyed by their sha256, and return its Blob row."""
    if sha256 is None or size is None:
        sha256, size = sha256_of_file(path)
    return Blob.objects.get(pk=store_files([(path, sha256, size)])[sha256])


class _Moved(File):
    """A file a local storage may move into place (as it moves uploads) instead of copying."""

    def __init__(self, file, path: Path):
        super().__init__(file)
        self.path = path

    def temporary_file_path(self) -> str:
        return str(self.path)


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


def store_files(files, move: bool = False) -> dict[str, int]:
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
    local = isinstance(storage, FileSystemStorage)
    folder = Path(storage.location) / PARTIAL_FOLDER if local else None  # (a rename stays on one file system)
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


def copy_to(source, target) -> int:
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
    """What killed imports left in the storage, an hour old or more: unnamed packs (their names,
    removed unless `dry_run`) and half-written copies. Beat runs it hourly; so does `sweep_storage`."""
    removed = remove_unnamed_packs(dry_run=dry_run)
    if not dry_run:
        remove_stale_partials()
    return removed


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


class StepBodies:
    """One trajectory's step bodies (each step's JSON), one after another in one blob: for a trajectory
    whose steps' places in its own file are not known (trials.ingest.atif.step_spans).

    A step row keeps its body's offset and size in that blob, not the body itself: the
    bodies are most of a trajectory's bytes, and writing them into the database (twice, in
    SQLite's WAL) was most of the import of large observations (bench/README.md). The
    same steps give the same bytes, so a re-import stores nothing new.
    """

    def __init__(self, folder: Path):
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
        key = storage._normalize_name(blob.storage_name)  # (the bucket key: the prefix and the name)
        found = storage.bucket.Object(key).get(Range=f"bytes={start}-{start + size - 1}")
        return found["Body"].read()
    with storage.open(blob.storage_name, "rb") as f:
        f.seek(start)
        return f.read(size)


def open_blob(blob: Blob):
    """The blob's bytes as a file: its own file, or its part of a pack read into memory (it is small)."""
    if blob.pack:
        return io.BytesIO(read_range(blob, 0, blob.size))
    return blob_storage().open(blob.storage_name, "rb")
