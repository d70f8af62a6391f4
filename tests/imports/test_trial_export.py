"""A trial exported as a Harbor trial folder zip: its layout, its manifest, no redacted value, and a round trip."""

from __future__ import annotations

import hashlib
import io
import zipfile

import orjson
import pytest
from django.core.management import call_command

from tests.builders import REFERENCE, atif, demo_jobs, good_steps, import_path, import_trial_dir, make_user
from trials import export
from trials.demo import SECRET
from trials.models import Pack, RuntimeEvent, Step, Trajectory, Trial
from trials.triage import services
from trials.triage.forms import FeedbackForm
from trials.viewer.steps import main_trajectory

pytestmark = pytest.mark.django_db
URL = "/api/commands/export_benchmark_trial/"


def exported(client, trial: Trial) -> zipfile.ZipFile:
    response = client.get(URL, {"trial": trial.pk})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/zip"
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


def members(archive: zipfile.ZipFile) -> dict[str, bytes]:
    """Path inside the top folder -> bytes."""
    return {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}


def file_blocker(user, trial: Trial) -> None:
    data = {"kind": "release-blocker", "category": "runtime", "severity": "P0", "evidence_refs": [f"trial:{trial.key}"],
            "note": "stops before the verifier"}  # fmt: skip
    form = FeedbackForm(data=data, trial=trial, user=user)
    assert form.is_valid(), form.errors
    services.file_item(user, trial, form.cleaned_data)


def atif_of(client, trial: Trial) -> dict | None:
    """The trial's main trajectory as the API serves it (or as the export derives it, with no ATIF file)."""
    main = main_trajectory(trial, list(trial.trajectories.order_by("position", "pk")))
    if main is None:
        return None
    if main.blob is None:
        return export.derived_atif(trial, main)
    response = client.get(f"/api/trials/{trial.pk}/trajectory/")
    return orjson.loads(b"".join(response.streaming_content) if response.streaming else response.content)


def what_counts(client, trial: Trial) -> dict:
    """What must survive the round trip: trajectory JSON, rewards, events and QC refs."""
    return {
        "name": trial.name,
        "status": trial.status,
        "reward": trial.reward,
        "rewards": trial.rewards,
        "atif": atif_of(client, trial),
        "events": list(trial.events.order_by("sequence", "timestamp", "pk").values_list("raw", flat=True)),
    }


def test_the_export_is_a_harbor_trial_folder_with_a_manifest_of_every_file(client, tmp_path):
    call_command("import_packs", str(demo_jobs(tmp_path)), "--no-progress")
    triager = make_user("tina", "triager")
    client.force_login(triager)
    trial = Trial.objects.filter(context_records__redaction_state="masked").distinct().first()
    file_blocker(triager, trial)

    page = client.get(f"/trials/{trial.pk}/").content.decode()
    assert f'href="{URL}?trial={trial.pk}"' in page  # the trial page's "Export trial" button
    files = members(exported(client, trial))

    for path in ("result.json", "agent/trajectory.json", "verifier/reward.json", "verifier/reward-details.json"):
        assert path in files, sorted(files)
    assert any(path.startswith("artifacts/") for path in files)
    manifest = orjson.loads(files["export-manifest.json"])
    listed = {entry["path"]: entry for entry in manifest["files"]}
    assert set(listed) == set(files) - {"export-manifest.json"}
    for path, entry in listed.items():
        assert entry["size"] == len(files[path])
        assert entry["sha256"] == hashlib.sha256(files[path]).hexdigest()
    qc = orjson.loads(files["qc-items.json"])["items"]
    assert [(i["kind"], i["severity"], i["note"]) for i in qc] == [
        ("release-blocker", "P0", "stops before the verifier")
    ]
    redactions = orjson.loads(files["redaction-manifest.json"])
    assert redactions["items"] and all(item["redaction_state"] for item in redactions["items"])
    # The secret is in the pack's raw bytes, and in no byte of the export (every file read unzipped).
    assert SECRET in next(tmp_path.rglob("context-events.jsonl")).read_text()
    for path, data in files.items():
        assert SECRET.encode() not in data, path


def test_the_export_needs_a_login_and_a_trial_id(client, user):
    assert client.get(URL, {"trial": 1}).status_code == 401
    client.force_login(user)
    answer = client.get(URL, {"trial": "x"})
    assert answer.status_code == 400 and "trial" in answer.json()
    assert client.get(URL, {"trial": 999999}).status_code == 404


