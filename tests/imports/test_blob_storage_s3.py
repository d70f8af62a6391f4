"""The blob storage on S3 (django-storages, docs/deploy.md), against moto's S3 in this process.

An import's bytes go to the bucket under their content names, everything served from
them comes back whole, and one step's full view reads its body with a ranged GET instead
of downloading its trajectory's file whole.
"""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys

import boto3
import orjson
import pytest
from django.urls import reverse
from moto import mock_aws

from tests.builders import REPO, long_trajectory
from trials import search
from trials.models import Blob
from trials.storage.backend import blob_storage

pytestmark = pytest.mark.django_db

BUCKET = "benchviewer-blobs"


@pytest.fixture
def bucket(settings, monkeypatch):
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "moto")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        settings.STORAGES = {
            **settings.STORAGES,
            "blobs": {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {"bucket_name": BUCKET, "region_name": "us-east-1", "location": "blobs"},
            },
        }
        yield s3


def object_bytes(s3, blob: Blob) -> bytes:
    return s3.get_object(Bucket=BUCKET, Key=f"blobs/{blob.storage_name}")["Body"].read()


def test_every_imported_byte_is_in_the_bucket_under_its_sha256(bucket, tmp_path, settings):
    trial = long_trajectory(tmp_path, 30, observation_bytes=20_000)
    trajectory = trial.trajectories.get()
    original = (tmp_path / "long-30.trajectory.json").read_bytes()
    assert object_bytes(bucket, trajectory.blob) == original
    assert trajectory.step_bodies == trajectory.blob  # its steps are served from the file itself
    for blob in Blob.objects.all():
        assert hashlib.sha256(object_bytes(bucket, blob)).hexdigest() == blob.sha256
        assert not (settings.DATA_DIR / "blobs" / blob.storage_name).exists()  # not on the local disk
    assert len(bucket.list_objects_v2(Bucket=BUCKET)["Contents"]) == Blob.objects.count() == 1


def test_one_step_is_read_from_the_bucket_with_a_ranged_get(bucket, tmp_path, client_logged_in):
    trial = long_trajectory(tmp_path, 30, observation_bytes=20_000)
    requests = []
    client = blob_storage().connection.meta.client
    client.meta.events.register("before-parameter-build.s3.GetObject", lambda params, **_: requests.append(params))
    step = trial.steps.get(index=17)
    detail = client_logged_in.get(reverse("api-trial-step", args=[trial.pk, 18])).json()
    written = orjson.loads((tmp_path / "long-30.trajectory.json").read_bytes())["steps"][17]
    assert detail["number"] == 18 and detail["message"] == written["message"]
    assert [r.get("Range") for r in requests] == [f"bytes={step.body_offset}-{step.body_offset + step.size - 1}"]
    assert step.size < trial.trajectories.get().step_bodies.size / 10  # a part, not the whole


def test_the_trajectory_and_the_search_index_read_their_bytes_from_the_bucket(bucket, tmp_path, client_logged_in):
    trial = long_trajectory(tmp_path, 30, planted={12: "needle-in-the-bucket"})
    served = b"".join(client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").streaming_content)
    assert orjson.loads(served) == orjson.loads((tmp_path / "long-30.trajectory.json").read_bytes())
    assert search.index_pending() == 1
    trial.refresh_from_db()
    assert set(search.matching(trial, "needle-in-the-bucket").values_list("index", flat=True)) == {12}


def test_the_bucket_comes_from_the_environment_as_docs_deploy_says(tmp_path):
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path),
        "BLOB_STORAGE_BACKEND": "storages.backends.s3.S3Storage",
        "AWS_STORAGE_BUCKET_NAME": "benchviewer-blobs",
        "AWS_S3_ENDPOINT_URL": "https://s3.example.internal",
        "BLOB_STORAGE_PREFIX": "team-a",
    }
    shown = subprocess.run(
        [sys.executable, "-c", "from benchviewer import settings; print(repr(settings.STORAGES['blobs']))"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert ast.literal_eval(shown) == {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": "benchviewer-blobs",
            "endpoint_url": "https://s3.example.internal",
            "location": "team-a",
        },
    }


def test_a_trials_small_files_go_to_the_bucket_in_one_pack_and_a_step_is_a_ranged_get_inside_it(
    bucket, tmp_path, client_logged_in
):
    from tests.builders import candidate_trial_dir, import_trial_dir

    folder = candidate_trial_dir(tmp_path / "demo")
    trial = import_trial_dir(folder)
    keys = [item["Key"] for item in bucket.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert len(keys) == 1 and keys[0].startswith("blobs/packs/")  # one request, not one per file
    for blob in Blob.objects.all():
        assert hashlib.sha256(blob.read()).hexdigest() == blob.sha256
    trajectory = trial.trajectories.get(path__endswith="agent/trajectory.json")
    assert trajectory.blob.offset > 0  # not the pack's first file: the offsets add up
    requests = []
    client = blob_storage().connection.meta.client
    client.meta.events.register("before-parameter-build.s3.GetObject", lambda params, **_: requests.append(params))
    step = trajectory.steps.get(index=1)
    detail = client_logged_in.get(reverse("api-trial-step", args=[trial.pk, 2])).json()
    written = orjson.loads((folder / "agent" / "trajectory.json").read_bytes())["steps"][1]
    assert detail["message"] == written["message"]
    start = trajectory.blob.offset + step.body_offset
    assert [r.get("Range") for r in requests] == [f"bytes={start}-{start + step.size - 1}"]


def test_the_storage_sweep_lists_the_buckets_packs_and_removes_the_ones_no_row_names(bucket, tmp_path):
    from trials.imports import blobs

    files = []
    for index, data in enumerate([b"a" * 1000, b"b" * 1000, b"c" * 1000, b"d" * 1000]):
        path = tmp_path / f"file-{index}"
        path.write_bytes(data)
        files.append((path, hashlib.sha256(data).hexdigest(), len(data)))
    blobs.store_files(files[:2])
    blobs.store_pack([(path, Blob(sha256=sha, size=size)) for path, sha, size in files[2:]])  # killed: no rows
    [named] = set(Blob.objects.values_list("pack", flat=True))
    keys = {obj["Key"] for obj in bucket.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert len(keys) == 2 and f"blobs/{named}" in keys

    assert blobs.remove_unnamed_packs() == []  # put in place moments ago: its rows may be on their way
    [unnamed] = blobs.remove_unnamed_packs(older_than=0)
    assert {obj["Key"] for obj in bucket.list_objects_v2(Bucket=BUCKET)["Contents"]} == {f"blobs/{named}"}
    assert f"blobs/{unnamed}" in keys
    assert [blob.read() for blob in Blob.objects.order_by("offset")] == [b"a" * 1000, b"b" * 1000]
