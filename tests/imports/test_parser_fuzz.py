"""The parsers under fuzzed input: ATIF, Inspect, OTLP and Terminal-Bench 1 (issue 43, item 7).

First the four shapes a longer atheris run crashed on, each through the whole import: the
trial is kept where the rest is valid, and the problem names the field. Then a bounded
hypothesis run per parser (200 examples; `FUZZ_EXAMPLES=5000` for a longer run): a valid
document with one value swapped for any JSON value, or a valid file with bytes changed; the
parser raises nothing but `PackError`, and every problem names its file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bombs import EVAL_HEADER, eval_sample, json_member, write_raw_zip
from tests.builders import atif, import_path, tool_step
from trials.ingest.formats import harbor_trajectories, inspect, otlp, terminal_bench
from trials.ingest.records import PackError, ParsedPack
from trials.models import Trial

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", 200)), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def errors(imp) -> list[dict]:
    return [p for p in imp.problems if p["severity"] == "error"]


def _trajectory_with(tmp_path: Path, change) -> Path:
    data = atif([{"step_id": 1, "source": "user", "message": "go"}, tool_step(2, "bash", {"cmd": "ls"})])
    change(data["steps"][1])
    path = tmp_path / "trajectory.json"
    path.write_bytes(orjson.dumps(data))
    return path


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "json_path", "message"),
    [
        (
            lambda step: step["tool_calls"][0].update(tool_call_id=["call", 1]),
            "steps[1].tool_calls[0].tool_call_id",
            "tool_call_id must be a string, got an array",
        ),
        (
            lambda step: step["observation"]["results"][0].update(source_call_id={"id": "call-2"}),
            "steps[1].observation.results[0].source_call_id",
            "source_call_id must be a string, got an object",
        ),
    ],
    ids=["tool_call_id a list", "source_call_id a dict"],
)
def test_an_atif_id_of_another_json_type_is_a_named_problem_and_the_trial_is_kept(tmp_path, change, json_path, message):
    imp = import_path(_trajectory_with(tmp_path, change))
    assert Trial.objects.get().step_count == 2
    [problem] = [p for p in errors(imp) if message in p["message"]]
    assert problem["file"] == "trajectory.json" and problem["json_path"] == json_path


def _two_sample_eval(path: Path, name: str = "samples/good_epoch_1.json") -> bytes:
    write_raw_zip(
        path,
        [
            json_member("header.json", EVAL_HEADER),
            json_member(name, eval_sample("good")),
            json_member("samples/other_epoch_1.json", eval_sample("other")),
        ],
    )
    return path.read_bytes()


@pytest.mark.django_db
def test_an_eval_with_a_member_name_that_is_not_utf8_keeps_its_samples_and_says_why(tmp_path):
    log = tmp_path / "names.eval"
    data = _two_sample_eval(log, "samples/g\u00e9od_epoch_1.json")
    log.write_bytes(data.replace("g\u00e9od".encode(), b"g\xff\xfeod"))  # (flagged UTF-8, which it is not)
    imp = import_path(log)
    assert Trial.objects.count() == 2
    [problem] = errors(imp)
    assert problem["file"] == "names.eval" and "read from its local headers" in problem["message"]
    assert "utf-8" in problem["message"] and "the 2 samples" in problem["kept"]


@pytest.mark.django_db
def test_an_eval_claiming_zip_version_8_4_keeps_its_samples_and_says_why(tmp_path):
    log = tmp_path / "version.eval"
    data = bytearray(_two_sample_eval(log))
    entry = data.index(b"PK\x01\x02", data.index(b"PK\x01\x02") + 1)  # the second member's directory entry
    data[entry + 6 : entry + 8] = (84).to_bytes(2, "little")  # version needed to extract: 8.4
    log.write_bytes(bytes(data))
    imp = import_path(log)
    assert sorted(Trial.objects.values_list("name", flat=True)) == ["good_epoch_1", "other_epoch_1"]
    [problem] = errors(imp)
    assert "zip file version 8.4" in problem["message"]


# ---------------------------------------------------------------- bounded fuzzing

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, at: tuple = ()) -> list[tuple]:
    """Every place in a JSON document a value could be swapped."""
    found = [at]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*at, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*at, index))
    return found


def _swapped(document: Any, at: tuple, value: Any) -> Any:
    if not at:
        return value
    copy = orjson.loads(orjson.dumps(document))
    parent = copy
    for part in at[:-1]:
        parent = parent[part]
    parent[at[-1]] = value
    return copy


def mutated(document: Any) -> st.SearchStrategy[Any]:
    places = _paths(document)[1:]  # (not the root: the format was recognised by its shape)
    return st.tuples(st.sampled_from(places), json_values).map(lambda pv: _swapped(document, pv[0], pv[1]))


def exhausted(pack: ParsedPack) -> ParsedPack:
    """Every trial and step read, as the writer would; every problem names its file."""
    for trial in pack.trials:
        for trajectory in trial.trajectories:
            list(trajectory.steps)
        assert all(p.file for p in trial.problems)
    assert all(p.file for p in pack.problems)
    return pack


def parsed_or_refused(parse) -> None:
    try:
        exhausted(parse())
    except PackError as exc:
        assert exc.problem.file


ATIF_DOC = atif(
    [
        {"step_id": 1, "source": "user", "message": "go"},
        tool_step(2, "bash", {"cmd": "ls"}),
        {"step_id": 3, "source": "agent", "message": "done", "metrics": {"prompt_tokens": 5}},
    ]
)


@FUZZ
@given(mutated(ATIF_DOC))
def test_the_atif_reader_never_crashes_on_a_fuzzed_trajectory(document):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trajectory.json"
        path.write_bytes(orjson.dumps(document))
        parsed_or_refused(lambda: harbor_trajectories.parse_lone_trajectory(path, "trajectory.json"))


SPAN = {
    "traceId": "5b8efff798038103d269b633813fc60c",
    "spanId": "eee19b7ec3c1b174",
    "name": "chat gpt-5",
    "startTimeUnixNano": "1767323045000000000",
    "endTimeUnixNano": "1767323046000000000",
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-5"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
    ],
}
OTLP_DOC = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
            "scopeSpans": [{"scope": {"name": "s"}, "spans": [SPAN, {**SPAN, "spanId": "eee19b7ec3c1b175"}]}],
        }
    ]
}


@FUZZ
@given(mutated(OTLP_DOC))
def test_the_otlp_reader_never_crashes_on_fuzzed_spans(document):
    parsed_or_refused(lambda: otlp.parse(document, "traces.json"))


TB1_ROW = {
    "id": "00000000-0000-4000-8000-000000000001",
    "trial_name": "hello.1-of-1.run",
    "task_id": "hello",
    "is_resolved": True,
    "failure_mode": "unset",
    "parser_results": {"test_a": "passed"},
    "total_input_tokens": 10,
    "total_output_tokens": 2,
    "trial_started_at": "2026-01-02T03:04:05+00:00",
    "trial_ended_at": "2026-01-02T03:14:05+00:00",
}
TB1_DOC = {"id": "run", "results": [TB1_ROW], "n_resolved": 1, "resolved_ids": ["hello"], "accuracy": 1.0}


@FUZZ
@given(mutated(TB1_DOC))
def test_the_terminal_bench_reader_never_crashes_on_a_fuzzed_results_file(document):
    path = Path("/nonexistent/run_results.json")  # (nothing is read beside it)
    parsed_or_refused(lambda: terminal_bench.parse(document, path, "run_results.json") or ParsedPack(kind="none"))


def _eval_bytes(sample: Any) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.eval"
        write_raw_zip(path, [json_member("header.json", EVAL_HEADER), json_member("samples/s_epoch_1.json", sample)])
        return path.read_bytes()


EVAL_BYTES = _eval_bytes(eval_sample("s"))


@st.composite
def damaged(draw) -> bytes:
    """The valid archive with some of its bytes changed, then perhaps cut."""
    raw = bytearray(EVAL_BYTES)
    for at, byte in draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=6)):
        raw[at] = byte
    return bytes(raw[: draw(st.integers(30, len(raw)))])


@FUZZ
@given(st.one_of(mutated(eval_sample("s")).map(_eval_bytes), damaged()))
def test_the_inspect_reader_never_crashes_on_a_fuzzed_eval(fuzzed):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.eval"
        path.write_bytes(fuzzed)
        parsed_or_refused(lambda: inspect.parse_eval(path, "log.eval"))


def test_the_eval_the_fuzzing_starts_from_is_a_valid_log_of_one_sample():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.eval"
        path.write_bytes(EVAL_BYTES)
        pack = inspect.parse_eval(path, "log.eval")
        assert [t.name for t in pack.trials] == ["s_epoch_1"] and pack.problems == []
