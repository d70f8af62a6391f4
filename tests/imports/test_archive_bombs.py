"""Archive members that expand past their limits, or past what their directory claims: `.eval` logs above all.

Every member of every archive-like format is read through one capped reader
(`trials.ingest.archives.capped`): the bombs here are written as streams (tests/bombs.py),
so the suite never holds one; the limits are lowered through settings where a smaller bomb
shows the same thing.
"""

from __future__ import annotations

import zipfile

import pytest

from tests.bombs import EVAL_HEADER, RawMember, eval_sample, json_member, lying_eval, spaces, write_raw_zip
from tests.builders import import_path
from trials.ingest.formats import inspect
from trials.models import Trial

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024
BOMB = "samples/bomb_epoch_1.json"


def errors(imp) -> list[dict]:
    return [p for p in imp.problems if p["severity"] == "error"]


def trial_names() -> list[str]:
    return sorted(Trial.objects.values_list("name", flat=True))


def test_a_zstandard_member_that_expands_past_its_claimed_size_is_stopped_and_the_other_samples_import(tmp_path):
    log = lying_eval(tmp_path / "bomb.eval", 64 * MiB, claimed=100)
    assert log.stat().st_size < 100_000  # (64 MiB of spaces, the directory saying 100 bytes)
    imp = import_path(log)
    assert imp.status == "done"
    assert trial_names() == ["good_epoch_1"]
    [problem] = errors(imp)
    assert problem["file"] == "bomb.eval" and problem["json_path"] == BOMB
    assert f"member {BOMB} not read" in problem["message"]
    assert "past the 100 bytes the archive's directory claims" in problem["message"]
    assert problem["kept"] == "the raw bytes; this sample is not imported, the others are"


def test_an_eval_member_past_the_file_limit_is_left_out_naming_the_limit(tmp_path, settings):
    settings.IMPORT_MAX_FILE_BYTES = 1_000_000
    imp = import_path(lying_eval(tmp_path / "big.eval", 5 * MiB, claimed=None))  # (its true size claimed)
    assert trial_names() == ["good_epoch_1"]
    [problem] = errors(imp)
    assert problem["json_path"] == BOMB
    assert "file limit of 1000000 bytes (IMPORT_MAX_FILE_BYTES)" in problem["message"]
    assert "the others are" in problem["kept"]


def test_an_eval_past_the_expanded_size_limit_stops_there_and_keeps_the_samples_before_it(tmp_path, settings):
    settings.IMPORT_MAX_EXPANDED_BYTES = 2_000_000
    log = write_raw_zip(
        tmp_path / "wide.eval",
        [
            json_member("header.json", EVAL_HEADER),
            json_member("samples/first_epoch_1.json", eval_sample("first")),
            RawMember(BOMB, spaces(3 * MiB)),
            json_member("samples/after_epoch_1.json", eval_sample("after")),
        ],
    )
    imp = import_path(log)
    assert trial_names() == ["first_epoch_1"]
    [problem] = errors(imp)
    assert problem["json_path"] == BOMB
    assert "archive expands past the limit of 2000000 bytes (IMPORT_MAX_EXPANDED_BYTES)" in problem["message"]
    assert problem["kept"] == "the raw bytes; the 1 samples before it are read, none after"


def test_a_streamed_eval_member_past_the_ratio_limit_is_stopped_while_it_streams(tmp_path):
    imp = import_path(lying_eval(tmp_path / "ratio.eval", 64 * MiB, claimed=None))  # (past the stream threshold)
    assert trial_names() == ["good_epoch_1"]
    [problem] = errors(imp)
    assert problem["json_path"] == BOMB and "compression ratio over 200:1" in problem["message"]
    assert "IMPORT_MAX_ARCHIVE_RATIO" in problem["message"]


def test_an_eval_inside_a_zip_is_charged_to_the_uploads_budget_not_a_fresh_one(tmp_path, settings):
    settings.IMPORT_MAX_EXPANDED_BYTES = 2 * MiB
    log = lying_eval(tmp_path / "inner.eval", MiB, claimed=None)  # 1 MiB out: under the limit alone
    upload = tmp_path / "upload.zip"
    with zipfile.ZipFile(upload, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("filler.txt", b"x" * (3 * MiB // 2))  # (1.5 MiB extracted first)
        archive.write(log, "inner.eval")
    imp = import_path(upload)
    assert trial_names() == ["good_epoch_1"]
    [problem] = [p for p in errors(imp) if p["json_path"] == BOMB]
    assert problem["file"] == "upload.zip/inner.eval" and "IMPORT_MAX_EXPANDED_BYTES" in problem["message"]


def test_a_cut_off_eval_read_from_its_local_headers_stops_a_lying_member_too(tmp_path):
    whole = lying_eval(tmp_path / "whole.eval", 64 * MiB, claimed=100).read_bytes()
    log = tmp_path / "cut.eval"
    log.write_bytes(whole[: whole.index(b"PK\x01\x02")])  # (no central directory)
    imp = import_path(log)
    assert trial_names() == ["good_epoch_1"]
    [problem] = [p for p in errors(imp) if "not read" in p["message"]]
    assert problem["json_path"] == BOMB and "past the 100 bytes" in problem["message"]
    assert problem["kept"] == "the raw bytes; the 1 samples before it are read, none after"


def test_a_deflated_member_lying_about_its_size_in_a_plain_zip_extracts_nothing_past_the_claim(tmp_path):
    upload = write_raw_zip(tmp_path / "lie.zip", [RawMember("big.json", spaces(8 * MiB), 100, zipfile.ZIP_DEFLATED)])
    imp = import_path(upload)
    assert imp.outcomes[0]["outcome"] == "rejected"
    [problem] = errors(imp)
    assert problem["file"] == "lie.zip" and "damaged or truncated archive" in problem["message"]


def test_an_eval_read_without_the_imports_limits_still_stops_the_real_size_bomb(tmp_path):
    """The 1.5 GiB of spaces the report's upload held, read by the parser alone (its default limits)."""
    log = lying_eval(tmp_path / "real.eval", 1536 * MiB, claimed=100)
    pack = inspect.parse_eval(log, "real.eval")
    assert [t.name for t in pack.trials] == ["good_epoch_1"]
    assert [p.json_path for p in pack.problems if p.severity == "error"] == [BOMB]
