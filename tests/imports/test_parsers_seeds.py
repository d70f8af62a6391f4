"""Parsers for the non-Harbor seed formats, against the real reference samples.

Samples are read in place from /work/shared/reference (never copied into the repo);
small inline inputs cover shapes the samples lack. No database needed.
"""

from __future__ import annotations

import copy
import json

import pytest

from tests.builders import REFERENCE
from trials.ingest import context_kinds, documents, redaction
from trials.ingest.formats import agentcontext, agentqc, agentv, lime, lime_threads, openchrome
from trials.ingest.jsonio import load_jsonl
from trials.ingest.records import ParsedEvent, ParsedPack

pytestmark = [
    pytest.mark.sqlite_only("no database: the parsers turn files into records"),
]


def load(rel: str):
    return json.loads((REFERENCE / rel).read_text(encoding="utf-8"))


def jsonl_rows(rel: str) -> list[tuple[int, dict]]:
    rows, problems = load_jsonl(REFERENCE / rel, rel)
    assert problems == []
    return rows


def event(type_: str, seq: int, **fields) -> dict:
    return {
        "type": type_,
        "eventId": f"evt_{seq}",
        "timestamp": f"2026-05-11T10:00:{seq:02d}Z",
        "schemaVersion": "lime-profile-0.4.0",
        "runtimeId": "rt",
        "sessionId": "s",
        "threadId": "th",
        "turnId": "tu",
        "sequence": seq,
        **fields,
    }


# ---------------------------------------------------------------- Lime runtime


def test_evidence_pack_becomes_one_lime_trial_keyed_by_trial_id():
    data = load("lime-agentruntime/benchmark-trial-pack.json")
    assert lime.is_evidence_pack(data)
    trial = lime.parse_evidence_pack(data, "benchmark-trial-pack.json")
    bench = data["benchmark"]
    assert trial.key == "lime:" + bench["trialId"]
    assert trial.source_format == "lime"
    assert (trial.dataset.name, trial.dataset.version, trial.dataset.ref) == (
        bench["datasetId"],
        bench["datasetVersion"],
        bench["datasetRef"],
    )
    assert (trial.task.name, trial.task.source) == (bench["taskId"], bench["taskTomlRef"])
    assert trial.configuration.key == bench["configurationId"]
    assert trial.configuration.role == "candidate"
    assert trial.configuration.profiles["singleChangedVariable"] == bench["singleChangedVariable"]


def test_evidence_pack_keeps_reward_metrics_and_every_block():
    data = load("lime-agentruntime/benchmark-trial-pack.json")
    trial = lime.parse_evidence_pack(data, "pack.json")
    assert trial.reward == 1.0 and trial.rewards == {"reward": 1.0}
    assert trial.status == "passed"
    assert trial.failure_category == ""  # "none" means no failure
    assert trial.cost_usd == data["metrics"]["costUsd"]
    assert trial.phases["total"]["seconds"] == data["metrics"]["durationMs"] / 1000
    assert trial.benchmark == data["benchmark"]
    assert trial.runtime_correlation == data["runtimeCorrelation"]
    assert trial.refs == data["refs"]
    assert trial.documents["evidence_pack"] == data
    assert trial.provenance["total_tokens"] == data["metrics"]["tokens"]
    assert [c.name for c in trial.criteria] == data["reward"]["criteria"]
    assert all(c.score is None for c in trial.criteria)
    assert trial.present == {"evidence_pack"}
    assert "trajectory" in trial.provenance["claimed_evidence"]


def test_evidence_pack_with_timeout_metric_is_timeout_and_without_reward_is_unknown():
    data = copy.deepcopy(load("lime-agentruntime/benchmark-trial-pack.json"))
    data["metrics"]["timeout"] = True
    assert lime.parse_evidence_pack(data, "p").status == "timeout"
    data["metrics"].pop("timeout")
    data["metrics"].pop("reward")
    data.pop("reward")
    trial = lime.parse_evidence_pack(data, "p")
    assert trial.status == "unknown" and trial.reward is None


def test_evidence_pack_without_trial_id_is_keyed_by_path_with_a_warning():
    data = copy.deepcopy(load("lime-agentruntime/benchmark-trial-pack.json"))
    del data["benchmark"]["trialId"]
    trial = lime.parse_evidence_pack(data, "packs/a.json")
    assert trial.key == "lime:packs/a.json"
    assert trial.problems and trial.problems[0].severity == "warning"


