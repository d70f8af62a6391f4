"""Step bodies live in one blob per trajectory, not in the database (trials.blobs.StepBodies)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import migrate_to
from tests.viewer_packs import long_trajectory
from trials.blobs import blob_storage
from trials.models import Step, Trajectory

pytestmark = pytest.mark.django_db


def test_every_step_is_served_from_its_body_as_written_in_the_file(tmp_path):
    trial = long_trajectory(tmp_path, 40, observation_bytes=5_000)
    written = orjson.loads((tmp_path / "long-40.trajectory.json").read_bytes())["steps"]
    steps = list(trial.steps.order_by("index"))
    assert [step.raw for step in steps] == written


def test_the_database_keeps_no_copy_of_the_bodies(tmp_path):
    trial = long_trajectory(tmp_path, 30, observation_bytes=20_000)
    trajectory = trial.trajectories.get()
    sizes = list(trial.steps.order_by("index").values_list("body_offset", "size"))
    # one after another in the blob, which holds nothing else
    assert [offset for offset, _ in sizes] == [sum(size for _, size in sizes[:i]) for i in range(len(sizes))]
    assert trajectory.step_bodies.size == sum(size for _, size in sizes)
    columns = {c.name for c in connection.introspection.get_table_description(connection.cursor(), "trials_step")}
    assert "raw_json" not in columns
    longest = max(len(text) for text in Step.objects.values_list("message_text", flat=True))
    assert longest < 20_000  # no step row holds an observation


def test_an_import_leaves_no_body_files_behind_in_the_spool(tmp_path):
    long_trajectory(tmp_path, 12)
    assert not list(settings.IMPORT_SPOOL_DIR.glob("**/steps-*"))


def test_a_killed_imports_leftovers_in_the_spool_go_when_it_runs_again(tmp_path):
    from trials.blobs import store_file
    from trials.models import Import
    from trials.services import create_import
    from trials.tasks import import_pack_task

    pack = tmp_path / "t.trajectory.json"
    long_trajectory(tmp_path / "gen", 5)  # (writes and imports one; this import is another copy of it)
    pack.write_bytes(next((tmp_path / "gen").glob("*.json")).read_bytes())
    imp = create_import(origin=Import.Origin.UPLOAD, source_name=pack.name, upload=store_file(pack))
    left = settings.IMPORT_SPOOL_DIR / f"import-{imp.pk}-killed"  # a run killed mid-way, its bodies half written
    left.mkdir(parents=True)
    (left / "steps-abc").write_bytes(b"x" * 1000)
    import_pack_task(str(imp.pk))
    assert Import.objects.get(pk=imp.pk).status == "done"
    assert list(settings.IMPORT_SPOOL_DIR.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_bodies_out_of_the_step_table():
    old = migrate_to(("trials", "0010_pack_other_trials"))
    trial = old.get_model("trials", "Trial").objects.create(key="k", name="t", source_format="harbor")
    trajectory = old.get_model("trials", "Trajectory").objects.create(
        trial=trial, path="agent/trajectory.json", role="main", step_count=2
    )
    bodies = [{"step_id": 1, "source": "user", "message": "héllo"}, {"step_id": 2, "source": "agent", "message": "x"}]
    for index, body in enumerate(bodies):
        old.get_model("trials", "Step").objects.create(
            trajectory=trajectory, trial=trial, index=index, step_id=str(index + 1), source=body["source"],
            raw_json=orjson.dumps(body).decode(),
        )  # fmt: skip
    data = b"".join(orjson.dumps(body) for body in bodies)
    sha = hashlib.sha256(data).hexdigest()
    cut_short = Path(blob_storage().path(f"{sha[:2]}/{sha[2:4]}/{sha}"))  # left by a run of it that was killed
    cut_short.parent.mkdir(parents=True, exist_ok=True)
    cut_short.write_bytes(data[:10])
    migrate_to()
    assert [step.raw for step in Step.objects.filter(trial_id=trial.pk).order_by("index")] == bodies
    assert cut_short.read_bytes() == data
    assert Trajectory.objects.get(pk=trajectory.pk).step_bodies is not None
