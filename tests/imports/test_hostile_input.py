"""Every case of the hostile corpus: a clear error or a clean import, never a crash,
no file outside the storage folder, no half-imported trial, and the next import works."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import REFERENCE, import_path
from tests.hostile_corpus import cases, trajectory
from trials.ingest.formats import agentv, atif, atif_checks, lime
from trials.ingest.records import PackError
from trials.models import Step, Trajectory, Trial

pytestmark = pytest.mark.django_db

CASES = cases()


def test_the_corpus_has_at_least_200_cases():
    assert len(CASES) >= 200
    assert len({name for name, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "build"), CASES, ids=[name for name, _ in CASES])
def test_hostile_case_is_rejected_clearly_or_imported_cleanly(name, build, tmp_path, settings):
    source = tmp_path / "case"
    source.mkdir()
    path = build(source)
    before = set(tmp_path.parent.iterdir())
    imp = import_path(path)

    assert imp.status == "done", imp.problems  # no crash: the import itself finished
    assert imp.outcomes, "every pack gets an outcome line"
    for outcome in imp.outcomes:
        assert outcome["outcome"] in ("imported", "already imported", "rejected", "skipped", "extracted")
        if outcome["outcome"] == "rejected":
            assert outcome["reason"] and not outcome["reason"].startswith("internal error"), outcome
    for problem in imp.problems:
        assert problem["file"] and problem["message"], problem
        assert not problem["message"].startswith("internal error"), problem
    for trajectory_row in Trajectory.objects.all():  # whole or nothing
        assert Step.objects.filter(trajectory=trajectory_row).count() == trajectory_row.step_count
    assert set(tmp_path.parent.iterdir()) == before  # nothing written beside the test folder
    assert not Path("/tmp/bv-evil.json").exists()
    assert not list(settings.IMPORT_SPOOL_DIR.iterdir())  # the work folder is cleaned up

    # The same process serves the next import.
    assert import_path(REFERENCE / "agentv" / "camel-replay-index.jsonl").status == "done"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(step=st.dictionaries(st.sampled_from(sorted(atif_checks.STEP_FIELDS) + ["junk"]), json_values, max_size=8))
def test_atif_step_parsing_never_raises_on_any_json_step(step):
    atif_checks.validate_step(step, 0, "t.json")
    parsed = atif.parse_step(step, 0)
    assert parsed.raw == step


@settings(max_examples=150, deadline=None)
@given(header=st.dictionaries(st.sampled_from(sorted(atif_checks.ROOT_FIELDS) + ["junk"]), json_values, max_size=8))
def test_atif_header_validation_never_raises(header):
    header.pop("steps", None)
    trajectory_record = atif.trajectory_from(header, iter(trajectory()["steps"]), "t.json", "main")
    assert len(list(trajectory_record.steps)) == 2


@settings(max_examples=150, deadline=None)
@given(row=st.dictionaries(st.text(max_size=12), json_values, max_size=8), extra=json_values)
def test_agentv_and_lime_readers_never_raise_an_unexpected_error(row, extra):
    row = {**row, "test_id": "t", "score": 0.5, "target": extra}
    for call in (
        lambda: agentv.parse_rows([(1, row)], "r.jsonl"),
        lambda: lime.parse_evidence_pack({"benchmark": extra, "refs": row}, "p.json"),
        lambda: lime.parse_event_rows([(1, {**row, "type": "tool.completed", "eventId": "e", "payload": extra})], "e"),
    ):
        try:
            call()
        except PackError:
            pass  # a clear rejection is fine
    assert Trial.objects.count() == 0