@pytest.mark.parametrize("name", sorted(p.name for p in (REFERENCE / "lime-agentruntime").glob("*-event.json")))
def test_each_reference_event_file_is_one_event_with_all_its_ids(name):
    data = load(f"lime-agentruntime/{name}")
    assert lime.is_runtime_event(data)
    pack = lime.parse_event_file(data, name)
    assert pack.kind == "runtime-events" and len(pack.events) == 1
    parsed = pack.events[0]
    assert (parsed.type, parsed.event_id, parsed.sequence) == (data["type"], data["eventId"], data["sequence"])
    assert parsed.timestamp.tzinfo is not None
    for key in lime.CORRELATION_KEYS:
        assert parsed.correlation.get(key) == data.get(key)
    assert parsed.payload == data["payload"]
    assert parsed.raw == data
    assert pack.problems == []


def test_benchmark_event_correlation_includes_trial_id():
    obj = event(
        "benchmark.trial.started",
        1,
        taskId="t",
        runId="r",
        benchmark={"trialId": "trial-1"},
        refs={"trajectoryRef": "x"},
        payload={},
    )
    parsed = lime.parse_event(obj, "e.jsonl", 3)
    assert parsed.correlation["trialId"] == "trial-1"
    assert parsed.line == 3 and parsed.refs == {"trajectoryRef": "x"}
    assert not lime.is_evidence_pack(obj)  # an event is not a trial pack


def test_event_rows_report_each_non_event_line():
    rows = [
        (1, event("turn.started", 1, payload={})),
        (2, {"hello": "world"}),
        (3, event("turn.completed", 2, payload={})),
    ]
    events, problems = lime.parse_event_rows(rows, "events.jsonl")
    assert [e.line for e in events] == [1, 3]
    assert [p.line for p in problems] == [2]


def test_naive_timestamp_is_kept_naive_with_a_warning():
    obj = event("turn.started", 1, payload={})
    obj["timestamp"] = "2026-05-11T10:00:00"
    events, problems = lime.parse_event_rows([(1, obj)], "e.jsonl")
    assert events[0].timestamp.tzinfo is None
    assert problems[0].severity == "warning"


def test_thread_snapshot_is_a_document_with_counts():
    data = load("lime-agentruntime/thread-read-snapshot.json")
    assert lime_threads.is_thread_snapshot(data) and not lime.is_runtime_event(data)
    doc = lime_threads.parse_thread_snapshot(data, "snap.json")
    assert doc.kind == "lime-thread-snapshot" and doc.data == data
    assert doc.counts["threads"] == len(data["threads"])
    assert doc.counts["tasks"] == len(data["tasks"])
    assert doc.counts["attempts"] == sum(len(t["attempts"]) for t in data["tasks"])


def test_lime_profile_event_schema_is_a_json_schema_not_an_event():
    data = load("lime-agentruntime/agentruntime-lime-profile-event.schema.json")
    assert documents.is_json_schema(data) and not lime.is_runtime_event(data)
    pack = lime.parse(data, "schema.json")
    assert pack.documents[0].kind == "json-schema"
    assert pack.documents[0].title == data["title"]


# ---------------------------------------------------------------- permissions


def test_unresolved_action_required_stays_pending():
    data = load("lime-agentruntime/tool-approval-action-required-event.json")
    perms = lime.permissions_from_events(lime.parse_event_file(data, "a.json").events)
    assert len(perms) == 1
    perm = perms[0]
    assert perm.action_id == data["actionId"] and perm.decision == "pending"
    assert perm.tool_name == "write_file" and perm.scope == {"path": "README.md"}
    assert perm.prompt == data["payload"]["prompt"] and perm.requested_at is not None


def test_denied_action_followed_by_tool_completed_is_a_side_effect_after_denial():
    rows = [
        event(
            "action.required",
            1,
            actionId="a1",
            toolCallId="call-1",
            stepId="st",
            payload={"actionType": "tool_permission", "toolName": "write_file"},
        ),
        event(
            "action.resolved",
            2,
            actionId="a1",
            payload={"decision": "denied", "decisionSource": "user", "reason": "unsafe"},
        ),
        event("tool.completed", 3, stepId="st", toolCallId="call-1", payload={}),
    ]
    events, _ = lime.parse_event_rows(list(enumerate(rows, 1)), "e.jsonl")
    [perm] = lime.permissions_from_events(events)
    assert perm.decision == "deny" and perm.decided_by == "user" and perm.reason == "unsafe"
    assert perm.tool_call_id == "call-1"
    assert perm.side_effect_after_denial is True
    assert len(perm.raw["events"]) == 2


