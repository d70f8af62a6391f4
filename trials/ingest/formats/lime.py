"""Lime Agent Runtime inputs: trial evidence packs, runtime events, thread snapshots.

Pure parsing: plain dicts in, `records` dataclasses out. The Lime runtime writes
camelCase; snake_case spellings are accepted too because Agent QC copies the same ids.
The small value helpers at the top are shared by the other seed parsers.
"""

from __future__ import annotations

from typing import Any

from trials.ingest.documents import is_json_schema, parse_json_schema
from trials.ingest.formats.lime_threads import is_thread_snapshot, parse_thread_snapshot
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    FormatTraits,
    PackError,
    ParsedCriterion,
    ParsedEvent,
    ParsedPack,
    ParsedPermission,
    ParsedTrial,
    Problem,
    TaskRef,
    status_from_reward,
)
from trials.ingest.values import (
    as_dict,
    as_list,
    clean_category,
    parse_time,
    pick,
    to_attempt,
    to_float,
    to_int,
    to_str,
)

TRAITS = FormatTraits("lime", lime_evidence=True, status_by_reward=True)
PROFILE_PREFIX = "lime-profile"

# Correlation ids a runtime event may carry, in the camelCase the runtime writes.
CORRELATION_KEYS = (
    "sessionId",
    "threadId",
    "turnId",
    "taskId",
    "runId",
    "attemptId",
    "stepId",
    "toolCallId",
    "actionId",
    "runtimeId",
    "traceId",
    "subagentId",
)

# First segment of `type` for every event family of the portable + Lime schemas.
EVENT_FAMILIES = frozenset(
    "session thread turn task run model reasoning tool action queue context artifact "
    "evidence subagent limit snapshot runtime permission sandbox hook policy process "
    "routing cost rate_limit quota channel job output history benchmark".split()
)

# The runtime events a trial's end and reward are told by (a live runner's commands write them too).
TRIAL_COMPLETED, TRIAL_FAILED = "benchmark.trial.completed", "benchmark.trial.failed"
REWARD_RECORDED = "benchmark.reward.recorded"

# refs key -> evidence part name; refs are claims about files, not the files themselves.
_CLAIMED_PARTS = {
    "trajectoryRef": "trajectory",
    "runtimeTranscriptRef": "runtime_transcript",
    "rewardRef": "reward",
    "rewardDetailsRef": "reward_details",
    "agentQcReportRef": "agent_qc_report",
    "artifactManifestRef": "manifest",
    "harborTrialResultRef": "result",
    "harborVerifierStdoutRef": "test_stdout",
}

_DECISIONS = {
    "allow": "approve",
    "allowed": "approve",
    "approve": "approve",
    "approved": "approve",
    "accept": "approve",
    "accepted": "approve",
    "allow_once": "approve",
    "allow_always": "approve",
    "deny": "deny",
    "denied": "deny",
    "reject": "deny",
    "rejected": "deny",
    "block": "deny",
    "blocked": "deny",
    "edit": "edit",
    "edited": "edit",
    "updated_input": "edit",
}

# Events that show a tool actually ran (tool.failed may mean it never started).
_TOOL_RUN_TYPES = frozenset({"tool.started", "tool.args", "tool.progress", "tool.result", "tool.completed"})


# ---------------------------------------------------------------- events


def attempt_of(event: ParsedEvent) -> int | None:
    """The attempt a `benchmark.trial.started` event names in its payload (seed 000)."""
    return to_attempt((event.payload or {}).get("attempt")) if event.type == "benchmark.trial.started" else None


def _family(event_type: str) -> str:
    return event_type.split(".", 1)[0]


# ---------------------------------------------------------------- evidence pack


def is_evidence_pack(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("benchmark"), dict):
        return False
    if "type" in data and "eventId" in data:  # a benchmark.* event also has `benchmark`
        return False
    version = to_str(data.get("schemaVersion"))
    return version.startswith(PROFILE_PREFIX) or any(key in data for key in ("runtimeCorrelation", "refs", "metrics"))


def _pack_reward(data: dict[str, Any]) -> float | None:
    metrics = as_dict(data.get("metrics"))
    reward = as_dict(data.get("reward"))
    value = to_float(metrics.get("reward"))
    if value is None and isinstance(reward, dict):
        value = to_float(reward.get("value"))
    return value