@pytest.mark.django_db(transaction=True)  # (the empty instance is a flush: on PostgreSQL, outside a transaction)
def test_every_reference_trial_exported_and_imported_into_an_empty_instance_is_the_same(client, tmp_path):
    imp = import_path(REFERENCE)
    assert imp.status == "done", imp.problems
    triager = make_user("tina", "triager")
    client.force_login(triager)
    file_blocker(triager, Trial.objects.filter(status="failed").order_by("pk").first())
    packs_with_trials = set(Pack.objects.filter(trials__isnull=False).values_list("name", flat=True))
    formats = {"agentv", "harbor", "inspect", "lime-agentqc", "openchrome"}
    assert {name.split("/")[1] for name in packs_with_trials} == formats

    before, qc_before = {}, {}
    zips = tmp_path / "exports"
    zips.mkdir()
    for trial in Trial.objects.order_by("pk"):
        archive = exported(client, trial)
        (zips / f"trial-{trial.pk}.zip").write_bytes(archive.fp.getvalue())  # type: ignore[union-attr]
        before[trial.key] = what_counts(client, trial)
        qc_before[trial.key] = orjson.loads(members(archive)["qc-items.json"])["items"]
    assert any(qc_before.values()) and any(s["events"] for s in before.values())

    call_command("flush", interactive=False)  # an empty instance
    assert not Trial.objects.exists()
    again = import_path(zips)
    assert again.status == "done", again.problems
    assert [o for o in again.outcomes if o["outcome"] == "rejected"] == []
    client.force_login(make_user("rita", "reviewer"))

    after = {trial.key: trial for trial in Trial.objects.all()}
    assert len(after) == len(before)
    for key, expected in before.items():
        trial = after.get(key) or after[f"harbor:{key}"]  # (a trial of another format keeps its key after `harbor:`)
        assert what_counts(client, trial) == expected, key
        assert trial.documents.get("qc_items", []) == qc_before[key], key


def test_a_trial_held_only_as_rows_is_exported_from_them_and_imports_back(
    client, user, tmp_path, django_assert_max_num_queries
):
    path = tmp_path / "trajectory.json"
    path.write_bytes(orjson.dumps(atif(good_steps() * 30)))
    trial = import_trial_dir(path)
    steps = [step.raw for step in Step.objects.filter(trial=trial).order_by("index")]
    # As a trial written live holds it: no pack, no ATIF file, only rows (step bodies, events sent to it).
    Trajectory.objects.filter(trial=trial).update(blob=None)
    Trial.objects.filter(pk=trial.pk).update(pack=None, rewards={"reward": 0.5}, reward=0.5, status="failed")
    sent = [{"type": "tool.call.completed", "eventId": f"e{n}", "sequence": n, "sessionId": "live-1"} for n in (2, 1)]
    for event in sent:
        RuntimeEvent.objects.create(trial=trial, type=event["type"], event_id=event["eventId"],
                                    sequence=event["sequence"], raw=event)  # fmt: skip
    client.force_login(user)

    with django_assert_max_num_queries(20):  # (as many for 60 steps as for 6: no query per step or file)
        archive = exported(client, trial)
    files = members(archive)
    assert orjson.loads(files["agent/trajectory.json"])["steps"] == steps
    manifest = {f["path"]: f["source"] for f in orjson.loads(files["export-manifest.json"])["files"]}
    assert manifest["agent/trajectory.json"] == manifest["result.json"] == "made from rows"
    assert [orjson.loads(line) for line in files["events.jsonl"].splitlines()] == sorted(
        sent, key=lambda e: e["sequence"]
    )

    (tmp_path / "live.zip").write_bytes(archive.fp.getvalue())  # type: ignore[union-attr]
    again = import_trial_dir(tmp_path / "live.zip")
    assert again.key == f"harbor:{trial.key}"
    assert (again.reward, again.rewards, again.status) == (0.5, {"reward": 0.5}, "failed")
    assert [step.raw for step in Step.objects.filter(trial=again).order_by("index")] == steps
    assert list(again.events.order_by("sequence").values_list("raw", flat=True)) == sorted(
        sent, key=lambda e: e["sequence"]
    )


def test_a_file_changed_after_the_export_is_a_warning_naming_it(client, user, tmp_path):
    path = tmp_path / "trajectory.json"
    path.write_bytes(orjson.dumps(atif(good_steps())))
    trial = import_trial_dir(path)
    client.force_login(user)
    archive = exported(client, trial)
    folder = tmp_path / "unzipped"
    archive.extractall(folder)
    result = next(folder.glob("*/result.json"))
    result.write_bytes(result.read_bytes().replace(b'"trial_name"', b'"note": "edited", "trial_name"'))

    imp = import_path(next(folder.iterdir()))
    assert imp.status == "done"
    warnings = [p for p in imp.problems if "export-manifest.json" in p["file"]]
    assert [(p["severity"], p["message"]) for p in warnings] == [
        ("warning", "result.json is not the file the export wrote (sha256 differs)")
    ]