def test_tool_event_before_the_denial_is_not_a_side_effect():
    rows = [
        event("tool.started", 1, stepId="st", toolCallId="call-1", payload={}),
        event("action.required", 2, actionId="a1", toolCallId="call-1", payload={}),
        event("action.resolved", 3, actionId="a1", payload={"decision": "deny"}),
    ]
    events, _ = lime.parse_event_rows(list(enumerate(rows, 1)), "e.jsonl")
    [perm] = lime.permissions_from_events(events)
    assert perm.decision == "deny" and perm.side_effect_after_denial is False


def test_permission_events_map_decisions_and_resolved_payload_can_flag_side_effect():
    rows = [
        event("permission.requested", 1, actionId="p1", payload={"scope": {"path": "/etc"}}),
        event(
            "permission.resolved",
            2,
            actionId="p1",
            payload={
                "decision": "reject",
                "decision_source": "policy",
                "decision_reason": "outside workspace",
                "rule_refs": ["r1"],
                "side_effect": True,
            },
        ),
        event("permission.evaluated", 3, actionId="p2", payload={"decision": "ask"}),
        event("permission.resolved", 4, actionId="p3", payload={"decision": "updated_input"}),
        event("action.resolved", 5, actionId="p4", payload={"decision": "allow"}),
    ]
    events, _ = lime.parse_event_rows(list(enumerate(rows, 1)), "e.jsonl")
    perms = {p.action_id: p for p in lime.permissions_from_events(events)}
    assert perms["p1"].decision == "deny" and perms["p1"].decided_by == "policy"
    assert perms["p1"].reason == "outside workspace" and perms["p1"].raw["rule_refs"] == ["r1"]
    assert perms["p1"].side_effect_after_denial is True
    assert perms["p2"].decision == "pending"
    assert perms["p3"].decision == "edit"
    assert perms["p4"].decision == "approve"


# ---------------------------------------------------------------- Agent Context


SECRET = "sk-live-SECRET"


def context_event(event_type: str, event_id: str, data: dict, **ids) -> dict:
    return {
        "schema_version": "0.1.1",
        "event_id": event_id,
        "event_type": event_type,
        "source": "lime",
        "time": "2026-05-11T10:00:00Z",
        "session_id": "sess_A",
        "thread_id": "thread_A",
        "turn_id": "turn_A",
        **ids,
        "data": data,
    }


def withheld(records: list) -> list:
    """The records as the import stores them: through its redaction stage, after the parser."""
    pack = ParsedPack(kind="agent-context", context_records=records)
    redaction.withhold_redacted(pack)
    return pack.context_records


def test_masked_item_never_shows_its_raw_value_anywhere():
    item = {
        "item_id": "item-key",
        "context_kind": "file",
        "content_mode": "inline",
        "visibility": ["model"],
        "content": SECRET,
        "redaction_state": "masked",
        "redaction_reason": "credential",
        "policy_refs": ["policy://secrets"],
    }
    obj = context_event("context.item.added", "ev-1", {"item": item})
    records = withheld(agentcontext.parse_context_rows([(1, obj)], "ctx.jsonl")[0])
    assert SECRET not in repr(records)
    [rec] = [r for r in records if r.kind == "item"]
    assert rec.status == "redacted" and rec.redaction_state == "masked"
    assert rec.reason == "credential" and rec.data["policy_refs"] == ["policy://secrets"]
    assert rec.data["content"] == redaction.REDACTED
    assert item["content"] == SECRET  # the input is not mutated


def test_redaction_record_scrubs_the_item_it_names_and_keeps_reason_and_policy_refs():
    bundle = {
        "items": [
            {
                "item_id": "i1",
                "context_kind": "doc",
                "content_mode": "inline",
                "visibility": ["model"],
                "content": "fine",
                "api_key": SECRET,
                "redaction_state": "none",
            }
        ],
        "redactions": [
            {
                "redaction_id": "red-1",
                "item_id": "i1",
                "redaction_state": "removed",
                "redaction_method": "drop",
                "redacted_fields": ["api_key"],
                "reason": "privacy risk",
                "policy_refs": ["policy://pii"],
            }
        ],
        "assembly": {
            "assembly_id": "asm-1",
            "target": "model_request",
            "source_item_refs": ["i1"],
            "ordered_blocks": [{"item_ref": "i1", "content": SECRET}],
        },
    }
    pack = agentcontext.parse_context_document(bundle, "bundle.json")
    redaction.withhold_redacted(pack)
    assert SECRET not in repr(pack)
    by_kind = {r.kind: r for r in pack.context_records}
    assert by_kind["item"].status == "redacted"
    assert by_kind["item"].data["redaction"]["policy_refs"] == ["policy://pii"]
    assert by_kind["redaction"].status == "redacted"
    assert by_kind["redaction"].reason == "privacy risk"
    assert by_kind["redaction"].data["redaction_method"] == "drop"


