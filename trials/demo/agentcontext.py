"""A trial's Agent Context events (agent/context-events.jsonl): the context items offered to
the model, which were selected, budgeted, assembled, asked for or compacted, and one secret
that arrives masked but must still be dropped on import."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from trials.demo.atif import TrajectoryTotals
from trials.demo.common import iso_ms, seeded_hex
from trials.demo.plans import JobContext, TrialPlan

CONTEXT_SCHEMA = "0.1.1"
# The one secret every trial carries in a masked context item. Importers must drop it.
SECRET = "sk-demo-REDACTED-SECRET-0001"


def context_events(
    ctx: JobContext,
    plan: TrialPlan,
    ids: dict[str, str],
    totals: TrajectoryTotals,
    exec_start: datetime,
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    clock = [exec_start - timedelta(milliseconds=500)]

    def emit(
        etype: str,
        data: dict[str, Any],
        *,
        at: datetime | None = None,
        step_id: int | None = 2,
        tool_call_id: str | None = None,
    ) -> None:
        clock[0] = max(clock[0] + timedelta(milliseconds=5), at or clock[0])
        event: dict[str, Any] = {
            "schema_version": CONTEXT_SCHEMA,
            "event_id": f"ctxevt_{seeded_hex(16, ids['contextId'], len(events), etype)}",
            "event_type": etype,
            "source": "benchviewer-demo",
            "time": iso_ms(clock[0]),
            "context_id": ids["contextId"],
            "runtime_id": ids["runtimeId"],
            "session_id": ids["sessionId"],
            "thread_id": ids["threadId"],
            "turn_id": ids["turnId"],
            "task_id": ids["taskId"],
            "run_id": ids["runId"],
        }
        if step_id is not None:
            event["step_id"] = str(step_id)
        if tool_call_id:
            event["tool_call_id"] = tool_call_id
        event["data"] = data
        events.append(event)

    def item_id(name: str) -> str:
        return f"item_{name}_{seeded_hex(8, ids['contextId'], name)}"

    def source_ref(name: str, uri: str, kind: str) -> dict[str, str]:
        return {
            "source_id": f"src_{seeded_hex(8, ids['contextId'], name)}",
            "uri": uri,
            "source_kind": kind,
        }

    big_log_tokens = 6000 + len(plan.task.name) * 97
    items = [
        (
            "instruction",
            "instruction",
            "Task instruction",
            plan.task.instruction,
            source_ref("instruction", f"task://{plan.task.name}/instruction.md", "task"),
            "internal",
            len(plan.task.instruction) // 4 + 1,
        ),
        (
            "main_file",
            "file",
            plan.task.main_file,
            f"# current contents of {plan.task.main_file}\n(1.2 kB, 48 lines)",
            source_ref("main_file", f"file://{plan.task.main_file}", "workspace_file"),
            "internal",
            380,
        ),
        (
            "build_log",
            "tool_result",
            "Last build log",
            "build ok\n" * 20,
            source_ref("build_log", "file:///var/log/app/build.log", "tool_output"),
            "internal",
            big_log_tokens,
        ),
        (
            "prior_trial",
            "memory",
            "Notes from a previous attempt",
            "Previous attempt: tests were flaky on the CI image.",
            source_ref("prior_trial", "memory://notes/previous-attempt", "memory"),
            "internal",
            40,
        ),
        (
            "style_guide",
            "retrieved_document",
            "Repository style guide",
            "Use 4-space indentation. Prefer pathlib.",
            source_ref("style_guide", "file:///app/CONTRIBUTING.md", "workspace_file"),
            "internal",
            220,
        ),
        (
            "env_secrets",
            "credential",
            "Environment variables of the runner",
            f"OPENAI_API_KEY={SECRET}\nDATABASE_URL=postgres://app@db/app",
            source_ref("env_secrets", "env://runner", "environment"),
            "secret",
            30,
        ),
    ]
    for name, kind, title, content, src, sensitivity, tokens in items:
        item: dict[str, Any] = {
            "item_id": item_id(name),
            "context_kind": kind,
            "content_mode": "inline",
            "visibility": "model" if sensitivity != "secret" else "runtime_only",
            "title": title,
            "content": content,
            "source_refs": [src],
            "token_estimate": tokens,
            "sensitivity": sensitivity,
            "redaction_state": "none",
        }
        if sensitivity == "secret":
            # The item arrives already masked, but its raw content is still in the file:
            # an importer must drop it and keep only the redaction facts.
            item |= {
                "redaction_state": "masked",
                "redacted_fields": ["content"],
                "reason": "Credential values must never reach the model or the viewer.",
                "policy_refs": ["policy://redaction/secrets"],
            }
        emit("context.item.added", {"item": item})
        if sensitivity == "secret":
            emit(
                "context.redaction.applied",
                {
                    "redaction": {
                        "item_id": item_id(name),
                        "redaction_state": "masked",
                        "redaction_method": "mask",
                        "redacted_fields": ["content"],
                        "reason": "Credential detected by the secret scanner.",
                        "policy_refs": ["policy://redaction/secrets"],
                    }
                },
            )

    candidates = [item_id(i[0]) for i in items]
    selected = [item_id("instruction"), item_id("main_file"), item_id("build_log")]
    omitted = [
        {"item_id": item_id("prior_trial"), "reason": "stale source"},
        {
            "item_id": item_id("style_guide"),
            "reason": "low relevance" if plan.attempt % 2 else "budget",
        },
        {"item_id": item_id("env_secrets"), "reason": "policy block"},
    ]
    budget_id = f"budget_{seeded_hex(8, ids['contextId'], 'budget')}"
    emit(
        "context.selection.completed",
        {
            "selection": {
                "selection_id": f"sel_{seeded_hex(8, ids['contextId'], 'selection')}",
                "surface_id": "surface_model_request",
                "candidate_item_refs": candidates,
                "selected_item_refs": selected,
                "omitted_item_refs": omitted,
                "budget_ref": budget_id,
                "rationale": (
                    "Instruction and the file under edit first; the build log is truncated "
                    "to fit; secrets are never selected."
                ),
            }
        },
    )
    max_tokens, reserved = 8000, 1500
    kept_log = max_tokens - reserved - 380 - (len(plan.task.instruction) // 4 + 1)
    emit(
        "context.budget.applied",
        {
            "budget": {
                "budget_id": budget_id,
                "max_tokens": max_tokens,
                "reserved_tokens": reserved,
                "actual_tokens": max_tokens - reserved,
                "overflow_strategy": "truncate_tail",
                "truncation_records": [
                    {
                        "item_id": item_id("build_log"),
                        "reason": "over budget: tail truncated",
                        "tokens_removed": big_log_tokens - kept_log,
                    }
                ],
            }
        },
    )
    emit(
        "context.assembly.created",
        {
            "assembly": {
                "assembly_id": f"asm_{seeded_hex(8, ids['contextId'], 'assembly')}",
                "target": "model_request",
                "model_request_id": f"req_{ids['turnId']}_1",
                "source_item_refs": selected,
                "ordered_blocks": [
                    {"block_id": f"blk_{n}", "item_ref": ref, "role": role}
                    for n, (ref, role) in enumerate(zip(selected, ("user", "user", "tool"), strict=True), start=1)
                ],
                "budget_ref": budget_id,
            }
        },
    )

    writes = [c for c in totals.tool_calls if c.function_name == "write_file"]
    if plan.missing_context and writes:
        call = writes[0]
        emit(
            "context.missing.requested",
            {
                "missing_context": {
                    "missing_id": f"miss_{seeded_hex(8, ids['contextId'], 'missing')}",
                    "scope": "turn",
                    "question": f"Which owner and mode should {call.path} have after the change?",
                    "severity": "blocking",
                    "status": "requested",
                    "needed_for": f"write_file {call.path}",
                    "requested_from": "repo-owner",
                    "blocked_actions": ["write_file"],
                    "safe_summary": "The task does not say who owns the edited file.",
                }
            },
            at=call.started_at - timedelta(milliseconds=200),
            step_id=call.step_id,
            tool_call_id=call.tool_call_id,
        )
    if totals.compaction_step:
        at = exec_start + (totals.finished_at - exec_start) / 2
        emit(
            "context.compaction.completed",
            {
                "compaction": {
                    "compaction_id": f"cmp_{seeded_hex(8, ids['contextId'], 'compaction')}",
                    "scope": "thread",
                    "source_item_refs": selected,
                    "method": "summarize",
                    "summary_ref": f"atif://{ids['sessionId']}/steps/{totals.compaction_step}",
                    "coverage": {"from_step": 3, "to_step": totals.compaction_step - 1},
                    "replacement_policy": "replace",
                }
            },
            at=at,
            step_id=totals.compaction_step,
        )
    return events
