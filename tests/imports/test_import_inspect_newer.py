"""Inspect logs in the shapes newer inspect_ai writes (issue 41): `model` events whose input is
`input_refs` into the sample's message pool, epochs with their reducers, chunked samples (written by
inspect_ai's own converter) mixed with whole ones, and a cancelled log holding no sample."""

from __future__ import annotations

import zipfile
from pathlib import Path

import orjson
import pytest
from inspect_ai.log._recorders.chunked.convert import convert_eval_logs_to_chunked

from tests.builders import import_path
from tests.imports.inspect_helpers import AGENTIC, trial_facts
from tests.inspect_logs import write_agentic_log, write_subagent_log
from trials.ingest.formats.inspect_zip import read_member
from trials.models import Job, Step, Trial

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inspect-newer")
    whole = write_agentic_log(folder / "eval")
    convert_eval_logs_to_chunked(str(whole), str(folder / "chunked"), chunk_size=2)
    return {
        "eval": whole,
        "chunked": next((folder / "chunked").glob("*.eval")),
        "subagent": write_subagent_log(folder / "sub"),
    }


def members(log: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(log) as archive:
        return {info.filename: read_member(log, archive, info) for info in archive.infolist()}


def test_a_chunked_log_mixed_with_whole_samples_gives_each_sample_and_epoch_its_known_answers(logs, tmp_path):
    chunked, whole = members(logs["chunked"]), members(logs["eval"])
    assert any(n.startswith("samples/add_epoch_1/events/") for n in chunked)  # (inspect_ai wrote folders)
    mixed = {n: b for n, b in chunked.items() if not n.startswith("samples/wrong_epoch_")}
    mixed |= {n: b for n, b in whole.items() if n.startswith("samples/wrong_epoch_")}  # (two whole samples)
    log = tmp_path / "mixed.eval"
    with zipfile.ZipFile(log, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_journal/start.json", mixed.pop("_journal/start.json"))  # (what inspect_ai writes first)
        for name, data in mixed.items():
            archive.writestr(name, data)
    imp = import_path(log)
    assert imp.status == "done", imp.problems
    assert {t.name: trial_facts(t) for t in Trial.objects.all()} == {
        f"{sample}_epoch_{epoch}": facts for sample, facts in AGENTIC.items() for epoch in (1, 2)
    }


def test_a_streamed_chunked_sample_gives_the_same_answers(logs, monkeypatch):
    monkeypatch.setattr("trials.ingest.formats.inspect.STREAM_THRESHOLD", 0)
    imp = import_path(logs["chunked"])
    assert imp.status == "done", imp.problems
    assert {t.name: trial_facts(t) for t in Trial.objects.all()} == {
        f"{sample}_epoch_{epoch}": facts for sample, facts in AGENTIC.items() for epoch in (1, 2)
    }


def test_epochs_are_attempts_of_one_task_and_the_reducers_are_kept(logs):
    raw = members(logs["eval"])
    header, reductions = orjson.loads(raw["header.json"]), orjson.loads(raw["reductions.json"])
    samples = [n for n in raw if n.startswith("samples/")]
    imp = import_path(logs["eval"])
    assert imp.status == "done", imp.problems
    trials = Trial.objects.all()
    assert trials.count() == len(samples) == header["results"]["total_samples"]  # (sample × epoch, once each)
    assert trials.values("task").distinct().count() == len(samples) // header["eval"]["config"]["epochs"]
    assert sorted(trials.filter(task__name="add").values_list("attempt", flat=True)) == [1, 2]
    assert Job.objects.get().result["reductions"] == reductions


def test_a_subagents_prompt_is_read_from_the_message_pool_its_input_refs_name(logs):
    sample = orjson.loads(next(b for n, b in members(logs["subagent"]).items() if n.startswith("samples/")))
    pool = sample["events_data"]["messages"]
    model_events = [e for e in sample["events"] if e["event"] == "model"]
    assert all(e["input"] == [] and e["input_refs"] for e in model_events)  # (de-duplicated: no input written)
    helper_call = next(e for e in model_events if "transfer_to_helper" not in {t["name"] for t in e["tools"]})
    prompt = []
    for start, end in helper_call["input_refs"]:
        prompt += pool[start:end]

    def text(content: str) -> str:  # (long texts are the sample's attachments)
        return sample["attachments"].get(content.removeprefix("attachment://"), content)

    lead = []
    for message in prompt:
        if message["role"] not in ("system", "user"):
            break
        lead.append(message)
    imp = import_path(logs["subagent"])
    assert imp.status == "done", imp.problems
    helper = Trial.objects.get().trajectories.get(role="subagent")
    steps = list(Step.objects.filter(trajectory=helper).order_by("index"))[: len(lead)]
    assert lead and [(s.source, s.message_text) for s in steps] == [(m["role"], text(m["content"])) for m in lead]


def test_a_cancelled_log_with_no_sample_is_a_job_with_a_warning(logs, tmp_path):
    header = orjson.loads(members(logs["eval"])["header.json"])
    header["status"] = "cancelled"
    header["results"] |= {"total_samples": 3, "completed_samples": 3}
    log = tmp_path / "cancelled.eval"
    with zipfile.ZipFile(log, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_journal/start.json", orjson.dumps({"version": header["version"], "eval": header["eval"]}))
        archive.writestr("header.json", orjson.dumps(header))
    imp = import_path(log)
    assert imp.status == "done", imp.problems
    assert Job.objects.get().result["status"] == "cancelled" and not Trial.objects.exists()
    [said] = [p for p in imp.problems if "no sample" in p["message"]]
    assert said["severity"] == "warning" and "3 of 3" in said["message"] and said["file"] == "cancelled.eval"


def test_an_unreadable_events_chunk_is_named_and_its_sample_kept(logs, tmp_path):
    chunked = members(logs["chunked"])
    broken = max((n for n in chunked if n.startswith("samples/add_epoch_1/events/") and n[-6].isdigit()), key=len)
    chunked[broken] = b'[{"event": "model", '  # (cut short)
    log = tmp_path / "broken.eval"
    with zipfile.ZipFile(log, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_journal/start.json", chunked.pop("_journal/start.json"))
        for name, data in chunked.items():
            archive.writestr(name, data)
    imp = import_path(log)
    assert imp.status == "done", imp.problems
    assert Trial.objects.count() == len({n.split("/")[1] for n in chunked if n.endswith("/sample.json")})
    [said] = [p for p in imp.problems if p["json_path"] == broken]
    assert said["severity"] == "warning" and said["file"] == "broken.eval" and "events chunk" in said["message"]
    assert Trial.objects.filter(name="add_epoch_1").exists()
