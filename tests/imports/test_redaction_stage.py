"""The redaction stage (issue 40): a parser returns what it found, the redacted values and the redactions
naming them; one function then withholds them from every field of the parsed trial or pack."""

from __future__ import annotations

import json

import orjson

from tests.builders import good_steps, write_trial
from trials.imports import rescrub
from trials.ingest import redaction
from trials.ingest.formats import harbor
from trials.ingest.records import (
    ParsedArtifact,
    ParsedContextRecord,
    ParsedCriterion,
    ParsedEvent,
    ParsedPack,
    ParsedPermission,
    ParsedTrial,
)
from trials.models import ContextRecord, PermissionDecision, RuntimeEvent, Trajectory, Trial

CANARY = "LEAKCANARY-40"
ITEM = {"item_id": "item-40", "content": CANARY}
TEXT = json.dumps(ITEM)  # the item as JSON inside a text
NAMED = {"item-40": {"fields": []}}


def everything(trial: ParsedTrial) -> str:
    """Every value of the trial, its steps read (a lazy sequence is consumed)."""
    for trajectory in trial.trajectories:
        trajectory.steps = list(trajectory.steps)
    trial.events, trial.permissions = list(trial.events), list(trial.permissions)
    return repr(trial)


def harbor_folder(root):
    steps = good_steps()
    steps[1]["tool_calls"][0]["arguments"] = dict(ITEM)
    trial_dir = write_trial(root / "jobs", steps=steps)
    lines = [
        {"type": "context.item.added", "eventId": "e1", "sessionId": "s1", "payload": {"item": dict(ITEM)}},
        {"type": "permission.requested", "eventId": "e2", "sessionId": "s1",
         "payload": {"actionId": "act-1", "prompt": f"May I use {TEXT}?", "scope": {"item": dict(ITEM)}}},
        {"type": "permission.resolved", "eventId": "e3", "sessionId": "s1",
         "payload": {"actionId": "act-1", "decision": "deny", "reason": f"it holds {TEXT}"}},
        {"type": "context.redaction.applied", "eventId": "e4", "sessionId": "s1",
         "payload": {"redaction_id": "r1", "item_id": "item-40", "reason": "pii"}},
    ]  # fmt: skip
    (trial_dir / "events.jsonl").write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    return trial_dir


def test_a_parser_returns_the_redacted_value_and_the_redaction_and_the_stage_withholds_it(tmp_path):
    trial_dir = harbor_folder(tmp_path)
    [trial] = harbor.parse_single_trial(trial_dir, trial_dir.name).iter_trials()
    assert set(trial.redactions) == {"item-40"}  # what the parser found
    assert CANARY in repr(trial.events) and CANARY in repr(trial.permissions)  # as found: it scrubs nothing
    redaction.withhold_redacted(trial)
    assert CANARY not in everything(trial)
    [permission] = trial.permissions
    assert permission.decision == "deny" and redaction.REDACTED in permission.prompt + permission.reason
    [main] = trial.trajectories
    assert main.withheld and not main.steps_in_file  # its steps are served as scrubbed copies
    assert main.steps[1].tool_calls[0].arguments == {"item_id": "item-40", "content": redaction.REDACTED}


def test_the_stage_reaches_every_field_of_a_parsed_trial():
    event = {"type": "tool.call.completed", "eventId": "e1", "payload": {"result": dict(ITEM)}}
    trial = ParsedTrial(
        key="k",
        source_format="lime",
        name="t",
        exception_message=TEXT,
        documents={"result": {"item": dict(ITEM)}},
        texts={"trial.log": f"printed {TEXT}"},
        criteria=[ParsedCriterion("c", 1.0, reasoning=TEXT, evidence_refs=[dict(ITEM)], raw={"i": dict(ITEM)})],
        artifacts=[ParsedArtifact("a", raw={"item": dict(ITEM)})],
        events=iter([ParsedEvent(event["type"], "e1", None, None, {}, event["payload"], {}, event)]),  # lazy
        permissions=[ParsedPermission("act", scope={"i": dict(ITEM)}, prompt=TEXT, reason=TEXT, raw={"i": ITEM})],
        context_records=[ParsedContextRecord("item", "item-40", data=dict(ITEM))],
        benchmark={"note": TEXT},
        exported={"item": dict(ITEM)},
        received_spans=[{"span_id": "s1", "attrs": {"gen_ai.input.messages": TEXT}, "events": [dict(ITEM)]}],
        redactions=NAMED,
    )
    redaction.withhold_redacted(trial)
    assert CANARY not in everything(trial)
    assert trial.key == "k" and trial.name == "t"


def test_a_pack_of_events_and_context_records_of_no_trial_is_withheld_by_its_own_redactions():
    record = {"redaction_id": "r1", "item_id": "item-40", "redaction_method": "mask"}
    event = {"type": "context.item.added", "eventId": "e1", "payload": {"item": dict(ITEM)}}
    pack = ParsedPack(
        kind="runtime-events",
        events=[ParsedEvent(event["type"], "e1", None, None, {}, event["payload"], {}, event)],
        context_records=[ParsedContextRecord("redaction", "r1", data=record)],
    )
    redaction.withhold_redacted(pack)
    assert CANARY not in repr(pack) and set(pack.redactions) == {"item-40"}
    assert pack.events[0].payload == {"item": {"item_id": "item-40", "content": redaction.REDACTED}}
    assert event["payload"]["item"]["content"] == CANARY  # the parser's values are not changed in place


def test_a_later_redactions_rescrub_reads_its_tables_from_the_models_permissions_included():
    covered = {columns.model: {f.name for f in columns.fields} for columns in rescrub.trial_columns()}
    assert {"prompt", "scope", "reason", "raw"} <= covered[PermissionDecision]
    assert "raw" in covered[RuntimeEvent] and "data" in covered[ContextRecord] and "header" in covered[Trajectory]
    assert {"documents", "exception_message"} <= covered[Trial]