def _pack_status(reward: float | None, metrics: dict[str, Any]) -> str:
    return "timeout" if metrics.get("timeout") is True else status_from_reward(reward)


def _pack_criteria(reward: Any) -> list[ParsedCriterion]:
    if not isinstance(reward, dict):
        return []
    criteria = []
    for entry in as_list(reward.get("criteria")):
        if isinstance(entry, dict):  # tolerate {name, score, weight}
            criteria.append(
                ParsedCriterion(
                    name=to_str(pick(entry, "name", "id")),
                    score=to_float(entry.get("score")),
                    weight=to_float(entry.get("weight")),
                    raw=entry,
                )
            )
        else:
            criteria.append(ParsedCriterion(name=to_str(entry), score=None))
    return criteria


def parse_evidence_pack(data: dict[str, Any], path: str) -> ParsedTrial:
    bench = as_dict(data.get("benchmark"))
    metrics = as_dict(data.get("metrics"))
    decision = as_dict(data.get("decisionInputs"))
    reward_block = as_dict(data.get("reward"))
    refs = as_dict(data.get("refs"))
    problems: list[Problem] = []

    trial_id = to_str(pick(bench, "trialId", "trial_id"))
    if not trial_id:
        problems.append(
            Problem(
                path, "evidence pack has no benchmark.trialId; keyed by path", "$.benchmark.trialId", severity="warning"
            )
        )
    dataset_id = to_str(pick(bench, "datasetId", "dataset_id"))
    dataset_ref = to_str(pick(bench, "datasetRef", "dataset_ref"))
    task_id = to_str(pick(bench, "taskId", "task_id"))
    config_id = to_str(pick(bench, "configurationId", "configuration_id"))
    reward = _pack_reward(data)
    duration_ms = to_float(pick(metrics, "durationMs", "duration_ms"))

    return ParsedTrial(
        key="lime:" + (trial_id or path),
        source_format="lime",
        files_are_its_own=True,
        joins_stored_trial=True,  # (an evidence pack: of the trial it names, stored with its folder)
        name=trial_id or path,
        attempt=to_attempt(bench.get("attempt")),
        dataset=DatasetRef(
            dataset_id or dataset_ref, to_str(pick(bench, "datasetVersion", "dataset_version")), dataset_ref
        )
        if dataset_id or dataset_ref
        else None,
        task=TaskRef(task_id, source=to_str(pick(bench, "taskTomlRef", "task_toml_ref"))) if task_id else None,
        configuration=ConfigurationRef(
            key=config_id,
            role=to_str(bench.get("role")),
            profiles={"singleChangedVariable": pick(bench, "singleChangedVariable", "single_changed_variable")},
        )
        if config_id
        else None,
        status=_pack_status(reward, metrics),
        reward=reward,
        rewards={"reward": reward} if reward is not None else {},
        failure_category=clean_category(
            pick(decision, "failureCategory", "failure_category")
            or pick(reward_block, "failureCategory", "failure_category")
        ),
        phases={"total": {"seconds": duration_ms / 1000}} if duration_ms is not None else {},
        cost_usd=to_float(pick(metrics, "costUsd", "cost_usd")),
        benchmark=bench,
        runtime_correlation=as_dict(data.get("runtimeCorrelation") or data.get("runtime_correlation")),
        refs=refs,
        provenance={
            "schemaVersion": data.get("schemaVersion"),
            "total_tokens": metrics.get("tokens"),  # total only: no input/output split
            "decisionInputs": decision,
            "trajectory": data.get("trajectory"),
            # what the refs say exists; only the stored files prove it
            "claimed_evidence": sorted(_CLAIMED_PARTS[k] for k in refs if k in _CLAIMED_PARTS),
        },
        documents={"evidence_pack": data},
        criteria=_pack_criteria(reward_block),
        files=[path],
        present={"evidence_pack"},
        problems=problems,
    )


# ---------------------------------------------------------------- runtime events


def is_runtime_event(obj: Any) -> bool:
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        return False
    if "eventId" in obj or "event_id" in obj:
        return True
    return _family(obj["type"]) in EVENT_FAMILIES and ("sessionId" in obj or "session_id" in obj)


def _snake(camel: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in camel)


