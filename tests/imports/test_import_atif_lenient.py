"""ATIF as written today: ATIF-v1.8 (trajectory_id, embedded subagents beside their refs, audio parts), and
the non-conformant "ATIF-v1.6" of producers other than Harbor, read leniently with a warning at each JSON path."""

from __future__ import annotations

import json

import pytest

from tests.builders import import_path
from tests.imports.atif_helpers import lenient_file
from trials.models import ObservationResult, Step, ToolCall, Trial

pytestmark = pytest.mark.django_db


def test_a_non_conformant_v16_file_is_read_leniently_with_a_warning_per_deviation(tmp_path):
    data = lenient_file(tmp_path / "trajectory.json")
    imp = import_path(tmp_path / "trajectory.json")
    trial = Trial.objects.get()
    steps = list(Step.objects.filter(trial=trial).order_by("index"))
    assert [s.message_text for s in steps] == [
        data["steps"][0]["message"][0]["content"],
        data["steps"][1]["message"]["content"],
    ]
    unique = {c["tool_call_id"] for c in data["steps"][1]["tool_calls"]}
    assert ToolCall.objects.filter(trial=trial).count() == len(unique) == 1
    assert list(ObservationResult.objects.filter(step=steps[1]).values_list("source_call_id", flat=True)) == ["call_1"]
    totals = data["final_metrics"]
    assert (trial.input_tokens, trial.output_tokens) == (
        totals["total_prompt_tokens"],
        totals["total_completion_tokens"],
    )
    warned = {p.get("json_path") for p in imp.problems if p.get("severity") == "warning"}
    assert {
        "steps[0].message[0]",
        "steps[1].message",
        "steps[1].tool_calls[1]",
        "steps[1].observation.results",
    } <= warned


def test_a_v18_file_with_trajectory_id_embedded_subagents_and_audio_imports_whole(tmp_path):
    sub = {
        "schema_version": "ATIF-v1.8",
        "session_id": "sub-1",
        "trajectory_id": "helper-7",
        "agent": {"name": "helper", "version": "1"},
        "steps": [{"step_id": 1, "source": "agent", "message": "helped"}],
    }
    audio = {"type": "audio", "source": {"media_type": "audio/wav", "path": "clips/q.wav", "duration_sec": 2.5}}
    ref = {"trajectory_id": "helper-7"}
    data = {
        "schema_version": "ATIF-v1.8",
        "session_id": "main-1",
        "trajectory_id": "main-7",
        "agent": {"name": "voice-agent", "version": "2"},
        "steps": [
            {"step_id": 1, "source": "user", "message": [{"type": "text", "text": "listen"}, audio]},
            {"step_id": 2, "source": "agent", "message": "delegating",
             "observation": {"results": [{"content": "done", "subagent_trajectory_ref": [ref]}]}},
        ],
        "subagent_trajectories": [sub],
    }  # fmt: skip
    (tmp_path / "trajectory.json").write_text(json.dumps(data))
    imp = import_path(tmp_path / "trajectory.json")
    trial = Trial.objects.get()
    roles = dict(trial.trajectories.values_list("trajectory_id", "role"))
    assert roles == {"main-7": "main", "helper-7": "subagent"}
    first = Step.objects.get(trajectory__trajectory_id="main-7", index=0)
    assert audio["source"]["path"] in first.message_text
    assert not [p for p in imp.problems if p.get("severity") != "warning"]
