"""A trial exported as a Harbor trial folder zip: its layout, its manifest, no redacted value, and a round trip."""

from __future__ import annotations

import hashlib
import zipfile

import orjson
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from tests.builders import REFERENCE, atif, demo_jobs, good_steps, import_path, import_trial_dir, make_user
from tests.imports.export_helpers import URL, exported, members, same_trial, stored_counts, what_counts
from trials.demo import SECRET
from trials.models import Pack, RuntimeEvent, Step, Trajectory, Trial
from trials.models.qc import QCItem
from trials.triage import services
from trials.triage.forms import FeedbackForm

pytestmark = pytest.mark.django_db
HARBOR_JOB = REFERENCE / "harbor" / "job-thinharness" / "job"


def file_blocker(user, trial: Trial) -> None:
    data = {"kind": "release-blocker", "category": "runtime", "severity": "P0", "evidence_refs": [f"trial:{trial.key}"],
            "note": "stops before the verifier"}  # fmt: skip
    form = FeedbackForm(data=data, trial=trial, user=user)
    assert form.is_valid(), form.errors
    services.file_item(user, trial, form.cleaned_data)


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
    # The format folders; the public runs' 1,500 trials are left out: their native session logs
    # (gemini-cli, mini-swe-agent) do not come back from an export as their trajectory yet.
    for folder in sorted(p for p in REFERENCE.iterdir() if p.is_dir() and not p.name.startswith("public-runs")):
        imp = import_path(folder)
        assert imp.status == "done", imp.problems
    triager = make_user("tina", "triager")
    client.force_login(triager)
    file_blocker(triager, Trial.objects.filter(status="failed").order_by("pk").first())
    packs_with_trials = set(Pack.objects.filter(trials__isnull=False).values_list("name", flat=True))
    formats = {"agentv", "harbor", "inspect", "lime-agentqc", "openchrome", "terminal-bench-1"}
    assert {name.split("/")[0] for name in packs_with_trials} == formats

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
        trial = after[key]  # (found by the key it had: a trial of another format keeps its format's)
        assert what_counts(client, trial) == expected, key
        items = QCItem.objects.filter(trial=trial).order_by("pk").values_list("kind", "severity", "note")
        assert list(items) == [(i["kind"], i["severity"], i["note"]) for i in qc_before[key]], key
        assert "qc_items" not in trial.documents


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
    Trial.objects.filter(pk=trial.pk).delete()  # (this instance without it: the zip brings it back)
    again = import_trial_dir(tmp_path / "live.zip")
    assert again.key == trial.key
    assert (again.reward, again.rewards, again.status) == (0.5, {"reward": 0.5}, "failed")
    assert [step.raw for step in Step.objects.filter(trial=again).order_by("index")] == steps
    assert list(again.events.order_by("sequence").values_list("raw", flat=True)) == sorted(
        sent, key=lambda e: e["sequence"]
    )


@pytest.mark.django_db(transaction=True)  # (the empty instance is a flush: on PostgreSQL, outside a transaction)
def test_an_imported_harbor_trial_is_the_same_trial_after_export_and_import(client, tmp_path):
    assert import_path(HARBOR_JOB).status == "done"
    triager = make_user("tina", "triager")
    client.force_login(triager)
    trial = Trial.objects.get()
    file_blocker(triager, trial)
    before = same_trial(client, trial)
    (tmp_path / "harbor.zip").write_bytes(exported(client, trial).fp.getvalue())  # type: ignore[union-attr]

    call_command("flush", interactive=False)  # an empty instance
    imp = import_path(tmp_path / "harbor.zip")
    assert imp.status == "done" and [p for p in imp.problems if p["severity"] == "error"] == []
    client.force_login(make_user("rita", "reviewer"))
    again = Trial.objects.get()

    assert same_trial(client, again) == before
    job_id = orjson.loads((HARBOR_JOB / "result.json").read_bytes())["id"]
    assert (before["job"][0], before["job"][2]) == (f"harbor:{job_id}", "harbor") and before["dataset"][1]
    assert before["qc_items"][0][:4] == ("release-blocker", "runtime", "", "P0")
    assert again.source == "harbor (imported from an export)" and again.refs["harborTrialResultRef"].endswith(
        "/result.json"
    )


