"""Raw bytes are stored once per content, and never seen half-written (trials/blobs.py)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from tests.viewer_packs import long_trajectory
from trials import blobs
from trials.blobs import blob_storage, store_file

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

    monkeypatch.setattr(blobs.shutil, "copyfile", cut_short)
    with pytest.raises(OSError):
        store_file(source)
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    folder = Path(blob_storage().path(f"{sha[:2]}/{sha[2:4]}"))
    assert not (folder / sha).exists() and not list(folder.glob("*"))
    assert not list((Path(blob_storage().location) / blobs.PARTIAL_FOLDER).iterdir())  # nor a partial copy
    monkeypatch.setattr(blobs.shutil, "copyfile", real_copy)
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
    from trials.services import create_import
    from trials.tasks import import_pack_task

    partials = Path(blob_storage().location) / blobs.PARTIAL_FOLDER
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
