"""Raw bytes are stored once per content, and never seen half-written (trials/imports/blobs.py)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.builders import long_trajectory
from trials.imports import blobs
from trials.imports.blobs import store_file
from trials.models import Blob
from trials.storage import backend
from trials.storage.backend import blob_storage

pytestmark = pytest.mark.django_db


def stored_path(blob) -> Path:
    return Path(blob_storage().path(blob.storage_name))


def test_the_same_bytes_are_stored_once_under_their_sha256(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_bytes(b'{"same": true}')
    second.write_bytes(b'{"same": true}')
    blob = store_file(first)
    assert store_file(second).pk == blob.pk
    assert blob.sha256 == hashlib.sha256(b'{"same": true}').hexdigest()
    assert stored_path(blob).read_bytes() == b'{"same": true}'


def test_a_copy_cut_short_leaves_nothing_under_the_content_name(tmp_path, monkeypatch):
    source = tmp_path / "big.json"
    source.write_bytes(b"x" * 100_000)
    real_copy = shutil.copyfile

    def cut_short(src, dst):  # as if the worker died half-way through the copy
        Path(dst).write_bytes(Path(src).read_bytes()[:1000])
        raise OSError("disk went away")

    monkeypatch.setattr(backend.shutil, "copyfile", cut_short)
    with pytest.raises(OSError):
        store_file(source)
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    folder = Path(blob_storage().path(f"{sha[:2]}/{sha[2:4]}"))
    assert not (folder / sha).exists() and not list(folder.glob("*"))
    assert not list((Path(blob_storage().location) / backend.PARTIAL_FOLDER).iterdir())  # nor a partial copy
    monkeypatch.setattr(backend.shutil, "copyfile", real_copy)
    assert stored_path(store_file(source)).read_bytes() == source.read_bytes()  # the next import stores it whole


def test_a_file_cut_short_under_its_content_name_by_an_older_version_is_written_again_whole(tmp_path):
    source = tmp_path / "big.json"
    source.write_bytes(b"y" * 50_000)
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    target = Path(blob_storage().path(f"{sha[:2]}/{sha[2:4]}/{sha}"))
    target.parent.mkdir(parents=True)
    target.write_bytes(b"y" * 4_096)  # Storage.save wrote in place: a worker killed mid-copy left this
    assert stored_path(store_file(source)).read_bytes() == source.read_bytes()


def test_step_bodies_moved_into_the_storage_get_its_file_mode(tmp_path, settings):
    trial = long_trajectory(tmp_path, 5)
    mode = stat.S_IMODE(stored_path(trial.trajectories.get().step_bodies).stat().st_mode)
    assert mode == settings.FILE_UPLOAD_PERMISSIONS  # not the 0600 of the temporary file they were written to


def test_a_partial_copy_a_killed_process_left_goes_with_a_later_import(tmp_path):
    from trials.models import Import
    from trials.queue import create_import
    from trials.tasks import import_pack_task

    partials = Path(blob_storage().location) / backend.PARTIAL_FOLDER
    partials.mkdir(parents=True, exist_ok=True)
    stale, live = partials / f"{'a' * 64}.killed", partials / f"{'b' * 64}.copying"
    stale.write_bytes(b"x" * 1000)  # left by a worker killed in the middle of a copy, two hours ago
    two_hours_ago = time.time() - 2 * 3600
    os.utime(stale, (two_hours_ago, two_hours_ago))
    live.write_bytes(b"y" * 1000)  # another worker's copy, going on now
    pack = tmp_path / "t.trajectory.json"
    long_trajectory(tmp_path / "gen", 5)
    pack.write_bytes(next((tmp_path / "gen").glob("*.json")).read_bytes())
    imp = create_import(origin=Import.Origin.CLI, source_name=pack.name, source_path=str(pack))
    import_pack_task(str(imp.pk))
    assert not stale.exists() and live.read_bytes() == b"y" * 1000


def files_of(folder: Path, contents: list[bytes]) -> list[tuple[Path, str, int]]:
    """Files with these contents, as store_files takes them."""
    files = []
    for index, data in enumerate(contents):
        path = folder / f"file-{index}"
        path.write_bytes(data)
        files.append((path, hashlib.sha256(data).hexdigest(), len(data)))
    return files


def test_a_packs_small_files_are_stored_together_and_each_reads_back_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(blobs, "PACKED_BELOW", 10_000)
    contents = [b'{"a": 1}', b"x" * 5_000, b"", b"y" * 9_999, b"z" * 10_000]  # the last at the limit
    ids = blobs.store_files(files_of(tmp_path, contents))
    stored = {blob.sha256: blob for blob in Blob.objects.filter(pk__in=ids.values())}
    packs = list((Path(blob_storage().location) / "packs").iterdir())
    assert len(packs) == 1 and packs[0].stat().st_size == sum(len(data) for data in contents[:4])
    for data in contents:
        blob = stored[hashlib.sha256(data).hexdigest()]
        assert blob.read() == data
        assert bool(blob.pack) == (len(data) < 10_000)
        assert backend.read_range(blob, 1, 3) == data[1:4]  # nothing of the next file in the pack
    big = stored[hashlib.sha256(contents[-1]).hexdigest()]
    assert stored_path(big).read_bytes() == contents[-1]  # a file of its own
    assert not list((Path(blob_storage().location) / backend.PARTIAL_FOLDER).iterdir())


def test_a_pack_cut_short_is_never_put_in_place_and_no_row_names_it(tmp_path, monkeypatch):
    files = files_of(tmp_path, [b"a" * 1000, b"b" * 1000])
    real_copy = blobs.copy_to

    def dies_on_the_second_file(source, target):
        if source.name.endswith("-1"):
            raise OSError("worker killed")
        return real_copy(source, target)

    monkeypatch.setattr(blobs, "copy_to", dies_on_the_second_file)
    with pytest.raises(OSError, match="worker killed"):
        blobs.store_files(files)
    assert not Blob.objects.exists()
    assert not (Path(blob_storage().location) / "packs").exists()
    assert not list((Path(blob_storage().location) / backend.PARTIAL_FOLDER).iterdir())
    monkeypatch.setattr(blobs, "copy_to", real_copy)
    ids = blobs.store_files(files)  # the next import stores them
    assert [Blob.objects.get(pk=ids[sha]).read() for _, sha, _ in files] == [b"a" * 1000, b"b" * 1000]


def test_a_pack_closes_at_its_size_and_a_kill_in_the_next_keeps_what_was_stored(tmp_path, monkeypatch):
    monkeypatch.setattr(blobs, "PACK_BYTES", 2_500)
    contents = [bytes([65 + i]) * 1000 for i in range(5)]  # packs of 3 and 2 files
    files = files_of(tmp_path, contents)
    real_store = blobs.store_pack
    stored_packs = []

    def killed_in_the_second_pack(pack):
        if stored_packs:
            raise OSError("worker killed")
        stored_packs.append([path for path, _ in pack])
        real_store(pack)

    monkeypatch.setattr(blobs, "store_pack", killed_in_the_second_pack)
    with pytest.raises(OSError, match="worker killed"):
        blobs.store_files(files)
    assert stored_packs == [[path for path, _, _ in files[:3]]]
    assert sorted(Blob.objects.values_list("sha256", flat=True)) == sorted(sha for _, sha, _ in files[:3])
    monkeypatch.setattr(blobs, "store_pack", real_store)
    ids = blobs.store_files(files)  # the next attempt stores only the two others
    assert [Blob.objects.get(pk=ids[sha]).read() for _, sha, _ in files] == contents
    assert len(list((Path(blob_storage().location) / "packs").iterdir())) == 2


def packs_in_storage() -> set[str]:
    folder = Path(blob_storage().location) / blobs.PACKS_FOLDER
    return {f"{blobs.PACKS_FOLDER}/{path.name}" for path in folder.iterdir()} if folder.exists() else set()


def test_a_pack_whose_files_a_racing_import_stored_first_is_removed(tmp_path, monkeypatch):
    files = files_of(tmp_path, [b"a" * 1000, b"b" * 1000])
    real_store = blobs.store_pack
    racing = []

    def another_import_stores_the_same_files_meanwhile(pack):
        real_store(pack)  # this import's pack is in place, its rows not yet written
        if not racing:
            racing.append(None)
            racing[0] = blobs.store_files(files)  # the other import's rows go in first

    monkeypatch.setattr(blobs, "store_pack", another_import_stores_the_same_files_meanwhile)
    ids = blobs.store_files(files)
    assert ids == racing[0]
    assert packs_in_storage() == set(Blob.objects.values_list("pack", flat=True))  # the one that won
    assert len(packs_in_storage()) == 1
    assert [Blob.objects.get(pk=ids[sha]).read() for _, sha, _ in files] == [b"a" * 1000, b"b" * 1000]


def test_the_storage_sweep_removes_only_old_packs_no_row_names(tmp_path, monkeypatch):
    from io import StringIO

    from django.core.management import call_command

    named = blobs.store_files(files_of(tmp_path, [b"a" * 1000, b"b" * 1000]))
    [named_pack] = packs_in_storage()
    unnamed = []
    for age, contents in (("old", [b"c" * 1000, b"d" * 1000]), ("new", [b"e" * 1000, b"f" * 1000])):
        (tmp_path / age).mkdir()
        files = files_of(tmp_path / age, contents)
        blobs.store_pack([(path, Blob(sha256=sha, size=size)) for path, sha, size in files])  # killed: no rows
        [name] = packs_in_storage() - {named_pack, *unnamed}
        unnamed.append(name)
    old_pack, new_pack = unnamed
    two_hours_ago = time.time() - 7200
    for name in (named_pack, old_pack):
        os.utime(blob_storage().path(name), (two_hours_ago, two_hours_ago))

    out = StringIO()
    call_command("sweep_storage", "--dry-run", stdout=out)
    assert f"would remove  {old_pack}" in out.getvalue() and old_pack in packs_in_storage()
    call_command("sweep_storage", stdout=out)
    assert packs_in_storage() == {named_pack, new_pack}  # a fresh one may be an import's, rows to come
    assert [Blob.objects.get(pk=blob_id).read() for blob_id in named.values()] == [b"a" * 1000, b"b" * 1000]


def test_a_file_that_changed_after_it_was_hashed_is_not_stored(tmp_path):
    files = files_of(tmp_path, [b"a" * 1000, b"b" * 1000])
    files[1][0].write_bytes(b"b" * 1500)  # grew between the hashing and the copy
    with pytest.raises(OSError, match="changed while it was imported: 1000 bytes hashed, 1500 copied"):
        blobs.store_files(files)
    assert not Blob.objects.exists()


def test_a_pack_is_written_without_the_kernels_copy_where_it_is_refused(tmp_path, monkeypatch):
    def refused(*args):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(blobs.os, "sendfile", refused)
    contents = [bytes(range(256)) * 9_000, b"second file"]  # the first longer than one chunk read
    ids = blobs.store_files(files_of(tmp_path, contents))
    assert [Blob.objects.get(pk=ids[hashlib.sha256(data).hexdigest()]).read() for data in contents] == contents


def test_a_packed_trajectory_is_served_whole_with_its_length(tmp_path, client_logged_in):
    from tests.builders import candidate_trial_dir, import_trial_dir

    folder = candidate_trial_dir(tmp_path / "demo")
    trial = import_trial_dir(folder)
    trajectory = trial.trajectories.get(path__endswith="agent/trajectory.json")
    assert trajectory.blob.pack  # stored with the trial's other files
    response = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/")
    served = b"".join(response.streaming_content)
    assert served == (folder / "agent" / "trajectory.json").read_bytes()
    assert int(response["Content-Length"]) == len(served)


def test_the_storage_sweep_removes_the_folders_a_removed_file_left_empty(tmp_path):
    stored = []
    for n in range(3):  # (files of their own, not packed: each in folders named by its sha256)
        path = tmp_path / f"{n}.bin"
        path.write_bytes(bytes([n]) * (blobs.PACKED_BELOW + 1))
        stored.append(store_file(path))
    kept, *removed = stored
    root = Path(blob_storage().location)
    for blob in removed:  # as a forgotten blob's file goes (trials.live.service.release_blob)
        blob_storage().delete(blob.storage_name)
    left_empty = {folder for blob in removed for folder in (stored_path(blob).parent, stored_path(blob).parent.parent)}
    left_empty -= {stored_path(kept).parent, stored_path(kept).parent.parent}
    assert left_empty and not any(p.is_file() for folder in left_empty for p in folder.rglob("*"))
    two_hours_ago = time.time() - 7200
    for folder, _, _ in os.walk(root):
        os.utime(folder, (two_hours_ago, two_hours_ago))
    fresh = root / "ff" / "fe"  # an import's, made a moment ago for a file it is about to rename in
    fresh.mkdir(parents=True)

    out = StringIO()
    call_command("sweep_storage", "--dry-run", stdout=out)
    names = {f"{folder.relative_to(root).as_posix()}/" for folder in left_empty}
    assert {line.split("  ")[1] for line in out.getvalue().splitlines() if "  " in line} == names
    assert all(folder.is_dir() for folder in left_empty)
    call_command("sweep_storage", stdout=out)
    assert not any(folder.exists() for folder in left_empty)
    assert f"0 unnamed pack(s) and {len(names)} empty folder(s) removed" in out.getvalue()
    assert Blob.objects.get(pk=kept.pk).read() == bytes([0]) * (blobs.PACKED_BELOW + 1)
    assert fresh.is_dir()
