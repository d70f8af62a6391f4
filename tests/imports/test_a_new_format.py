"""A format added the way CONTRIBUTING.md says: a parser, and its entry among the detector's JSON formats
(trials/ingest/formats/detect.py's JSON_FORMATS), nothing else. A file of it goes through the real import
to a trial page; the writer, joins and pages are told nothing of it. What it declares of its trials (its
traits, in detect's FORMAT_TRAITS) it gets, as the formats that declare them do."""

import hashlib
import json

import orjson
import pytest
from django.urls import reverse

from comparisons.statistics.side_data import leaderboard_score, load_side
from comparisons.statistics.sides import Side, SideKind
from tests.builders import import_path
from trials.ingest.formats import detect
from trials.ingest.records import ConfigurationRef, FormatTraits, ParsedPack, ParsedStep, ParsedTrajectory, ParsedTrial
from trials.models import Trial

pytestmark = pytest.mark.django_db

TOY_RUN = {"toy_bench": 1, "run": "toy-run-7", "score": 0.5, "said": ["look at the repo", "patch the parser"]}


def is_toy(data):
    return isinstance(data, dict) and data.get("toy_bench") == 1


def parse_toy(file: detect.JsonFile) -> ParsedPack:
    """The toy's parser, as a real one is written: pure, its records only, its files its own."""
    steps = [
        ParsedStep(
            index=n,
            step_id=n + 1,
            source="agent",
            timestamp=None,
            model_name="",
            message_text=text,
            reasoning="",
            prompt_tokens=None,
            completion_tokens=None,
            cached_tokens=None,
            cost_usd=None,
            is_copied_context=False,
            llm_call_count=None,
            context_management="",
            tool_calls=[],
            observations=[],
            raw={"said": text},
        )
        for n, text in enumerate(file.data["said"])
    ]
    trajectory = ParsedTrajectory(
        path=file.rel,
        role="main",
        schema_version="",
        session_id="",
        trajectory_id="",
        agent={},
        final_metrics=None,
        header={},
        steps=steps,
        problems=[],
    )
    trial = ParsedTrial(
        key=f"toy:{file.data['run']}",
        source_format="toy",
        name=file.data["run"],
        configuration=ConfigurationRef(key="toy-agent", agent_name="toy-agent"),
        status="failed",
        reward=file.data["score"],
        trajectories=[trajectory],
        files=[file.rel],
        present={"trajectory"},
        files_are_its_own=True,
    )
    return ParsedPack(kind="toy-run", trials=[trial], trial_count=1)


@pytest.fixture
def toy_format(monkeypatch):
    monkeypatch.setattr(detect, "JSON_FORMATS", [detect.JsonFormat("toy log", is_toy, parse_toy), *detect.JSON_FORMATS])


def test_a_toy_format_registered_with_the_detector_imports_to_a_trial_page(toy_format, tmp_path, client_logged_in):
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(TOY_RUN))

    imp = import_path(path)

    assert imp.status == "done", imp.problems
    trial = Trial.objects.get(key="toy:toy-run-7")
    assert (trial.source_format, trial.name, trial.reward, trial.status) == ("toy", "toy-run-7", 0.5, "failed")
    # its files are its own (the parser said so): their digest is the (name, sha256) pairs of the file
    pairs = [["toy.json", hashlib.sha256(path.read_bytes()).hexdigest()]]
    assert trial.files_sha256 == hashlib.sha256(orjson.dumps(pairs)).hexdigest()
    page = client_logged_in.get(reverse("trial-detail", args=[trial.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "toy-run-7" in body and "look at the repo" in body and "patch the parser" in body


def test_a_toy_format_gets_what_its_traits_declare_and_nothing_without_them(toy_format, monkeypatch, tmp_path):
    rule = "unscored counts as 0 (the toy's accuracy)"
    plain, declared = tmp_path / "plain.json", tmp_path / "declared.json"
    plain.write_text(json.dumps(TOY_RUN))
    declared.write_text(json.dumps(TOY_RUN | {"run": "toy-run-8"}))

    assert import_path(plain).status == "done"
    monkeypatch.setitem(detect.FORMAT_TRAITS, "toy", FormatTraits("toy", lime_evidence=True, leaderboard_rule=rule))
    assert import_path(declared).status == "done"

    before, after = Trial.objects.get(key="toy:toy-run-7"), Trial.objects.get(key="toy:toy-run-8")
    assert not before.lime_evidence  # (stored as its traits were at its import: none)
    # Lime evidence: the completeness checks are its own, and it carries none of their facts
    assert after.lime_evidence and not after.is_complete and after.missing
    side = load_side(Side(SideKind.CONFIGURATION, after.configuration_id))
    assert leaderboard_score(side) == (0.5, rule)  # its one trial's reward, by its own rule
    monkeypatch.delitem(detect.FORMAT_TRAITS, "toy")
    assert leaderboard_score(load_side(Side(SideKind.CONFIGURATION, after.configuration_id))) == (None, "")


def test_without_its_entry_the_file_is_of_no_known_format(tmp_path):
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(TOY_RUN))

    imp = import_path(path)

    assert not Trial.objects.exists()
    assert any("JSON of no known pack format" in p["message"] for p in imp.problems)


@pytest.mark.parametrize("content", ['{"colour": "red"}', "plain words, no format\n"])
def test_a_file_no_parser_reads_is_rejected_naming_every_registered_format(toy_format, tmp_path, content):
    path = tmp_path / "odd.json"
    path.write_text(content)

    imp = import_path(path)

    [outcome] = imp.outcomes
    assert outcome["outcome"] == "rejected"
    registered = {f.name for f in detect.JSON_FORMATS}
    assert "toy log" in registered and len(registered) > 20  # (the real entries and the toy's)
    assert [name for name in registered if name not in outcome["reason"]] == []
