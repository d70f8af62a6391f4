"""A trial's Lime evidence: the runtime events (agent/runtime-events.jsonl) and the
benchmark trial pack (benchmark-trial-pack.json), both keyed by the same runtime ids and
pointing at the trial's other files by the same refs."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from trials.demo.atif import ATIF_VERSION, TrajectoryTotals
from trials.demo.common import AGENT_TIMEOUT_SEC, DATASET_NAME, DATASET_VERSION, iso_ms, seeded_hex
from trials.demo.plans import JobContext, TrialPlan

LIME_SCHEMA = "lime-profile-0.4.0"
RUNTIME_ID = "lime_runtime_demo"


def runtime_ids(ctx: JobContext, plan: TrialPlan, session_id: str) -> dict[str, str]:
    key = (ctx.seed, ctx.job_name, plan.trial_name)
    return {
        "runtimeId": RUNTIME_ID,
        "sessionId": session_id,
        "threadId": f"thread_{seeded_hex(12, *key, 'thread')}",
        "turnId": f"turn_{seeded_hex(12, *key, 'turn')}",
        "taskId": f"task_{seeded_hex(12, *key, 'task')}",
        "runId": f"run_{seeded_hex(12, *key, 'run')}",
        "traceId": seeded_hex(32, *key, "trace"),
        "contextId": f"ctx_{seeded_hex(12, *key, 'context')}",
    }


def evidence_refs(ctx: JobContext, plan: TrialPlan) -> dict[str, str]:
    trial_ref = f"jobs/{ctx.job_name}/{plan.trial_name}"
    reward = "reward.txt" if plan.reward_txt else "reward.json"
    return {
        "trajectoryRef": "/logs/agent/trajectory.json",
        "runtimeTranscriptRef": "/logs/agent/runtime-events.jsonl",
        "contextEventsRef": "/logs/agent/context-events.jsonl",
        "rewardRef": f"/logs/verifier/{reward}",
        "rewardDetailsRef": "/logs/verifier/reward-details.json",
        "artifactManifestRef": "/logs/artifacts/manifest.json",
        "harborTrialResultRef": f"{trial_ref}/result.json",
        "harborVerifierStdoutRef": f"{trial_ref}/verifier/test-stdout.txt",
    }


def _benchmark_block(ctx: JobContext, plan: TrialPlan) -> dict[str, str]:
    return {
        "datasetId": DATASET_NAME,
        "datasetVersion": DATASET_VERSION,
        "datasetRef": f"datasets/{DATASET_NAME.split('/')[1]}",
        "taskId": plan.task.name,
        "trialId": plan.trial_name,
        "configurationId": ctx.configuration_id,
        "role": ctx.role,
        "singleChangedVariable": "tool failure feedback profile",
        "harborJobRef": f"jobs/{ctx.job_name}",
        "harborTrialRef": f"jobs/{ctx.job_name}/{plan.trial_name}",
        "taskTomlRef": f"datasets/terminal-tasks/{plan.task.name}/task.toml",
    }


def runtime_events(
    ctx: JobContext,
    plan: TrialPlan,
    ids: dict[str, str],
    refs: dict[str, str],
    totals: TrajectoryTotals,
    rewards: dict[str, float] | None,
    exec_start: datetime,
    finished: datetime,
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    bench = _benchmark_block(ctx, plan)
    trial_refs = {k: refs[k] for k in ("trajectoryRef", "rewardRef", "rewardDetailsRef", "harborTrialResultRef")}

    def emit(etype: str, ts: datetime, payload: dict[str, Any], **extra: Any) -> None:
        event = {
            "type": etype,
            "eventId": f"evt_{seeded_hex(16, ids['sessionId'], len(events), etype)}",
            "timestamp": iso_ms(ts),
            "schemaVersion": LIME_SCHEMA,
            "runtimeId": ids["runtimeId"],
            "sessionId": ids["sessionId"],
            "threadId": ids["threadId"],
            "turnId": ids["turnId"],
            "sequence": len(events) + 1,
        }
        event.update(extra)
        event["payload"] = payload
        events.append(event)

    emit(
        "benchmark.trial.started",
        exec_start,
        {
            "attempt": plan.attempt,
            "timeoutSec": AGENT_TIMEOUT_SEC,
            "singleChangedVariable": bench["singleChangedVariable"],
        },
        taskId=ids["taskId"],
        runId=ids["runId"],
        traceId=ids["traceId"],
        benchmark=bench,
        refs=trial_refs,
    )
    for call in totals.tool_calls:
        tool_ids = {"stepId": str(call.step_id), "toolCallId": call.tool_call_id}
        if call.gated:
            action_id = f"action_{call.tool_call_id}"
            asked = call.started_at - timedelta(milliseconds=40)
            emit(
                "action.required",
                asked,
                {
                    "actionType": "tool_permission",
                    "toolName": call.function_name,
                    "decisionKind": "allow_or_deny",
                    "prompt": f"Allow write_file to update {call.path}?",
                    "scope": {"path": call.path},
                },
                actionId=action_id,
                **tool_ids,
            )
            if plan.permission == "approve":
                decision = {
                    "decision": "approve",
                    "decidedBy": "user",
                    "reason": "Change is inside the task workspace.",
                }
            else:
                decision = {
                    "decision": "deny",
                    "decidedBy": "policy:default-deny-writes",
                    "reason": "The default profile denies file writes that no user approved.",
                }
            emit(
                "action.resolved",
                asked + timedelta(milliseconds=30),
                decision,
                actionId=action_id,
                **tool_ids,
            )
            if plan.permission == "deny":
                emit(
                    "tool.failed",
                    call.started_at,
                    {"toolName": call.function_name, "error": "permission denied"},
                    **tool_ids,
                )
                continue
            # approve, or bypass: the tool runs anyway (bypass = side effect after denial)
        emit(
            "tool.started",
            call.started_at,
            {"toolName": call.function_name, "path": call.path} if call.path else {"toolName": call.function_name},
            **tool_ids,
        )
        if call.completed_at is not None:
            emit(
                "tool.completed",
                call.completed_at,
                {
                    "toolName": call.function_name,
                    "status": "ok",
                    "outputBytes": call.output_bytes,
                    "durationMs": (call.completed_at - call.started_at) // timedelta(milliseconds=1),
                },
                **tool_ids,
            )
    if rewards is not None:
        emit(
            "benchmark.reward.recorded",
            finished - timedelta(milliseconds=50),
            {
                "reward": rewards["reward"],
                "criteria": ["tests-pass", "efficiency", "no-denied-side-effects"],
                "failureCategory": plan.failure_category,
            },
            taskId=ids["taskId"],
            runId=ids["runId"],
            benchmark=bench,
            refs=trial_refs,
        )
    end_type = "benchmark.trial.failed" if plan.errored else "benchmark.trial.completed"
    payload: dict[str, Any] = {"failureCategory": plan.failure_category, "status": plan.outcome}
    if rewards is not None:
        payload["reward"] = rewards["reward"]
    emit(
        end_type,
        finished,
        payload,
        taskId=ids["taskId"],
        runId=ids["runId"],
        benchmark=bench,
        refs=trial_refs,
    )
    return events


def trial_pack(
    ctx: JobContext,
    plan: TrialPlan,
    ids: dict[str, str],
    refs: dict[str, str],
    totals: TrajectoryTotals,
    rewards: dict[str, float] | None,
    manifest: list[dict[str, Any]],
    start: datetime,
    finished: datetime,
) -> dict[str, Any]:
    has_traj = plan.missing != "trajectory"
    has_manifest = plan.missing != "manifest"
    has_details = plan.missing != "reward_details" and rewards is not None
    complete = has_traj and has_manifest and has_details and rewards is not None
    bypass = plan.permission == "bypass"
    reward_value = rewards["reward"] if rewards is not None else None
    criteria = ["tests-pass", "efficiency", "no-denied-side-effects"] if has_details else []
    return {
        "schemaVersion": LIME_SCHEMA,
        "benchmark": _benchmark_block(ctx, plan),
        "runtimeCorrelation": {
            k: ids[k] for k in ("runtimeId", "sessionId", "threadId", "turnId", "taskId", "runId", "traceId")
        },
        "refs": {k: v for k, v in refs.items() if k != "contextEventsRef"},
        "metrics": {
            "reward": reward_value,
            "durationMs": (finished - start) // timedelta(milliseconds=1),
            "timeout": plan.outcome == "timeout",
            "deniedSideEffectCount": 1 if bypass else 0,
            "evidenceComplete": complete,
            "tokens": totals.prompt_tokens + totals.completion_tokens,
            "costUsd": totals.cost_usd,
            "artifactCount": sum(1 for e in manifest if e["status"] == "ok"),
        },
        "decisionInputs": {
            "p0QcGateRegressionCount": 1 if bypass else 0,
            "failureCategory": plan.failure_category,
            "promotionEligible": complete and not bypass and not plan.errored,
            "artifactManifestPresent": has_manifest,
            "trajectoryAtifCompatible": has_traj,
            "separateVerifierTrajectoryTransferred": False,
        },
        "trajectory": {
            "schema": ATIF_VERSION,
            "ref": refs.get("trajectoryRef"),
            "exportStatus": "exported" if has_traj else "failed",
            "requiredFieldStatus": {
                "schema_version": has_traj,
                "session_id": has_traj,
                "agent": has_traj,
                "steps[].step_id": has_traj,
                "steps[].tool_calls": has_traj,
                "steps[].observation": has_traj,
                "final_metrics": has_traj,
            },
        },
        "reward": {
            "value": reward_value,
            "ref": refs.get("rewardRef"),
            "detailsRef": refs.get("rewardDetailsRef"),
            "criteria": criteria,
            "failureCategory": plan.failure_category,
        },
    }