_SNAKE_KEYS = {key: _snake(key) for key in CORRELATION_KEYS}  # (once: a live trial sends thousands a second)


def event_correlation(obj: dict[str, Any]) -> dict[str, str]:
    correlation = {}
    for key, snake in _SNAKE_KEYS.items():
        value = pick(obj, key, snake)
        if value is not None and value != "":
            correlation[key] = to_str(value)
    bench = obj.get("benchmark")
    if isinstance(bench, dict) and pick(bench, "trialId", "trial_id"):
        correlation["trialId"] = to_str(pick(bench, "trialId", "trial_id"))
    return correlation


def parse_event(
    obj: dict[str, Any],
    file: str,
    line: int | None = None,
    problems: list[Problem] | None = None,
) -> ParsedEvent:
    event_type = to_str(obj.get("type"))
    sequence = to_int(obj.get("sequence"))
    event_id = to_str(pick(obj, "eventId", "event_id"))
    if not event_id:  # stable synthetic id so re-imports match
        event_id = f"{file}#{line if line is not None else 0}:{event_type}:{sequence}"
    where = f"line {line}" if line is not None else "$"
    payload = obj.get("payload")
    refs = obj.get("refs")
    return ParsedEvent(
        type=event_type,
        event_id=event_id,
        timestamp=parse_time(obj.get("timestamp"), file, f"{where}.timestamp", problems),
        sequence=sequence,
        correlation=event_correlation(obj),
        payload=payload if isinstance(payload, dict) else ({} if payload is None else {"value": payload}),
        refs=refs if isinstance(refs, dict) else ({} if refs is None else {"value": refs}),
        raw=obj,
        file=file,
        line=line,
    )


def parse_event_rows(rows: list[tuple[int, dict[str, Any]]], file: str) -> tuple[list[ParsedEvent], list[Problem]]:
    """The events as written (a redacted item in them is withheld by the import's stage, trials.ingest.redaction)."""
    events: list[ParsedEvent] = []
    problems: list[Problem] = []
    for line, obj in rows:
        if is_runtime_event(obj):
            events.append(parse_event(obj, file, line, problems))
        else:
            problems.append(
                Problem(
                    file, "line is not a runtime event (needs type and eventId)", line=line, kept="in the stored file"
                )
            )
    return events, problems


def parse_event_file(data: Any, path: str) -> ParsedPack:
    """A single event JSON file, or a JSON array of events."""
    items = data if isinstance(data, list) else [data]
    rows = [(index + 1, item) for index, item in enumerate(items)]
    if not any(is_runtime_event(item) for item in items):
        raise PackError(Problem(path, "not a Lime runtime event (needs type and eventId)"))
    if isinstance(data, dict):  # a single object has no line numbers
        problems: list[Problem] = []
        return ParsedPack(kind="runtime-events", events=[parse_event(data, path, None, problems)], problems=problems)
    events, problems = parse_event_rows(rows, path)
    return ParsedPack(kind="runtime-events", events=events, problems=problems)


# ---------------------------------------------------------------- permissions


def map_decision(value: Any) -> str:
    if isinstance(value, bool):
        return "approve" if value else "deny"
    return _DECISIONS.get(to_str(value).strip().lower(), "pending")


def _order(event: ParsedEvent, index: int) -> tuple[Any, ...]:
    return (event.sequence, event.timestamp, index)


def _is_after(later: tuple[Any, ...], earlier: tuple[Any, ...]) -> bool:
    """Sequence first (same stream), then timestamp, then position in the input."""
    if later[0] is not None and earlier[0] is not None:
        return later[0] > earlier[0]
    if later[1] is not None and earlier[1] is not None:
        try:
            return later[1] > earlier[1]
        except TypeError:  # naive vs aware: fall through to file order
            pass
    return later[2] > earlier[2]


def _permission_key(event: ParsedEvent) -> str:
    payload = event.payload
    return to_str(
        event.correlation.get("actionId")
        or pick(
            payload,
            "actionId",
            "action_id",
            "approvalActionId",
            "approval_action_id",
            "permissionId",
            "permission_id",
            "requestId",
            "request_id",
        )
        or event.correlation.get("toolCallId")
        or event.event_id
    )