def test_a_harbor_trial_exported_and_imported_where_it_came_from_changes_nothing(client, tmp_path):
    assert import_path(HARBOR_JOB).status == "done"
    triager = make_user("tina", "triager")
    client.force_login(triager)
    trial = Trial.objects.get()
    file_blocker(triager, trial)
    before, counts = same_trial(client, trial), stored_counts()
    (tmp_path / "harbor.zip").write_bytes(exported(client, trial).fp.getvalue())  # type: ignore[union-attr]

    imp = import_path(tmp_path / "harbor.zip")

    assert imp.status == "done" and imp.problems == []
    assert [o["outcome"] for o in imp.outcomes if o["kind"] == "harbor-trial"] == ["already imported"]
    assert stored_counts() == counts and same_trial(client, trial) == before


def tampered(client, tmp_path, change) -> tuple:
    """A live-like trial's export unzipped, `change(folder)` applied, zipped again; (trial, zip, what it was)."""
    path = tmp_path / "trajectory.json"
    path.write_bytes(orjson.dumps(atif(good_steps())))
    trial = import_trial_dir(path)
    Trial.objects.filter(pk=trial.pk).update(reward=0.5, rewards={"reward": 0.5}, status="failed")
    client.force_login(make_user("tina", "triager"))
    file_blocker(User.objects.get(username="tina"), trial)
    folder = tmp_path / "unzipped"
    exported(client, trial).extractall(folder)
    top = next(folder.iterdir())
    change(top)
    bundle = tmp_path / "tampered.zip"
    with zipfile.ZipFile(bundle, "w") as out:
        for file in sorted(top.rglob("*")):
            out.write(file, file.relative_to(folder).as_posix())
    return trial, bundle, same_trial(client, trial)


def edit_member(top) -> None:
    result = top / "result.json"
    result.write_bytes(result.read_bytes().replace(b'"trial_name"', b'"note": "edited", "trial_name"'))


def edit_manifest(top) -> None:
    manifest = top / "export-manifest.json"
    data = orjson.loads(manifest.read_bytes())
    data["files"][0]["sha256"] = "0" * 64
    manifest.write_bytes(orjson.dumps(data))


def add_member(top) -> None:
    (top / "verifier" / "extra.txt").parent.mkdir(exist_ok=True)
    (top / "verifier" / "extra.txt").write_text("slipped in")


@pytest.mark.parametrize(
    ("change", "member", "message"),
    [
        (edit_member, "result.json", "member result.json is not the file the export wrote (sha256 or size differs)"),
        (edit_manifest, "", "is not the file the export wrote (sha256 or size differs)"),
        (add_member, "verifier/extra.txt", "member verifier/extra.txt is in the bundle but not in its manifest"),
    ],
    ids=["a-member-edited", "the-manifest-edited", "a-member-added"],
)
def test_a_tampered_export_is_an_import_error_naming_the_member_and_changes_nothing(
    client, tmp_path, change, member, message
):
    trial, bundle, before = tampered(client, tmp_path, change)
    counts = stored_counts()

    imp = import_path(bundle)  # into the instance it came from: the trial there stays as it was

    errors = [p for p in imp.problems if p["severity"] == "error"]
    assert len(errors) == 1 and errors[0]["file"].endswith("/export-manifest.json"), imp.problems
    assert message in errors[0]["message"] and f"member {member}" in errors[0]["message"]
    assert errors[0]["json_path"].startswith("files") and "nothing already stored changed" in errors[0]["kept"]
    rejected = [o for o in imp.outcomes if o["outcome"] == "rejected"]
    assert len(rejected) == 1 and message in rejected[0]["reason"]
    assert stored_counts() == counts and same_trial(client, trial) == before

    trial.delete()  # an instance without it: the bundle brings no trial either
    import_path(bundle)
    assert not Trial.objects.filter(key=trial.key).exists()