def test_scrub_redacted_blanks_named_fields_and_leaves_unredacted_items_alone():
    plain = {"item_id": "a", "content": "ok", "redaction_state": "none"}
    assert redaction.scrub_redacted(plain) is plain
    partial = {"item_id": "b", "meta": {"token": SECRET}, "redacted_fields": ["meta.token"]}
    assert redaction.scrub_redacted(partial)["meta"]["token"] == "[redacted]"
    for state in ("masked", "removed", "summarized", "encrypted_ref", "policy_blocked", "unknown"):
        scrubbed = redaction.scrub_redacted({"item_id": "c", "content": SECRET, "redaction_state": state})
        assert SECRET not in repr(scrubbed)


def test_selection_gives_selected_and_omitted_records_with_reasons():
    selection = {
        "selection_id": "sel-1",
        "surface_id": "surf",
        "created_at": "2026-05-11",
        "task_id": "task_1",
        "run_id": "run_2",
        "attempt_id": "attempt_2",
        "selected_item_refs": ["i1", {"item_id": "i2", "reason": "high relevance"}],
        "omitted_item_refs": [
            {"item_id": "i3", "reason": "budget"},
            {"item_ref": "i4", "omission_reason": "stale source"},
        ],
    }
    records = agentcontext.parse_context_document(selection, "sel.json").context_records
    statuses = {r.record_id: (r.status, r.reason) for r in records}
    assert statuses == {
        "sel-1": ("", ""),
        "sel-1:i1": ("selected", ""),
        "sel-1:i2": ("selected", "high relevance"),
        "sel-1:i3": ("omitted", "budget"),
        "sel-1:i4": ("omitted", "stale source"),
    }
    head = records[0]
    assert head.data["omitted_item_refs"][1]["item_id"] == "i4"
    assert [r["reason"] for r in head.data["omitted_item_refs"]] == ["budget", "stale source"]
    # ACTX-AR-ID-002: attempt ids are kept exactly, camelCase like runtime events
    assert head.correlation == {"taskId": "task_1", "runId": "run_2", "attemptId": "attempt_2"}


def test_context_event_keeps_runtime_ids_and_emits_budget_compaction_and_missing_records():
    data = {
        "budget": {
            "budget_id": "b1",
            "max_tokens": 8000,
            "actual_tokens": 9100,
            "overflow_strategy": "summarize_oldest",
            "truncation_records": [{"item_id": "i9", "dropped_tokens": 1100}],
        },
        "compaction": {
            "compaction_id": "c1",
            "scope": "thread",
            "method": "summary",
            "source_item_refs": ["i1", "i2"],
            "coverage": {"from": 1, "to": 40},
            "summary_ref": "ctx://summary/1",
            "created_at": "2026-05-11",
        },
        "missing_context": {
            "missing_id": "m1",
            "scope": "turn",
            "severity": "blocking",
            "status": "requested",
            "question": "Need access to secrets.env?",
            "requested_from": "user",
            "blocked_actions": ["deploy"],
            "created_at": "2026-05-11",
        },
    }
    obj = context_event("context.budget.applied", "ev-7", data, context_id="ctx-1", tool_call_id="call-9")
    records, _ = agentcontext.parse_context_rows([(7, obj)], "ctx.jsonl")
    kinds = {r.kind: r for r in records}
    assert set(kinds) == {"event", "budget", "compaction", "missing"}
    for rec in records:
        assert rec.correlation["sessionId"] == "sess_A"
        assert rec.correlation["toolCallId"] == "call-9"
        assert rec.context_id == "ctx-1"
    assert kinds["budget"].data["overflow_strategy"] == "summarize_oldest"
    assert kinds["budget"].data["truncation_records"][0]["dropped_tokens"] == 1100
    assert kinds["compaction"].status == "compacted"
    assert kinds["compaction"].data["coverage"] == {"from": 1, "to": 40}
    missing = kinds["missing"]
    assert missing.status == "missing"
    assert (missing.data["owner"], missing.data["requested_action"], missing.data["safe_summary"]) == (
        "user",
        ["deploy"],
        "Need access to secrets.env?",
    )


