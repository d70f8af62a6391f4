"""What a trial's export makes from its rows where it has no stored file (a trial read from
another format, or live): Harbor's result.json, and an ATIF trajectory of its stored step bodies;
trials/export.py writes them into the zip.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from trials.ingest.formats import agentv
from trials.ingest.records import ParsedStep
from trials.models import Trajectory, Trial

DERIVED_ATIF_VERSION = "ATIF-v1.6"


def derived_atif(trial: Trial, trajectory: Trajectory) -> dict[str, Any]:
    """ATIF made of a trajectory's stored step bodies (no ATIF file of its own: AgentV messages, a live trial)."""
    configuration = trial.configuration
    agent = trajectory.agent or {
        "name": configuration.agent_name if configuration else "unknown",
        "version": configuration.agent_version if configuration else "",
        "model_name": configuration.model_name if configuration else "",
    }
    steps: list[Any] = []
    converts = agentv.is_output_trajectory(trajectory.path)
    for index, body in trajectory.bodies():
        raw = orjson.loads(body)
        steps.append(atif_step(trajectory.read_step(raw, index), len(steps) + 1) if converts else raw)
    return {
        "schema_version": trajectory.schema_version or DERIVED_ATIF_VERSION,
        "session_id": trajectory.session_id or trial.session_id or trial.key,
        "agent": agent,
        "steps": steps,
        **({"final_metrics": trajectory.final_metrics} if trajectory.final_metrics else {}),
    }


def atif_step(step: ParsedStep, number: int) -> dict[str, Any]:
    """One ATIF step from what the importer read of a step in another format."""
    source = step.source if step.source in ("system", "user", "agent") else "agent"
    out: dict[str, Any] = {"step_id": number, "source": source, "message": step.message_text}
    if step.timestamp is not None:
        out["timestamp"] = step.timestamp.isoformat()
    if step.model_name and source == "agent":
        out["model_name"] = step.model_name
    if step.reasoning:
        out["reasoning_content"] = step.reasoning
    if step.tool_calls and source == "agent":
        out["tool_calls"] = [
            {
                "tool_call_id": call.tool_call_id,
                "function_name": call.function_name,
                "arguments": call.arguments if isinstance(call.arguments, dict) else {"value": call.arguments},
            }
            for call in step.tool_calls
        ]
    if step.observations:
        out["observation"] = {
            "results": [
                {**({"source_call_id": o.source_call_id} if o.source_call_id else {}), "content": o.content_text}
                for o in step.observations
            ]
        }
    metrics = {
        k: v
        for k, v in (
            ("prompt_tokens", step.prompt_tokens),
            ("completion_tokens", step.completion_tokens),
            ("cached_tokens", step.cached_tokens),
            ("cost_usd", step.cost_usd),
        )
        if v is not None
    }
    if metrics and source == "agent":
        out["metrics"] = metrics
    return out


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def trial_rewards(trial: Trial) -> dict[str, Any]:
    return dict(trial.rewards) if trial.rewards else ({"reward": trial.reward} if trial.reward is not None else {})


def harbor_result(trial: Trial) -> dict[str, Any]:
    """A Harbor trial result.json from the trial's rows (a trial read from another format, or live)."""
    configuration, task = trial.configuration, trial.task
    result: dict[str, Any] = {
        "id": trial.key,
        "trial_name": trial.name,
        "task_name": task.name if task else trial.name,
        "source": trial.dataset.name if trial.dataset else "",
        "task_checksum": task.checksum if task else "",
        "agent_info": {
            "name": configuration.agent_name if configuration else "",
            "version": configuration.agent_version if configuration else "",
            "model_info": {"name": configuration.model_name if configuration else ""},
        },
        "verifier_result": {"rewards": trial_rewards(trial)} if trial_rewards(trial) else None,
        "started_at": iso(trial.started_at),
        "finished_at": iso(trial.finished_at),
        "exception_info": None,
        "agent_result": {
            "n_input_tokens": trial.input_tokens,
            "n_cache_tokens": trial.cached_tokens,
            "n_output_tokens": trial.output_tokens,
            "cost_usd": trial.cost_usd,
        },
    }
    if trial.exception_type or trial.exception_message:  # (a live trial failed with a reason has no type)
        result["exception_info"] = {
            "exception_type": trial.exception_type,
            "exception_message": trial.exception_message,
            "exception_traceback": trial.exception_traceback,
        }
    return result