def _on_request(perm: ParsedPermission, event: ParsedEvent) -> None:
    payload = event.payload
    perm.tool_call_id = perm.tool_call_id or to_str(
        event.correlation.get("toolCallId") or pick(payload, "toolCallId", "tool_call_id")
    )
    perm.step_id = perm.step_id or to_str(event.correlation.get("stepId") or pick(payload, "stepId", "step_id"))
    perm.action_type = perm.action_type or to_str(pick(payload, "actionType", "action_type"))
    perm.tool_name = perm.tool_name or to_str(pick(payload, "toolName", "tool_name"))
    perm.prompt = perm.prompt or to_str(payload.get("prompt"))
    if isinstance(payload.get("scope"), dict) and not perm.scope:
        perm.scope = payload["scope"]
    if event.type in ("action.required", "permission.requested"):
        perm.requested_at = perm.requested_at or event.timestamp


def _on_decision(perm: ParsedPermission, event: ParsedEvent) -> bool:
    """Record a decision if the event carries one; True when it did."""
    payload = event.payload
    raw = pick(payload, "decision", "response", "resolution", "outcome", "approved")
    decision = map_decision(raw) if raw is not None else "pending"
    if decision == "pending":  # e.g. permission.evaluated with "ask": still waiting
        return False
    perm.decision = decision
    perm.decided_by = to_str(
        pick(payload, "decisionSource", "decision_source", "decidedBy", "decided_by", "resolvedBy", "actor")
    )
    perm.reason = to_str(pick(payload, "decisionReason", "decision_reason", "reason"))
    perm.resolved_at = event.timestamp
    if pick(payload, "ruleRefs", "rule_refs") is not None:
        perm.raw["rule_refs"] = pick(payload, "ruleRefs", "rule_refs")
    if (
        decision == "deny"
        and pick(payload, "sideEffectObserved", "side_effect_observed", "sideEffect", "side_effect") is True
    ):
        perm.side_effect_after_denial = True
    return True


def _tool_matches(event: ParsedEvent, perm: ParsedPermission) -> bool:
    payload = event.payload
    call_id = to_str(event.correlation.get("toolCallId") or pick(payload, "toolCallId", "tool_call_id"))
    action_id = to_str(event.correlation.get("actionId") or pick(payload, "actionId", "action_id"))
    return bool(
        (perm.tool_call_id and call_id == perm.tool_call_id) or (perm.action_id and action_id == perm.action_id)
    )


def permissions_from_events(events: list[ParsedEvent]) -> list[ParsedPermission]:
    perms: dict[str, ParsedPermission] = {}
    denied_at: dict[str, tuple[Any, ...]] = {}
    for index, event in enumerate(events):
        is_action = event.type in ("action.required", "action.resolved")
        if not (is_action or event.type.startswith("permission.")):
            continue
        key = _permission_key(event)
        perm = perms.setdefault(key, ParsedPermission(action_id=key, raw={"events": []}))
        perm.raw["events"].append(event.raw)
        _on_request(perm, event)  # every event may add ids the request lacked
        if event.type in ("action.required", "permission.requested"):
            continue
        if _on_decision(perm, event) and perm.decision == "deny":
            denied_at[key] = _order(event, index)
    for index, event in enumerate(events):
        if event.type not in _TOOL_RUN_TYPES:
            continue
        for key, when in denied_at.items():
            perm = perms[key]
            if perm.decision == "deny" and _is_after(_order(event, index), when) and _tool_matches(event, perm):
                perm.side_effect_after_denial = True
    return list(perms.values())


# ---------------------------------------------------------------- dispatch


def parse(data: Any, path: str) -> ParsedPack | None:
    """Any single Lime runtime JSON file; None when it is not one."""
    if is_json_schema(data):
        return ParsedPack(kind="json-schema", documents=[parse_json_schema(data, path)])
    if is_evidence_pack(data):
        trial = parse_evidence_pack(data, path)
        return ParsedPack(kind="lime", trials=[trial], trial_count=1)
    if is_thread_snapshot(data):
        return ParsedPack(kind="lime-thread-snapshot", documents=[parse_thread_snapshot(data, path)])
    if is_runtime_event(data) or (isinstance(data, list) and data and all(is_runtime_event(item) for item in data)):
        return parse_event_file(data, path)
    return None
