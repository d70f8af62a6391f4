"""Where a step's JSON is served from: its place in the stored trajectory file (atif.step_spans), or,
when that cannot be told (a streamed file, an embedded subagent), a copy in a blob of the trajectory's
own (trials.imports.blobs.StepBodies). Never the database."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import import_path, long_trajectory, migrate_to
from trials.ingest.formats import atif
from trials.models import Blob, Step, Trajectory
from trials.storage.backend import blob_storage

pytestmark = pytest.mark.django_db


def test_every_step_is_served_from_its_body_as_written_in_the_file(tmp_path):
    trial = long_trajectory(tmp_path, 40, observation_bytes=5_000)
    written = orjson.loads((tmp_path / "long-40.trajectory.json").read_bytes())["steps"]
    steps = list(trial.steps.order_by("index"))
    assert [step.raw for step in steps] == written


def test_steps_are_served_from_their_place_in_the_stored_file_with_no_copy(tmp_path):
    trial = long_trajectory(tmp_path, 30, observation_bytes=20_000)
    trajectory = trial.trajectories.get()
    file_bytes = (tmp_path / "long-30.trajectory.json").read_bytes()
    written = orjson.loads(file_bytes)["steps"]
    assert trajectory.step_bodies == trajectory.blob and Blob.objects.count() == 1
    spans = trial.steps.order_by("index").values_list("body_offset", "size")
    assert [orjson.loads(file_bytes[offset : offset + size]) for offset, size in spans] == written
    columns = {c.name for c in connection.introspection.get_table_description(connection.cursor(), "trials_step")}
    assert "raw_json" not in columns
    longest = max(len(text) for text in Step.objects.values_list("message_text", flat=True))
    assert longest < 20_000  # no step row holds an observation


def test_a_streamed_file_keeps_a_copy_of_its_steps_one_after_another(tmp_path, monkeypatch):
    monkeypatch.setattr(atif, "STREAM_THRESHOLD", 1_000)  # (streamed: where each step lies is not read)
    trial = long_trajectory(tmp_path, 30, observation_bytes=2_000)
    trajectory = trial.trajectories.get()
    written = orjson.loads((tmp_path / "long-30.trajectory.json").read_bytes())["steps"]
    assert [step.raw for step in trial.steps.order_by("index")] == written
    sizes = list(trial.steps.order_by("index").values_list("body_offset", "size"))
    # one after another in the blob, which holds nothing else
    assert [offset for offset, _ in sizes] == [sum(size for _, size in sizes[:i]) for i in range(len(sizes))]
    assert trajectory.step_bodies != trajectory.blob
    assert trajectory.step_bodies.size == sum(size for _, size in sizes)


STEPS = [
    {"step_id": 1, "source": "user", "message": 'héllo "steps": [', "extra": {"steps": [9]}},
    {"step_id": 2, "source": "agent", "message": "ok", "tool_calls": [], "metrics": {"prompt_tokens": 5}},
    {"step_id": 3, "source": "agent", "message": "ok"},  # the same bytes as none before it
]


def pretty(steps: list) -> bytes:
    return json.dumps({"schema_version": "ATIF-v1.6", "agent": {"name": "a"}, "steps": steps}, indent=2).encode()


@pytest.mark.parametrize(
    "file_bytes, served",
    [
        pytest.param(pretty(STEPS), STEPS, id="indented"),
        pytest.param(b"\xef\xbb\xbf" + orjson.dumps({"steps": STEPS, "agent": {}}), STEPS, id="byte-order-mark"),
        pytest.param(b'{"steps": [{"step_id": 1}], "agent": {}, "steps" :\r\n[ ' + orjson.dumps(STEPS)[1:] + b"}",
                     STEPS, id="steps-written-twice"),
        pytest.param(orjson.dumps({"agent": {}, "steps": [STEPS[2], STEPS[2]]}), [STEPS[2], STEPS[2]], id="twins"),
        pytest.param(pretty([STEPS[0], "not a step", STEPS[2]]), [STEPS[0], "not a step", STEPS[2]],
                     id="not-an-object"),
    ],
)  # fmt: skip
def test_each_step_is_served_from_its_own_bytes_in_the_file(tmp_path, file_bytes, served):
    """However the file is written: every step's span parses to the step the file holds there."""
    path = tmp_path / "t.trajectory.json"
    path.write_bytes(file_bytes)
    import_path(path)
    trajectory = Trajectory.objects.get()
    assert trajectory.step_bodies == trajectory.blob
    assert [step.raw for step in Step.objects.order_by("index")] == served


def test_a_step_that_is_not_an_object_opens_as_the_row_the_importer_made(tmp_path, client_logged_in):
    path = tmp_path / "t.trajectory.json"
    path.write_bytes(pretty([STEPS[0], ["not", "a", "step"]]))
    import_path(path)
    step = Step.objects.get(index=1)
    assert (step.step_id, step.source) == ("", "invalid")  # no id invented for it
    detail = client_logged_in.get(reverse("api-trial-step", args=[step.trial_id, 2])).json()
    assert detail["extra"] == {"invalid": ["not", "a", "step"]} and detail["source"] == "invalid"
    assert detail["message"] == '(not a step object: ["not", "a", "step"])'
    page = client_logged_in.get(reverse("trial-detail", args=[step.trial_id])).content.decode()
    assert "id (none)</span>" in page
    assert "(not a step object: [&quot;not&quot;, &quot;a&quot;, &quot;step&quot;])" in page


def test_an_embedded_subagent_keeps_a_copy_of_its_steps(tmp_path):
    sub = {"schema_version": "ATIF-v1.7", "session_id": "sub", "agent": {"name": "helper"}, "steps": STEPS[1:]}
    path = tmp_path / "t.trajectory.json"
    path.write_bytes(pretty(STEPS[:1])[:-1] + b', "subagent_trajectories": [' + orjson.dumps(sub) + b"]}")
    import_path(path)
    main, embedded = Trajectory.objects.order_by("position")
    assert main.step_bodies == main.blob and embedded.blob == main.blob
    assert embedded.step_bodies != embedded.blob
    assert [step.raw for step in embedded.steps.order_by("index")] == STEPS[1:]


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)  # (orjson refuses lone surrogates)


@given(
    steps=st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT,
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
            max_leaves=8,
        ),
        max_size=6,
    ),
    indent=st.sampled_from([None, 1, 4]),
    before=st.lists(TEXT, max_size=3),
)
def test_spans_parse_back_to_the_steps_orjson_reads(steps, indent, before):
    file_bytes = json.dumps({**{f"k{i}": v for i, v in enumerate(before)}, "steps": steps}, indent=indent).encode()
    spans = atif.step_spans(file_bytes, len(steps))
    assert spans is not None
    assert [orjson.loads(file_bytes[offset : offset + size]) for offset, size in spans] == orjson.loads(file_bytes)[
        "steps"
    ]


def test_an_import_leaves_no_body_files_behind_in_the_spool(tmp_path, monkeypatch):
    monkeypatch.setattr(atif, "STREAM_THRESHOLD", 1_000)
    long_trajectory(tmp_path, 12)
    assert not list(settings.IMPORT_SPOOL_DIR.glob("**/steps-*"))


def test_a_killed_imports_leftovers_in_the_spool_go_when_it_runs_again(tmp_path):
    from trials.imports.blobs import store_file
    from trials.models import Import
    from trials.queue import create_import
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