def test_injection_without_source_refs_is_flagged():
    obj = {"injection_id": "inj-1", "target": "model_request", "model_request_id": "mr-1"}
    pack = agentcontext.parse_context_document(obj, "inj.json")
    assert pack.context_records[0].kind == "injection"
    assert pack.context_records[0].data["model_request_id"] == "mr-1"
    assert any("source item refs" in p.message for p in pack.problems)


def test_context_record_declaring_runtime_status_is_kept_but_ignored():
    obj = context_event("context.turn.completed", "ev-gov", {"status": "completed", "tool_status": "succeeded"})
    records, problems = agentcontext.parse_context_rows([(4, obj)], "ctx.jsonl")
    assert records[0].status == ""
    assert records[0].data["data"]["status"] == "completed"
    assert len(problems) == 3
    assert all(
        p.message == "context record declares runtime status; ignored" and p.severity == "warning" for p in problems
    )


def test_context_rows_report_lines_that_are_not_context():
    rows = [(1, context_event("context.item.added", "e1", {})), (2, {"foo": 1})]
    records, problems = agentcontext.parse_context_rows(rows, "ctx.jsonl")
    assert [r.record_id for r in records] == ["e1"]
    assert [p.line for p in problems] == [2]


def test_runtime_context_event_payload_yields_context_records_with_runtime_ids():
    payload = {"item": {"item_id": "i1", "context_kind": "file", "content": SECRET, "redaction_state": "encrypted_ref"}}
    runtime = lime.parse_event(event("context.resolved", 5, payload=payload), "e.jsonl", 5)
    records = withheld(agentcontext.context_records_from_runtime_event(runtime))
    assert [r.kind for r in records] == ["item"]
    assert records[0].correlation["threadId"] == "th"
    assert SECRET not in repr(records)
    other = ParsedEvent("tool.started", "x", None, None, {}, payload, {}, {})
    assert agentcontext.context_records_from_runtime_event(other) == []


@pytest.mark.parametrize("name", sorted(p.name for p in (REFERENCE / "lime-agentcontext").glob("*.schema.json")))
def test_agent_context_schema_files_are_json_schemas_not_records(name):
    data = load(f"lime-agentcontext/{name}")
    assert documents.is_json_schema(data)
    assert not context_kinds.is_context_record(data) and not context_kinds.is_context_event(data)
    assert documents.parse_json_schema(data, name).counts["properties"] == len(data["properties"])


# ---------------------------------------------------------------- Agent QC


def test_benchmark_experiment_gives_one_job_and_one_trial_per_trials_entry():
    data = load("lime-agentqc/lime-benchmark-experiment.json")
    pack = agentqc.parse(data, "exp.json")
    assert pack.kind == "agentqc-experiment"
    [job] = pack.jobs
    assert job.key == "agentqc:" + data["id"]
    assert job.extra == {k: v for k, v in data.items() if k != "trials"}
    trials = list(pack.trials)
    assert len(trials) == len(data["trials"]) == pack.trial_count
    for trial, raw in zip(trials, data["trials"], strict=True):
        assert trial.key == f"agentqc:{data['id']}:{raw['trial_id']}"
        assert trial.source_format == "agentqc" and trial.job_key == job.key
        assert trial.dataset.name == data["dataset"]["id"]
        assert trial.dataset.version == data["dataset"]["version"]
        assert trial.task.name == raw["task_id"] and trial.task.definition["id"] == raw["task_id"]
        assert trial.configuration.key == raw["configuration_id"]
        assert trial.reward == raw["reward"] and trial.status == "passed"
        assert trial.phases["total"]["seconds"] == raw["duration_ms"] / 1000
        assert trial.cost_usd == raw["cost"]["cost_usd"]
        assert trial.provenance["total_tokens"] == raw["cost"]["tokens"]
        assert trial.runtime_correlation == raw["runtime_correlation"]
        assert trial.refs["trajectory_ref"] == raw["trajectory_ref"]
        assert trial.refs["evidence_refs"] == raw["evidence_refs"]
        assert trial.attempt == raw["attempt"] and trial.failure_category == ""
        assert trial.documents["trial"] == raw
    roles = {t.configuration.key: t.configuration.role for t in trials}
    assert roles == {"baseline-current": "baseline", "candidate-feedback-v2": "candidate"}
    assert trials[1].configuration.profiles["tool_profile"] == "tool-feedback-v2"


