"""Bad input gets a clear error that says where, and loses nothing."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError

from tests.builders import atif, good_steps, import_path, write_trial
from trials.imports.pack_write import REPORTED_PER_FILE
from trials.imports.rows import write_trial_children
from trials.ingest.formats import atif as atif_module
from trials.models import Blob, Configuration, Import, Pack, PackFile, Step, Task, Trajectory, Trial

pytestmark = pytest.mark.django_db


def problems_of(imp, severity: str = "error") -> list[dict]:
    return [p for p in imp.problems if p["severity"] == severity]


def test_malformed_json_is_rejected_with_file_and_line_and_its_bytes_kept(tmp_path):
    path = tmp_path / "pack.json"
    path.write_bytes(b'{\n  "benchmark": {"taskId": "t1",\n  "trialId": }\n}\n')
    imp = import_path(path)
    assert imp.outcomes[0]["outcome"] == "rejected"
    [problem] = problems_of(imp)
    assert problem["file"] == "pack.json" and problem["line"] == 3
    assert "malformed JSON" in problem["message"] and "column 14" in problem["message"] and problem["kept"]
    assert Blob.objects.filter(sha256=hashlib.sha256(path.read_bytes()).hexdigest()).exists()
    assert Pack.objects.get().status == "rejected"


def test_json_that_ends_too_early_is_placed_on_its_last_line_not_the_one_after(tmp_path):
    path = tmp_path / "pack.json"
    path.write_bytes(b'{\n  "benchmark": {"taskId": "t1",\n  "trialId": \n')  # cut short, a newline at the end
    [problem] = problems_of(import_path(path))
    assert problem["line"] == 3 and "unexpected end of data, column 13" in problem["message"]


def test_a_jsonl_line_cut_short_is_reported_on_its_own_line(tmp_path):
    path = tmp_path / "events.jsonl"
    event = {"type": "turn.submitted", "eventId": "e1", "sessionId": "s1"}
    path.write_bytes(orjson.dumps(event) + b'\n{"type": "turn.submitted", "eventId": \n' + orjson.dumps(event) + b"\n")
    imp = import_path(path)
    [problem] = [p for p in imp.problems if "malformed" in p["message"]]
    assert problem["line"] == 2


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_named_as_not_json(tmp_path, literal):
    steps = good_steps()
    steps[0]["extra"] = {"score": "LITERAL"}
    (tmp_path / "t.json").write_bytes(orjson.dumps(atif(steps)).replace(b'"LITERAL"', literal.encode()))
    imp = import_path(tmp_path / "t.json")
    [problem] = problems_of(imp)
    assert problem["line"] == 1 and "NaN and Infinity are not JSON" in problem["message"]


def test_non_sequential_step_ids_are_flagged_on_a_kept_trajectory(tmp_path):
    steps = good_steps()
    steps[1]["step_id"] = 5
    write_trial(tmp_path / "job", steps=steps)
    import_path(tmp_path / "job" / "task-a__AAAAAAA")
    trajectory = Trajectory.objects.get()
    assert Step.objects.count() == 2
    [problem] = [p for p in trajectory.problems if p["severity"] == "error"]
    assert problem["json_path"] == "steps[1].step_id"
    assert "expected 2" in problem["message"]
    assert not trajectory.is_valid


def test_a_kept_trajectorys_schema_violations_are_in_the_import_report_and_printed(tmp_path):
    steps = good_steps()
    steps[1]["step_id"] = 5
    write_trial(tmp_path / "job", steps=steps)
    out, err = io.StringIO(), io.StringIO()
    call_command("import_packs", str(tmp_path / "job" / "task-a__AAAAAAA"), "--no-progress", stdout=out, stderr=err)
    imp = Import.objects.get()
    [problem] = problems_of(imp)
    assert problem["file"] == "task-a__AAAAAAA/agent/trajectory.json" and problem["json_path"] == "steps[1].step_id"
    assert "error task-a__AAAAAAA/agent/trajectory.json steps[1].step_id: " in err.getvalue()
    assert "imported" in out.getvalue()


def test_the_import_report_lists_the_first_problems_of_a_file_and_counts_the_rest(tmp_path):
    steps = [{"step_id": i + 1, "source": "user", "message": "hi", "shiny": True} for i in range(50)]
    write_trial(tmp_path / "job", steps=steps)
    imp = import_path(tmp_path / "job" / "task-a__AAAAAAA")
    assert len(Trajectory.objects.get().problems) == 50  # every one kept with the file
    unknown = [p for p in imp.problems if "unknown field" in p["message"]]
    assert len(unknown) == REPORTED_PER_FILE
    assert any(f"and {50 - REPORTED_PER_FILE} more problems" in p["message"] for p in imp.problems)


def test_unsafe_archive_members_are_printed_by_the_command(tmp_path):
    archive = tmp_path / "hostile.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../evil.json", orjson.dumps(atif(good_steps())))
        zf.writestr("good.json", orjson.dumps(atif(good_steps())))
    err = io.StringIO()
    call_command("import_packs", str(archive), "--no-progress", stdout=io.StringIO(), stderr=err)
    assert "error hostile.zip ../../evil.json: unsafe archive member skipped" in err.getvalue()


@pytest.mark.parametrize("version, flagged", [("ATIF-v1.5", True), ("ATIF-v1.7", False)])
def test_a_missing_session_id_is_an_error_up_to_v1_6(tmp_path, version, flagged):
    data = atif(good_steps(), version=version)
    del data["session_id"]
    (tmp_path / "t.json").write_bytes(orjson.dumps(data))
    import_path(tmp_path / "t.json")
    paths = [p["json_path"] for p in Trajectory.objects.get().problems if p["severity"] == "error"]
    assert ("session_id" in paths) is flagged


@pytest.mark.parametrize("indent", [False, True], ids=["one line", "indented"])
def test_a_streamed_trajectory_broken_half_way_is_rejected_with_the_step_and_line_it_broke_in(
    tmp_path, monkeypatch, indent
):
    monkeypatch.setattr(atif_module, "STREAM_THRESHOLD", 100)  # stream this small file as if it were huge
    steps = good_steps() + [{"step_id": 3, "source": "agent", "message": "fine"}]
    text = orjson.dumps(atif(steps), option=orjson.OPT_INDENT_2 if indent else 0).decode()
    broken = text.replace('"fine"', '"fine",,')
    (tmp_path / "t.json").write_text(broken)
    imp = import_path(tmp_path / "t.json")
    [problem] = problems_of(imp)
    assert problem["file"] == "t.json" and problem["json_path"] == "steps[2].message"  # just after it
    assert "malformed JSON" in problem["message"]
    expected_line = next(n for n, line in enumerate(broken.splitlines(), 1) if ",," in line)
    assert problem["line"] == expected_line and (expected_line > 1) is indent


def test_unknown_fields_are_flagged_at_every_level_and_kept(tmp_path):
    data = atif(good_steps(), version="ATIF-v1.8")
    data["agent"]["team"] = "x"
    data["final_metrics"] = {"total_steps": 2, "total_vibes": 1}
    step = data["steps"][1]
    step["metrics"] = {"prompt_tokens": 3, "joules": 9}
    step["tool_calls"][0]["retries"] = 2
    step["observation"]["results"][0]["exit"] = 0
    step["observation"]["results"][0]["subagent_trajectory_ref"] = [{"trajectory_id": "s", "url": "u"}]
    step["message"] = [{"type": "image", "source": {"media_type": "image/png", "path": "a.png", "dpi": 72}}]
    (tmp_path / "t.json").write_bytes(orjson.dumps(data))
    import_path(tmp_path / "t.json")
    trajectory = Trajectory.objects.get()
    flagged = {p["json_path"] for p in trajectory.problems if p["message"].startswith("unknown field")}
    assert flagged == {
        "agent.team",
        "final_metrics.total_vibes",
        "steps[1].metrics.joules",
        "steps[1].tool_calls[0].retries",
        "steps[1].observation.results[0].exit",
        "steps[1].observation.results[0].subagent_trajectory_ref[0].url",
        "steps[1].message[0].source.dpi",
    }
    assert all(p["severity"] == "warning" for p in trajectory.problems if p["json_path"] in flagged)
    assert Step.objects.get(index=1).raw == step  # kept as written


def test_source_call_id_with_no_matching_tool_call_is_flagged(tmp_path):
    steps = good_steps()
    steps[1]["observation"]["results"][0]["source_call_id"] = "nope"
    write_trial(tmp_path, steps=steps)
    import_path(tmp_path / "task-a__AAAAAAA")
    paths = [p["json_path"] for p in Trajectory.objects.get().problems]
    assert "steps[1].observation.results[0].source_call_id" in paths


def test_agent_only_fields_on_a_user_step_are_flagged(tmp_path):
    steps = good_steps()
    steps[0]["reasoning_content"] = "users do not reason here"
    steps[0]["metrics"] = {"prompt_tokens": 3}
    write_trial(tmp_path, steps=steps)
    import_path(tmp_path / "task-a__AAAAAAA")
    paths = {p["json_path"] for p in Trajectory.objects.get().problems}
    assert {"steps[0].reasoning_content", "steps[0].metrics"} <= paths


def test_unknown_schema_version_is_an_error_and_a_newer_atif_a_warning(tmp_path):
    (tmp_path / "a.json").write_bytes(orjson.dumps(atif(good_steps(), version="TRAJ-2")))
    (tmp_path / "b.json").write_bytes(orjson.dumps(atif(good_steps(), version="ATIF-v1.99")))
    import_path(tmp_path)
    first, second = Trajectory.objects.order_by("path")
    assert [p["severity"] for p in first.problems if p["json_path"] == "schema_version"] == ["error"]
    assert [p["severity"] for p in second.problems if p["json_path"] == "schema_version"] == ["warning"]
    assert Step.objects.count() == 4  # both kept


def test_a_pack_with_parts_missing_is_imported_and_marked_incomplete(tmp_path):
    write_trial(tmp_path, trajectory=False, details=False, manifest=False)
    imp = import_path(tmp_path / "task-a__AAAAAAA")
    assert imp.outcomes[0]["outcome"] == "imported"
    trial = Trial.objects.get()
    assert not trial.is_complete
    assert {"trajectoryRef", "rewardDetailsRef", "artifactManifestRef"} <= set(trial.missing)


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def test_truncated_archive_is_rejected_and_its_bytes_kept(tmp_path):
    trial = write_trial(tmp_path / "src")
    archive = tmp_path / "pack.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(trial, arcname=trial.name)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    imp = import_path(archive)
    assert imp.outcomes[0]["outcome"] == "rejected"
    assert "truncated" in problems_of(imp)[0]["message"]
    assert Trial.objects.count() == 0
    assert Blob.objects.filter(sha256=hashlib.sha256(data[: len(data) // 2]).hexdigest()).exists()


def test_hostile_tar_members_are_skipped_and_nothing_escapes_the_storage(tmp_path):
    payload = orjson.dumps(atif(good_steps()))
    members = [
        (tarfile.TarInfo("../escaped.json"), payload),
        (tarfile.TarInfo("/tmp/absolute-escaped.json"), payload),
        (tarfile.TarInfo("ok/trajectory.json"), payload),
    ]
    link = tarfile.TarInfo("ok/link.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    device = tarfile.TarInfo("ok/device")
    device.type, device.devmajor, device.devminor = tarfile.CHRTYPE, 1, 3
    hardlink = tarfile.TarInfo("ok/hard.json")
    hardlink.type, hardlink.linkname = tarfile.LNKTYPE, "../../etc/passwd"
    members += [(link, None), (device, None), (hardlink, None)]
    archive = tmp_path / "hostile.tar.gz"
    archive.write_bytes(tar_bytes(members))
    imp = import_path(archive)
    skipped = {p["json_path"]: p["message"] for p in problems_of(imp) if "unsafe" in p["message"]}
    assert set(skipped) == {"../escaped.json", "/tmp/absolute-escaped.json", "ok/link.json", "ok/device",
                            "ok/hard.json"}  # fmt: skip
    assert "traversal" in skipped["../escaped.json"] and "absolute" in skipped["/tmp/absolute-escaped.json"]
    assert Trial.objects.count() == 1  # the safe member still imports
    assert not (tmp_path / "escaped.json").exists() and not Path("/tmp/absolute-escaped.json").exists()
    assert not list(tmp_path.parent.glob("escaped.json"))


def test_zip_with_traversal_member_is_skipped(tmp_path):
    archive = tmp_path / "hostile.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../evil.json", orjson.dumps(atif(good_steps())))
        zf.writestr("good.json", orjson.dumps(atif(good_steps())))
    imp = import_path(archive)
    assert any(p["json_path"] == "../../evil.json" for p in imp.problems)
    assert Trial.objects.count() == 1
    assert not (tmp_path.parent / "evil.json").exists()


def test_zip_bomb_by_ratio_is_rejected_before_it_fills_the_disk(tmp_path, settings):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("zeros.json", b"0" * (40 * 1024 * 1024))
    imp = import_path(archive)
    assert imp.outcomes[0]["outcome"] == "rejected"
    assert "ratio" in problems_of(imp)[0]["message"]
    assert not list((settings.IMPORT_SPOOL_DIR).rglob("zeros.json"))


def test_a_gzipped_trajectory_is_read_as_the_file_inside_it(tmp_path):
    original = orjson.dumps(atif(good_steps()))
    archive = tmp_path / "trajectory.json.gz"
    archive.write_bytes(gzip.compress(original))
    imp = import_path(archive)
    assert [o["outcome"] for o in imp.outcomes] == ["extracted", "imported"]
    assert imp.outcomes[1]["pack"] == "trajectory.json.gz/trajectory.json"
    assert Trial.objects.get().trajectories.get().blob.read() == original


def test_a_gzip_bomb_stops_at_the_ratio_limit_and_a_gzip_cut_short_is_said_on_one_line(tmp_path, settings):
    bomb = tmp_path / "zeros.json.gz"
    bomb.write_bytes(gzip.compress(b"0" * (40 * 1024 * 1024)))
    imp = import_path(bomb)
    assert imp.outcomes[0]["outcome"] == "rejected" and "ratio" in problems_of(imp)[0]["message"]
    assert not list(settings.IMPORT_SPOOL_DIR.rglob("zeros.json"))

    cut = tmp_path / "events.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"type": "turn.submitted", "eventId": "e1"}\n' * 2000)[:300])
    [problem] = problems_of(import_path(cut))
    assert problem["message"].startswith("damaged or truncated archive: ") and "\n" not in problem["message"]


def test_archive_past_the_expanded_size_limit_is_rejected(tmp_path, settings):
    settings.IMPORT_MAX_EXPANDED_BYTES = 10_000
    archive = tmp_path / "big.tar.gz"
    info = tarfile.TarInfo("big.json")
    archive.write_bytes(tar_bytes([(info, b"[" + b"1," * 20_000 + b"1]")]))
    imp = import_path(archive)
    assert imp.outcomes[0]["outcome"] == "rejected"
    assert "expands past" in problems_of(imp)[0]["message"]


def zip_bytes(members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buffer.getvalue()


def test_archives_inside_an_archive_share_one_expansion_limit(tmp_path, settings):
    settings.IMPORT_MAX_EXPANDED_BYTES = 50_000
    inner = zip_bytes([("big.json", b"[" + b"1," * 10_000 + b"1]")], zipfile.ZIP_DEFLATED)  # 20 kB expanded
    archive = tmp_path / "nested.zip"
    archive.write_bytes(zip_bytes([(f"inner-{i}.zip", inner) for i in range(4)]))
    imp = import_path(archive)
    refused = [o["pack"] for o in imp.outcomes if "expands past the limit of 50000" in o.get("reason", "")]
    assert refused == ["nested.zip/inner-2.zip", "nested.zip/inner-3.zip"]  # 20 kB each: the third is past 50 kB
    assert not list(settings.IMPORT_SPOOL_DIR.rglob("big.json"))


def test_an_archive_nested_more_than_three_deep_is_not_extracted(tmp_path, settings):
    data = orjson.dumps(atif(good_steps()))
    levels = zip_bytes([("t.json", data)])
    for _ in range(4):
        levels = zip_bytes([("deeper.zip", levels)])
    (tmp_path / "deep.zip").write_bytes(levels)
    imp = import_path(tmp_path / "deep.zip")
    [rejected] = [o for o in imp.outcomes if o["outcome"] == "rejected"]
    assert rejected["pack"] == "deep.zip/deeper.zip/deeper.zip/deeper.zip"
    assert "nested more than 3 deep" in rejected["reason"]
    assert not Trial.objects.exists()


def test_a_member_over_the_size_limit_is_left_out_and_the_rest_of_the_archive_imports(tmp_path, settings):
    small = orjson.dumps(atif(good_steps()))
    settings.IMPORT_MAX_FILE_BYTES = len(small) + 10
    big = orjson.dumps({**atif(good_steps()), "session_id": "big", "notes": "x" * 1000})
    (tmp_path / "mixed.zip").write_bytes(zip_bytes([("small.json", small), ("big.json", big)]))
    imp = import_path(tmp_path / "mixed.zip")
    assert Trial.objects.count() == 1
    [problem] = [p for p in problems_of(imp) if p["json_path"] == "big.json"]
    assert problem["file"] == "mixed.zip" and "left out" in problem["message"]


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_and_clashing_archive_members_are_reported_and_the_first_kept(tmp_path, settings):
    data = orjson.dumps(atif(good_steps()))
    members = [("t.json", data), ("t.json", b'{"not": "atif"}'), ("a", b"x"), ("a/b.json", data)]
    (tmp_path / "dup.zip").write_bytes(zip_bytes(members))
    imp = import_path(tmp_path / "dup.zip")
    assert Trial.objects.count() == 1  # the first t.json
    reported = {p["json_path"]: p["message"] for p in problems_of(imp)}
    assert "same name came first" in reported["t.json"]
    assert "where its folder would be" in reported["a/b.json"]
    assert str(settings.IMPORT_SPOOL_DIR) not in str(imp.problems)


def test_single_file_over_the_size_limit_is_rejected_unread(tmp_path, settings):
    settings.IMPORT_MAX_FILE_BYTES = 100
    path = tmp_path / "big.json"
    path.write_bytes(orjson.dumps(atif(good_steps())))
    imp = import_path(path)
    assert imp.outcomes[0]["outcome"] == "rejected"
    assert "over the limit" in problems_of(imp)[0]["message"]
    assert not Blob.objects.exists()  # its bytes were never read, so not stored


def test_a_file_over_the_size_limit_in_a_folder_is_left_out_unread_and_the_rest_imports(tmp_path, settings):
    trial = write_trial(tmp_path)
    big = trial / "agent" / "trajectory.cont-1.json"
    big.write_bytes(orjson.dumps(atif(good_steps())) + b" " * 5_000)
    settings.IMPORT_MAX_FILE_BYTES = 4_000
    imp = import_path(trial)
    assert imp.outcomes[0]["outcome"] == "imported"
    [problem] = problems_of(imp)
    assert problem["file"] == "task-a__AAAAAAA/agent/trajectory.cont-1.json" and "over the limit" in problem["message"]
    assert Trial.objects.get().step_count == 2  # the main trajectory only
    assert not PackFile.objects.filter(path__endswith="cont-1.json").exists()  # never read, so not stored


def test_links_in_a_folder_are_reported_and_never_followed(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_bytes(orjson.dumps(atif(good_steps())))
    trial = write_trial(tmp_path / "packs")
    (trial / "agent" / "trajectory.cont-1.json").symlink_to(outside)
    (trial / "verifier" / "passwd").symlink_to("/etc/passwd")
    (trial / "linked-folder").symlink_to(tmp_path, target_is_directory=True)
    imp = import_path(trial)
    assert imp.outcomes[0]["outcome"] == "imported"
    links = {p["file"].split("/", 1)[1]: p["message"] for p in problems_of(imp) if "link not followed" in p["message"]}
    assert set(links) == {"agent/trajectory.cont-1.json", "verifier/passwd", "linked-folder"}
    assert "/etc/passwd" in links["verifier/passwd"]
    trial_row = Trial.objects.get()
    assert trial_row.step_count == 2 and trial_row.trajectories.count() == 1  # the link's steps were not read
    assert not Blob.objects.filter(sha256=hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()).exists()


def test_a_link_beside_packs_in_a_folder_is_said_to_be_a_link_not_followed(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_bytes(orjson.dumps(atif(good_steps())))
    (tmp_path / "upload").mkdir()
    (tmp_path / "upload" / "trajectory.json").symlink_to(outside)
    imp = import_path(tmp_path / "upload")
    [outcome] = imp.outcomes
    assert outcome["outcome"] == "skipped" and outcome["reason"] == f"link not followed (it points to {str(outside)!r})"
    assert not Trial.objects.exists()


def test_an_empty_folder_is_rejected_with_nothing_to_import(tmp_path):
    (tmp_path / "empty" / "inner").mkdir(parents=True)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="1 pack"):
        call_command("import_packs", str(tmp_path / "empty"), "--no-progress", stdout=out, stderr=err)
    assert "rejected" in out.getvalue() and "nothing to import: the folder holds no file" in out.getvalue()
    assert Import.objects.get().rejected_count == 1


def test_a_missing_path_is_said_and_the_paths_after_it_are_still_imported(tmp_path):
    first, last = write_trial(tmp_path / "a"), write_trial(tmp_path / "b")
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 pack"):
        call_command("import_packs", str(first), str(tmp_path / "nowhere"), str(last), "--no-progress",
                     stdout=out, stderr=io.StringIO())  # fmt: skip
    lines = out.getvalue().splitlines()
    assert any("rejected" in line and "nowhere" in line and "no such file or folder" in line for line in lines)
    assert Trial.objects.count() == 2


def test_a_pipe_in_a_folder_is_reported_and_never_opened(tmp_path):
    trial = write_trial(tmp_path)
    os.mkfifo(trial / "agent" / "stdout.pipe")  # opening it to read would wait for a writer forever
    imp = import_path(trial)
    assert imp.outcomes[0]["outcome"] == "imported"
    [problem] = problems_of(imp)
    assert problem["file"] == "task-a__AAAAAAA/agent/stdout.pipe"
    assert problem["message"] == "not a regular file (a device, pipe or socket)"
    assert Trial.objects.get().step_count == 2


@pytest.mark.parametrize(
    "failure, reported",
    [
        (DatabaseError("injected failure after the trial's rows were written"), "database rejected"),
        (OverflowError("injected bug in writing one trial"), "internal error while writing the trial"),
    ],
)
def test_a_failure_in_one_trial_leaves_no_half_imported_trial_and_the_others_go_on(
    tmp_path, monkeypatch, failure, reported
):
    job = tmp_path / "job"
    write_trial(job, "task-a__AAAAAAA")
    write_trial(job, "task-b__BBBBBBB")
    write_trial(job, "task-c__CCCCCCC")
    (job / "config.json").write_bytes(orjson.dumps({"job_name": "job"}))
    real = write_trial_children

    def fail_for_task_b(trial, parsed, blobs):
        if parsed.name.startswith("task-b"):
            real(trial, parsed, blobs)
            raise failure
        real(trial, parsed, blobs)

    monkeypatch.setattr("trials.imports.writer.write_trial_children", fail_for_task_b)
    imp = import_path(job)
    assert imp.status == "done"
    assert list(Trial.objects.order_by("name").values_list("name", flat=True)) == ["task-a__AAAAAAA", "task-c__CCCCCCC"]
    assert Step.objects.filter(trial__name__startswith="task-b").count() == 0
    assert imp.outcomes[0]["rejected"] == 1 and imp.rejected_count == 1
    assert any(reported in p["message"] for p in imp.problems)
    assert not Task.objects.filter(name="task-b").exists()  # created in the trial's transaction, rolled back with it
    monkeypatch.setattr("trials.imports.writer.write_trial_children", real)
    again = import_path(job)  # the pack stayed open: importing it again finishes it
    assert again.outcomes[0]["trials"] == 1
    assert Trial.objects.count() == 3


def test_a_rejected_trial_takes_its_new_task_and_configuration_with_it_and_the_next_attempt_makes_them(
    tmp_path, monkeypatch
):
    job = tmp_path / "job"
    write_trial(job, "task-a__AAAAAAA")  # the job's first trial: it brings the task and configuration, then fails
    write_trial(job, "task-a__BBBBBBB")  # a second attempt at the same task
    write_trial(job, "task-b__CCCCCCC")
    (job / "config.json").write_bytes(orjson.dumps({"job_name": "job"}))
    real = write_trial_children

    def fail_for_first_trial(trial, parsed, blobs):
        real(trial, parsed, blobs)
        if parsed.name == "task-a__AAAAAAA":
            raise DatabaseError("injected failure")

    monkeypatch.setattr("trials.imports.writer.write_trial_children", fail_for_first_trial)
    imp = import_path(job)
    assert imp.outcomes[0]["rejected"] == 1 and imp.outcomes[0]["trials"] == 2
    attempt = Trial.objects.get(name="task-a__BBBBBBB")
    assert attempt.task.name == "task-a" and Task.objects.filter(name="task-a").count() == 1
    [configuration] = Configuration.objects.all()
    assert set(configuration.trials.values_list("name", flat=True)) == {"task-a__BBBBBBB", "task-b__CCCCCCC"}


def test_a_timestamp_before_year_1_in_utc_is_flagged_and_its_trial_imported(tmp_path):
    steps = good_steps()
    steps[1]["timestamp"] = "0001-01-01T00:00:00+01:00"  # valid ISO, but 31 Dec of year 0 in UTC
    job = tmp_path / "job"
    write_trial(job, "task-a__AAAAAAA", steps=steps)
    write_trial(job, "task-b__BBBBBBB")
    (job / "config.json").write_bytes(orjson.dumps({"job_name": "job"}))
    imp = import_path(job)
    assert imp.outcomes[0]["trials"] == 2 and Step.objects.count() == 4
    assert Step.objects.get(trial__name="task-a__AAAAAAA", index=1).timestamp is None  # the raw step keeps it
    assert any(p["json_path"] == "steps[1].timestamp" for p in imp.problems)


def test_nul_characters_in_agent_output_are_stored_and_the_raw_step_kept(tmp_path):
    steps = good_steps()
    steps[1]["observation"]["results"][0]["content"] = "binary\x00output"
    steps[1]["message"] = "nul\x00here"
    write_trial(tmp_path, steps=steps)
    import_path(tmp_path / "task-a__AAAAAAA")
    step = Step.objects.get(index=1)
    assert step.raw == steps[1]
    assert "\x00" not in step.message_text


def test_nul_characters_anywhere_a_producer_writes_text_do_not_reject_the_trial(tmp_path):
    steps = good_steps()
    steps[1]["model_name"] = "model\x00name"
    steps[1]["llm_call_count"] = 2**40  # past a 32-bit column: kept in the raw step only
    steps[1]["tool_calls"][0]["function_name"] = "ba\x00sh"
    steps[1]["observation"]["results"][0]["source_call_id"] = "c1"
    trial_dir = write_trial(tmp_path / "src", steps=steps)
    (trial_dir / "verifier" / "reward-details.json").write_bytes(
        orjson.dumps({"criteria": [{"name": "wor\x00ks", "score": 1.0, "reasoning": "a NUL \x00 here"}]})
    )
    event = {"schemaVersion": "lime-profile-0.4.0", "type": "action.resolved", "eventId": "e\x001",
             "timestamp": "2026-01-01T00:00:02Z", "sequence": 2, "runtimeId": "rt", "sessionId": "sess-bad-input",
             "threadId": "th", "turnId": "tu", "actionId": "a\x001", "toolCallId": "c1",
             "payload": {"decision": "deny", "decidedBy": "policy", "reason": "no\x00pe"}}  # fmt: skip
    (trial_dir / "agent" / "events.jsonl").write_bytes(orjson.dumps(event) + b"\n")
    imp = import_path(trial_dir)
    assert imp.outcomes[0]["trials"] == 1, imp.problems
    trial = Trial.objects.get()
    assert trial.criteria.get().reasoning == "a NUL \ufffd here"
    assert trial.permissions.get().reason == "no\ufffdpe"
    step = Step.objects.get(index=1)
    assert step.model_name == "model\ufffdname" and step.llm_call_count is None
    assert step.raw == steps[1]  # the raw step keeps every byte


def test_every_file_of_an_imported_folder_is_stored(tmp_path):
    trial = write_trial(tmp_path)
    (trial / "agent" / "notes.bin").write_bytes(bytes(range(256)))
    import_path(trial)
    stored = set(PackFile.objects.values_list("path", flat=True))
    expected = {f"{trial.name}/{p.relative_to(trial).as_posix()}" for p in trial.rglob("*") if p.is_file()}
    assert stored == expected


@pytest.mark.parametrize("depth", [300, 1000])
def test_a_deeply_nested_extra_is_kept_and_its_step_served(tmp_path, client_logged_in, depth):
    steps = good_steps()
    steps[1]["extra"] = {"deep": "DEEP"}
    steps[1]["tool_calls"][0]["arguments"] = {"deep": "DEEP"}
    # orjson reads JSON up to 1024 levels deep, but writes only up to 255.
    data = orjson.dumps(atif(steps)).replace(b'"DEEP"', b"[" * depth + b'"bottom"' + b"]" * depth)
    (tmp_path / "t.json").write_bytes(data)
    imp = import_path(tmp_path / "t.json")
    assert imp.outcomes[0]["outcome"] == "imported" and Trial.objects.count() == 1, imp.problems
    trial = Trial.objects.get()
    response = client_logged_in.get(f"/api/trials/{trial.pk}/steps/2/")
    assert response.status_code == 200
    assert "bottom" in response.content.decode()
    page = client_logged_in.get(f"/trials/{trial.pk}/")
    assert page.status_code == 200
    served = b"".join(client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").streaming_content)
    assert served == data


def test_a_pack_whose_only_trial_is_rejected_is_reported_rejected(tmp_path, monkeypatch):
    trial = write_trial(tmp_path)

    def fail(trial, parsed, blobs):
        raise DatabaseError("injected failure")

    monkeypatch.setattr("trials.imports.writer.write_trial_children", fail)
    imp = import_path(trial)
    [outcome] = imp.outcomes
    assert outcome["outcome"] == "rejected" and outcome["rejected"] == 1 and "rejected" in outcome["reason"]
    assert imp.rejected_count == 1 and not Trial.objects.exists()


def test_a_trajectory_imported_alone_is_incomplete_but_not_missing_its_trajectory(tmp_path):
    (tmp_path / "t.json").write_bytes(orjson.dumps(atif(good_steps())))
    import_path(tmp_path / "t.json")
    trial = Trial.objects.get()
    assert not trial.is_complete
    assert "trajectoryRef" not in trial.missing and "rewardDetailsRef" in trial.missing
    assert trial.refs == {"trajectoryRef": "t.json"}


@pytest.mark.parametrize("streamed", [False, True], ids=["read whole", "streamed"])
def test_json_files_starting_with_a_utf8_byte_order_mark_import(tmp_path, monkeypatch, streamed):
    if streamed:
        monkeypatch.setattr(atif_module, "STREAM_THRESHOLD", 100)
    trial = write_trial(tmp_path)
    for name in ("result.json", "agent/trajectory.json", "verifier/reward-details.json"):
        (trial / name).write_bytes(b"\xef\xbb\xbf" + (trial / name).read_bytes())
    (tmp_path / "lone").mkdir()
    lone = orjson.dumps({**atif(good_steps()), "session_id": "b"})
    (tmp_path / "lone" / "t.json").write_bytes(b"\xef\xbb\xbf" + lone)
    for path in (trial, tmp_path / "lone" / "t.json"):
        imp = import_path(path)
        assert imp.outcomes[0]["outcome"] == "imported" and not problems_of(imp), imp.problems
    assert Trial.objects.count() == 2 and Step.objects.count() == 4
    assert Trial.objects.get(name="task-a__AAAAAAA").rewards == {"reward": 1.0}


def test_a_utf16_json_file_is_rejected_as_not_utf8(tmp_path):
    (tmp_path / "t.json").write_bytes(orjson.dumps(atif(good_steps())).decode().encode("utf-16"))
    imp = import_path(tmp_path / "t.json")
    [problem] = problems_of(imp)
    assert "UTF-16" in problem["message"] and imp.outcomes[0]["outcome"] == "rejected"


def test_a_token_count_that_no_column_can_hold_is_flagged_and_kept_as_written(tmp_path):
    steps = good_steps()
    steps[1]["metrics"] = {"prompt_tokens": "BIG", "completion_tokens": -3, "cached_tokens": 5}
    big = str(2**70).encode()  # orjson writes no integer past 64 bits, and reads one as a float
    data = orjson.dumps(atif(steps)).replace(b'"BIG"', big)
    (tmp_path / "t.json").write_bytes(data)
    imp = import_path(tmp_path / "t.json")
    flagged = {p["json_path"] for p in imp.problems if "must be a whole number" in p["message"]}
    assert flagged == {"steps[1].metrics.prompt_tokens", "steps[1].metrics.completion_tokens"}
    step = Step.objects.get(index=1)
    assert step.prompt_tokens is None and step.completion_tokens is None and step.cached_tokens == 5
    assert big in Trajectory.objects.get().atif_bytes()  # the file keeps it as written


def test_a_key_written_twice_in_a_small_json_file_is_flagged_with_its_line_and_the_trial_kept(tmp_path):
    trial_dir = write_trial(tmp_path / "job")
    result = orjson.loads((trial_dir / "result.json").read_bytes())
    text = orjson.dumps(result, option=orjson.OPT_INDENT_2).decode()
    text = text.replace('"source": "bad-input-dataset",', '"source": "first",\n  "source": "bad-input-dataset",')
    (trial_dir / "result.json").write_text(text)
    imp = import_path(trial_dir)
    [warning] = [p for p in problems_of(imp, "warning") if "twice" in p["message"]]
    assert warning["file"].endswith("result.json") and warning["message"].startswith("key 'source' appears twice")
    assert warning["line"] == text.splitlines().index('  "source": "bad-input-dataset",') + 1
    assert Trial.objects.get().dataset.name == "bad-input-dataset"  # the last value, as every JSON reader does


def test_keys_written_twice_are_reported_even_when_the_file_is_then_rejected(tmp_path):
    (tmp_path / "odd.json").write_text('{\n  "colour": "red",\n  "colour": "blue"\n}\n')
    imp = import_path(tmp_path / "odd.json")
    assert imp.outcomes[0]["outcome"] == "rejected" and "no known pack format" in imp.outcomes[0]["reason"]
    [warning] = [p for p in problems_of(imp, "warning") if "twice" in p["message"]]
    assert (warning["file"], warning["line"]) == ("odd.json", 3)
    assert Pack.objects.get().problems[1]["message"] == warning["message"]


def test_integers_past_64_bits_in_small_files_are_kept_exact_and_twice_written_keys_flagged_per_line(tmp_path):
    big = 123456789012345678901234567890
    row = {"test_id": "t1", "target": "m", "score": 1.0, "metadata": {"source_commit": "abc", "run_number": big}}
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(row) + "\n" + '{"test_id": "t2", "target": "m", "score": 0, "score": 1}\n')
    imp = import_path(path)
    trial = Trial.objects.get(name="t1")
    assert trial.documents["row"]["metadata"]["run_number"] == big  # not 1.2345678901234568e+29
    assert trial.provenance["run_number"] == big
    assert [(p["message"], p["line"]) for p in problems_of(imp, "warning")] == [
        ("key 'score' appears twice in one object: the last value is read", 2)
    ]
    assert Trial.objects.get(name="t2").reward == 1.0


def test_a_small_file_with_thousands_of_keys_written_twice_is_read_at_once_and_flagged_in_short(tmp_path):
    members = ",".join(f'"k{i}": 1, "k{i}": 2' for i in range(20_000))  # ~0.5 MB of duplicates
    (tmp_path / "row.json").write_text('{"test_id": "t1", "target": "m", "score": 1, "metadata": {' + members + "}}")
    imp = import_path(tmp_path / "row.json")  # an AgentV result row
    warnings = [p["message"] for p in problems_of(imp, "warning") if "twice" in p["message"]]
    assert len(warnings) == 21 and warnings[-1] == "19980 more keys appear twice in one object"
