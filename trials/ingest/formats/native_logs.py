"""Agents' own session logs, written beside (or instead of) an ATIF trajectory.

Two shapes the field writes today, each one trial whose steps are its messages:
- mini-swe-agent (`trajectory_format: mini-swe-agent-1`, the SWE-bench family's runner): `messages[]`
  in the OpenAI chat shape, and `info` (`exit_status`, `submission`, `model_stats`, `config`); its v2
  moved the run's metadata into `extra`. Each assistant message runs one bash block: that block is the
  step's tool call, and the next user message (`<returncode>…<output>…`) its observation; in v2 the
  commands are the message's `extra.actions`, answered (tool-calling mode) by `tool` messages by id.
- gemini-cli (`sessionId`, `projectHash`, `messages[{type: user|gemini}]`): tokens per message.
There is no score in either: a trial's outcome comes from its verifier, which these files are not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from trials.ingest.atif_steps import content_text
from trials.ingest.records import (
    ConfigurationRef,
    ParsedObservation,
    ParsedPack,
    ParsedStep,
    ParsedToolCall,
    ParsedTrajectory,
    ParsedTrial,
    Problem,
)
from trials.ingest.values import as_dict, as_list, parse_time, pick, to_count, to_float, to_str

_BASH_BLOCK = re.compile(r"```(?:bash|sh)\s*\n(.*?)```", re.DOTALL)
_SOURCES = {"assistant": "agent", "gemini": "agent", "model": "agent", "user": "user", "system": "system"}


def is_mini_swe_agent(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    return to_str(data.get("trajectory_format")).startswith("mini-swe-agent")


def is_gemini_cli_session(data: Any) -> bool:
    return isinstance(data, dict) and "sessionId" in data and "projectHash" in data and "messages" in data


def _step(index: int, message: dict[str, Any], source: str, text: str, **fields: Any) -> ParsedStep:
    values: dict[str, Any] = {
        "timestamp": None,
        "model_name": "",
        "reasoning": "",
        "prompt_tokens": None,
        "completion_tokens": None,
        "cached_tokens": None,
        "cost_usd": None,
        "tool_calls": [],
        "observations": [],
    }
    values.update(fields)
    return ParsedStep(
        index=index,
        step_id=index + 1,
        source=source,
        message_text=text,
        is_copied_context=False,
        llm_call_count=None,
        context_management="",
        raw=message,
        **values,
    )


def _trajectory(rel: str, agent: dict[str, Any], header: dict[str, Any], steps: list[ParsedStep]) -> ParsedTrajectory:
    return ParsedTrajectory(
        path=rel,
        role="main",
        schema_version="",
        session_id=to_str(header.get("sessionId")),
        trajectory_id="",
        agent=agent,
        final_metrics=None,
        header=header,
        steps=steps,
        problems=[],
    )


def _trial(key: str, name: str, agent: dict[str, Any], rel: str, trajectory: ParsedTrajectory) -> ParsedTrial:
    model = to_str(agent.get("model_name"))
    return ParsedTrial(
        key=key,
        source_format="harbor",
        files_are_its_own=True,
        name=name,
        configuration=ConfigurationRef(
            key="__".join(x for x in (to_str(agent.get("name")), model) if x) or "unknown",
            agent_name=to_str(agent.get("name")),
            agent_version=to_str(agent.get("version")),
            model_name=model,
        ),
        trajectories=[trajectory],
        files=[rel],
        present={"trajectory"},
        status="unknown",
    )


def _messages(data: dict[str, Any], rel: str, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, message) of each message that is an object; a warning for each that is not."""
    for number, message in enumerate(as_list(data.get("messages"))):
        if isinstance(message, dict):
            yield number, message
        else:
            what, kept = "a message that is not an object", "in the stored file; not a step"
            problems.append(Problem(rel, what, f"messages[{number}]", severity="warning", kept=kept))


def _bash_calls(message: dict[str, Any], text: str, number: int) -> list[ParsedToolCall]:
    """The commands an assistant message runs: v2's `extra.actions`, else v1's bash block in its text."""
    actions = [a for a in as_list(as_dict(message.get("extra")).get("actions")) if isinstance(a, dict)]
    if commands := [a for a in actions if to_str(a.get("command"))]:
        return [
            ParsedToolCall(to_str(a.get("tool_call_id")) or f"{number}.{n}", "bash", {"command": to_str(a["command"])})
            for n, a in enumerate(commands, start=1)
        ]
    block = _BASH_BLOCK.search(text)
    return [ParsedToolCall(f"{number}.1", "bash", {"command": block.group(1).strip()})] if block else []