def test_scenario_manifest_counts_every_scenario_failure_mode_and_lane():
    data = load("lime-app/agent-qc-scenarios.manifest.json")
    pack = agentqc.parse(data, "manifest.json")
    [doc] = pack.documents
    assert doc.kind == "agentqc-scenario-manifest" and doc.data == data
    assert doc.counts["scenarios"] == len(data["scenarios"])
    assert doc.counts["failure_modes"] == sum(len(s["failureModes"]) for s in data["scenarios"])
    assert doc.counts["lanes"] == len(data["lanes"])


def test_agent_qc_evidence_pack_counts_results_blockers_and_waivers():
    data = {
        "schemaVersion": "v1",
        "runId": "run-1",
        "generatedAt": "2026-07-01T00:00:00Z",
        "subject": {"repo": "lime", "ref": "main", "changedFiles": []},
        "laneResults": [{"laneId": "L0", "status": "pass", "commands": []}],
        "scenarioResults": [
            {"scenarioId": "a", "status": "fail", "evidenceRefs": [], "failureModes": ["approval bypass"]},
            {"scenarioId": "b", "status": "pass", "evidenceRefs": []},
        ],
        "verdict": {
            "status": "fail",
            "summary": "",
            "blockers": ["P0 a"],
            "waivers": [{"id": "w", "reason": "r", "owner": "o", "expiresAt": "2026-08-01"}],
            "nextAction": "",
        },
    }
    [doc] = agentqc.parse(data, "evidence.json").documents
    assert doc.kind == "agentqc-evidence"
    assert doc.counts == {"scenario_results": 2, "lane_results": 1, "failure_modes": 1, "blockers": 1, "waivers": 1}


def test_agent_qc_plan_and_verdict_are_documents():
    plan = load("lime-agentqc/agent-qc-plan.json")
    [doc] = agentqc.parse(plan, "plan.json").documents
    assert doc.kind == "agentqc-plan" and doc.counts["cases"] == len(plan["cases"])
    verdict = load("lime-agentqc/qcloop-verdict.json")
    [doc] = agentqc.parse(verdict, "verdict.json").documents
    assert doc.kind == "agentqc-verdict" and doc.counts["passed"] == 0
    assert doc.counts["evidence_refs"] == len(verdict["evidence_refs"])


def test_agent_qc_schemas_and_foreign_files_are_not_agent_qc():
    for rel in (
        "lime-agentqc/qc-benchmark.schema.json",
        "lime-app/agent-qc-evidence.schema.json",
        "lime-agentruntime/benchmark-trial-pack.json",
    ):
        assert agentqc.parse(load(rel), rel) is None


# ---------------------------------------------------------------- AgentV


AGENTV_FILES = sorted(p.name for p in (REFERENCE / "agentv").glob("*.jsonl"))


@pytest.mark.parametrize("name", AGENTV_FILES)
def test_agentv_file_gives_one_trial_per_non_empty_line(name):
    text = (REFERENCE / "agentv" / name).read_text(encoding="utf-8")
    pack = agentv.parse_rows(jsonl_rows(f"agentv/{name}"), name)
    trials = list(pack.trials)
    assert len(trials) == len([line for line in text.splitlines() if line.strip()])
    assert pack.problems == [] and len(pack.jobs) == 1
    assert len({t.key for t in trials}) == len(trials)
    for trial in trials:
        assert trial.source_format == "agentv" and trial.job_key == pack.jobs[0].key
        assert trial.key.startswith(pack.jobs[0].key + ":")


@pytest.mark.parametrize("name", AGENTV_FILES)
def test_agentv_row_keys_are_all_kept(name):
    rows = jsonl_rows(f"agentv/{name}")
    for (_, row), trial in zip(rows, agentv.parse_rows(rows, name).trials, strict=True):
        assert trial.documents["row"] == row
        for key in row:
            assert key in trial.documents["row"] or key in trial.provenance


def test_agentv_multi_agent_rows_map_scores_tokens_cost_and_assertions():
    rows = jsonl_rows("agentv/multi-agent.eval.results.jsonl")
    trials = list(agentv.parse_rows(rows, "multi.jsonl").trials)
    first, raw = trials[0], rows[0][1]
    assert first.key == ("agentv:multi.jsonl@2026-02-22T10:00:01.000Z:research-question:gpt-4o:0:0")
    assert first.dataset.name == "multi-agent" and first.task.name == "research-question"
    assert first.configuration.key == first.configuration.model_name == "gpt-4o"
    assert first.reward == raw["score"]
    assert first.rewards == {"score": 0.75, "response_quality": 0.75, "routing_accuracy": 1.0, "step_efficiency": 1.0}
    assert (first.input_tokens, first.output_tokens) == (8500, 1667)
    assert first.cost_usd == raw["trace"]["cost_usd"]
    assert first.phases["total"]["seconds"] == raw["trace"]["duration_ms"] / 1000
    assert [(c.name, c.score) for c in first.criteria] == [(a["text"], float(a["passed"])) for a in raw["assertions"]]
    assert 0 < raw["score"] < 1 and first.status == "partial"  # (a score below full marks, not a failure)
    assert all(t.status == "passed" for t in trials if t.reward == 1.0)


def test_agentv_camel_case_row_is_normalised_to_snake_case():
    [(_, raw)] = jsonl_rows("agentv/camel-replay-index.jsonl")
    row = agentv.normalize_row(raw)
    assert row["test_id"] == "wtg-replay-fail" and "testId" not in row
    assert row["execution_status"] == "quality_failure" and row["duration_ms"] == 1234
    assert row["token_usage"] == {"input": 10, "output": 5} and row["cost_usd"] == 0.012
    assert row["trace"] == {"event_count": 1, "tool_calls": {"rg": 1}, "error_count": 0}
    [trial] = agentv.parse_rows([(1, raw)], "camel.jsonl").trials
    assert (trial.input_tokens, trial.output_tokens, trial.cost_usd) == (10, 5, 0.012)
    assert trial.phases["total"]["seconds"] == 1.234
    assert trial.provenance["execution_status"] == "quality_failure"


def test_agentv_token_counts_that_are_not_counts_are_not_indexed_but_kept_in_the_row():
    usage = {"input": -5, "output": 2.5, "cached": 2**64}
    message = {"role": "assistant", "content": "x", "token_usage": {"input": -1, "output": "7"}}
    row = {"test_id": "t", "score": 1, "token_usage": usage, "output": [message]}
    [trial] = agentv.parse_rows([(1, row)], "odd.jsonl").trials
    assert (trial.input_tokens, trial.output_tokens, trial.cached_tokens) == (None, None, None)
    assert trial.documents["row"]["token_usage"] == usage
    [step] = trial.trajectories[0].steps
    assert (step.prompt_tokens, step.completion_tokens) == (None, 7)


def test_agentv_keeps_unknown_keys_and_camel_key_that_disagrees():
    row = agentv.normalize_row({"testId": "a", "test_id": "b", "score": 1, "novel": {"x": 1}})
    assert row["test_id"] == "b" and row["testId"] == "a" and row["novel"] == {"x": 1}


def test_agentv_legacy_hits_and_misses_become_criteria():
    legacy = {
        "timestamp": "2025-10-01T00:00:00Z",
        "test_id": "legacy-1",
        "dataset": "demo",
        "score": 0.5,
        "target": "default",
        "hits": ["greets user", "uses name"],
        "misses": ["no sign-off"],
        "reasoning": "partial",
        "metadata": {"source_commit": "4f3e2d1", "test_patch": "cases/legacy-1/test.patch"},
    }
    [trial] = agentv.parse_rows([(1, legacy)], "legacy.jsonl").trials
    assert [(c.name, c.score) for c in trial.criteria] == [
        ("greets user", 1.0),
        ("uses name", 1.0),
        ("no sign-off", 0.0),
    ]
    assert trial.status == "partial" and trial.dataset.name == "demo"  # (0.5, a miss: a score, not a failure)
    assert trial.provenance["source_commit"] == "4f3e2d1"
    assert trial.provenance["test_patch"] == "cases/legacy-1/test.patch"
    only_hits = dict(legacy, misses=[])
    assert next(iter(agentv.parse_rows([(1, only_hits)], "l.jsonl").trials)).status == "passed"


def test_agentv_execution_error_row_is_errored_and_bad_rows_are_problems():
    rows = [
        (
            1,
            {
                "test_id": "t",
                "target": "x",
                "score": 0,
                "execution_status": "execution_error",
                "error": "provider timeout",
            },
        ),
        (2, {"id": "eval case, not a result"}),
    ]
    pack = agentv.parse_rows(rows, "r.jsonl")
    [trial] = pack.trials
    assert trial.status == "errored" and trial.exception_message == "provider timeout"
    assert [p.line for p in pack.problems] == [2]