def parse_mini_swe_agent(data: dict[str, Any], rel: str) -> ParsedPack:
    info = as_dict(data.get("info")) or as_dict(data.get("extra"))  # v2 keeps the run's facts in `extra`
    config = as_dict(info.get("config"))
    model = to_str(as_dict(config.get("model")).get("model_name"))
    agent = {"name": "mini-swe-agent", "version": to_str(info.get("mini_version")), "model_name": model}
    problems: list[Problem] = []
    steps: list[ParsedStep] = []
    for _, message in _messages(data, rel, problems):
        role = to_str(message.get("role"))
        text = content_text(message.get("content"))
        size = len(text.encode("utf-8", "surrogatepass"))
        if role == "tool" and steps and (call_id := to_str(message.get("tool_call_id"))):
            # v2's tool-calling mode answers a call by its id: the output of that call, not a step
            if any(c.tool_call_id == call_id for c in steps[-1].tool_calls):
                steps[-1].observations.append(ParsedObservation(call_id, text, size))
                continue
        if role == "user" and steps and steps[-1].tool_calls and not steps[-1].observations:
            call = steps[-1].tool_calls[0]  # the command's output answers the step before
            steps[-1].observations.append(ParsedObservation(call.tool_call_id, text, size))
        calls = [] if role != "assistant" else _bash_calls(message, text, len(steps) + 1)
        usage = as_dict(as_dict(as_dict(message.get("extra")).get("response")).get("usage"))
        steps.append(
            _step(
                len(steps),
                message,
                _SOURCES.get(role, role[:10]),
                text,
                tool_calls=calls,
                model_name=to_str(as_dict(as_dict(message.get("extra")).get("response")).get("model")),
                prompt_tokens=to_count(usage.get("prompt_tokens")),
                completion_tokens=to_count(usage.get("completion_tokens")),
            )
        )
    header = {k: v for k, v in data.items() if k != "messages"}
    trial = _trial(
        f"mini-swe-agent:{rel}",
        rel.rsplit("/", 1)[-1].removesuffix(".json"),
        agent,
        rel,
        _trajectory(rel, agent, header, steps),
    )
    stats = as_dict(info.get("model_stats"))
    trial.cost_usd = to_float(stats.get("instance_cost"))
    trial.provenance = {"exitStatus": info.get("exit_status")} if "exit_status" in info else {}
    trial.problems = problems
    return ParsedPack(kind="mini-swe-agent-trajectory", trials=[trial], trial_count=1)


def parse_gemini_cli_session(data: dict[str, Any], rel: str) -> ParsedPack:
    problems: list[Problem] = []
    steps: list[ParsedStep] = []
    models: list[str] = []
    for number, message in _messages(data, rel, problems):
        kind = to_str(message.get("type"))
        tokens = as_dict(message.get("tokens"))
        thoughts = "\n".join(
            to_str(pick(as_dict(t), "description", "subject")) for t in as_list(message.get("thoughts"))
        )
        if model := to_str(message.get("model")):
            models.append(model)
        steps.append(
            _step(
                len(steps),
                message,
                _SOURCES.get(kind, kind[:10]),
                content_text(message.get("content")),
                timestamp=parse_time(message.get("timestamp"), rel, f"messages[{number}].timestamp", problems),
                model_name=model,
                reasoning=thoughts,
                prompt_tokens=to_count(tokens.get("input")),
                completion_tokens=to_count(tokens.get("output")),
                cached_tokens=to_count(tokens.get("cached")),
            )
        )
    agent = {"name": "gemini-cli", "model_name": models[0] if models else ""}
    header = {k: v for k, v in data.items() if k != "messages"}
    session = to_str(data.get("sessionId"))
    trial = _trial(f"gemini-cli:{session}:{rel}", session or rel, agent, rel, _trajectory(rel, agent, header, steps))
    trial.started_at = parse_time(data.get("startTime"), rel, "startTime", problems)
    trial.finished_at = parse_time(data.get("lastUpdated"), rel, "lastUpdated", problems)
    counted = [s for s in steps if s.prompt_tokens is not None]
    if counted:
        trial.input_tokens = sum(s.prompt_tokens or 0 for s in counted)
        trial.output_tokens = sum(s.completion_tokens or 0 for s in counted)
    trial.problems = problems
    return ParsedPack(kind="gemini-cli-session", trials=[trial], trial_count=1)