def test_agentv_run_folder_reads_summary_then_internal_index(tmp_path):
    (tmp_path / ".internal").mkdir()
    summary = {"run_id": "2026-07-01T10-00-00", "counts": {"total_tests": 2}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    rows = [
        {
            "test_id": "a",
            "target": "codex",
            "score": 1.0,
            "sample_index": 0,
            "execution_status": "ok",
            "grading_path": "a/sample-0/grading.json",
        },
        {"test_id": "a", "target": "codex", "score": 0.0, "sample_index": 1, "execution_status": "ok"},
    ]
    (tmp_path / ".internal" / "index.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\nnot json\n")
    pack = agentv.parse_run_folder(tmp_path, "runs/r1")
    assert pack.jobs[0].key == "agentv:2026-07-01T10-00-00"
    assert pack.jobs[0].extra["summary"] == summary
    keys = [t.key for t in pack.trials]
    assert keys == ["agentv:2026-07-01T10-00-00:a:codex:0:0", "agentv:2026-07-01T10-00-00:a:codex:1:0"]
    assert next(iter(pack.trials)).refs["grading_path"] == "a/sample-0/grading.json"
    assert [p.line for p in pack.problems] == [4]


# ---------------------------------------------------------------- OpenChrome


def test_openchrome_envelope_gives_one_trial_per_run_row():
    data = load("openchrome/realworld-task-completion.json")
    assert openchrome.is_envelope(data)
    pack = openchrome.parse(data, "rw.json")
    trials = list(pack.trials)
    assert len(trials) == sum(len(r.get("runs", [])) for r in data["results"])
    assert len({t.key for t in trials}) == len(trials)
    [job] = pack.jobs
    env = data["environment"]
    assert job.key == f"openchrome:{data['axis']}:{env['capturedAt']}:{env['gitSha']}"
    assert job.extra["environment"] == env and job.extra["competitors"] == data["competitors"]
    entry = job.extra["results"][0]
    assert entry["claimEligibility"] == data["results"][0]["claimEligibility"]
    assert entry["metrics"] == data["results"][0]["metrics"]
    assert entry["tasks"] == data["results"][0]["tasks"]
    assert job.extra["rows_without_runs"] == 0


def test_openchrome_run_row_maps_success_library_task_and_keeps_fault_fields():
    data = load("openchrome/realworld-task-completion.json")
    trials = list(openchrome.parse(data, "rw.json").trials)
    for trial, run in zip(trials, data["results"][0]["runs"], strict=True):
        assert trial.source_format == "openchrome"
        assert trial.reward == float(run["success"])
        assert trial.status == ("passed" if run["success"] else "failed")
        assert trial.rewards["success"] == int(run["success"])
        assert trial.configuration.key == run["library"]
        assert trial.configuration.agent_version == "1.12.4"
        assert trial.task.name == run["taskId"] and trial.task.definition["id"] == run["taskId"]
        assert trial.phases["total"]["seconds"] == run["wallTimeMs"] / 1000
        assert trial.provenance["measurementMode"] == data["results"][0]["measurementMode"]
        assert trial.provenance["faultCheckpoint"] == run["faultCheckpoint"]
        assert trial.documents["run"] == run
        if run["failureCategory"] == "none":
            assert trial.failure_category == ""


def test_openchrome_rows_of_other_axes_stay_in_the_job_and_are_counted():
    data = {
        "axis": "episode-token-cost",
        "environment": {"gitSha": "abc"},
        "competitors": [],
        "results": [{"taskId": "t1", "status": "passed"}, {"taskId": "t2"}],
    }
    pack = openchrome.parse(data, "e.json")
    assert list(pack.trials) == []
    assert pack.jobs[0].extra["rows_without_runs"] == 2
    assert pack.jobs[0].extra["results"] == data["results"]


def test_openchrome_headline_gates_file_is_a_document():
    data = load("openchrome/headline-evidence-gates.json")
    pack = openchrome.parse(data, "gates.json")
    [doc] = pack.documents
    assert doc.kind == "openchrome-headline-gates" and doc.data == data
    assert doc.counts["required_fields"] == len(data["global_required_fields"])
    assert doc.counts["issue_gates"] == len(data["issue_gates"])


def test_openchrome_result_schema_is_a_json_schema():
    data = load("openchrome/result.schema.json")
    assert documents.is_json_schema(data) and not openchrome.is_envelope(data)
    assert documents.parse_json_schema(data, "s.json").title == data["title"]


def test_every_reference_file_of_these_formats_is_claimed_by_some_parser():
    parsers = (lime.parse, agentqc.parse, openchrome.parse)
    for folder in ("lime-agentruntime", "lime-agentqc", "lime-app", "openchrome", "lime-agentcontext"):
        for path in sorted((REFERENCE / folder).glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            packs = [p(data, path.name) for p in parsers]
            claimed = [p for p in packs if isinstance(p, ParsedPack)]
            assert claimed or documents.is_json_schema(data), path.name
