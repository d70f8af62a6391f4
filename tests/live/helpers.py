"""Small hand-built live-run payloads: the seed's spine, runtime events, ATIF steps, an agent run's spans."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from core import roles


def spine(trial_id: str = "trial-live-1", job: str = "jobs/live-candidate") -> dict[str, Any]:
    return {
        "benchmark": {
            "datasetId": "lime-tasks",
            "datasetVersion": "2026-05",
            "taskId": "fix-readme",
            "trialId": trial_id,
            "configurationId": "candidate-live",
            "role": "candidate",
            "harborJobRef": job,
        },
        "runtimeCorrelation": {"sessionId": "sess_1", "threadId": "thread_1", "turnId": "turn_1", "runId": "run_1"},
        "refs": {"trajectoryRef": "/logs/agent/trajectory.json"},
    }


def event(n: int, kind: str = "tool.progress", **payload: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "eventId": f"evt_{n}",
        "sequence": n,
        "sessionId": "sess_1",
        "threadId": "thread_1",
        "turnId": "turn_1",
        "timestamp": f"2026-05-17T09:{n // 60 % 60:02d}:{n % 60:02d}Z",
        "payload": payload,
    }


def runtime_events() -> list[dict]:
    """A turn: the user's input, a model answer that calls a tool, the tool's result, a last answer (shuffled)."""
    events = [
        event(1, "turn.submitted", text="Fix the README typo."),
        event(2, "reasoning.summary", text="Read the file first."),
        event(
            3,
            "model.completed",
            text="I will read README.md.",
            model="gpt-5",
            usage={"inputTokens": 120, "outputTokens": 30},
        ),
        {**event(4, "tool.started", toolName="read_file", args={"path": "README.md"}), "toolCallId": "call_1"},
        {**event(5, "tool.result", result="# Helo world"), "toolCallId": "call_1"},
        event(6, "model.completed", text="Fixed: Helo -> Hello.", model="gpt-5"),
        event(7, "runtime.warning", message="slow disk"),
    ]
    return [events[i] for i in (3, 0, 6, 5, 1, 4, 2)]


def step(n: int, source: str = "agent", message: str = "") -> dict[str, Any]:
    return {"step_id": n, "source": source, "message": message or f"step {n} says hello"}


def runner_client(db: Any = None, name: str = "runner-1") -> tuple[APIClient, str]:
    """An API client authenticated by the token of a user of the runner group."""
    user = get_user_model().objects.create_user(name, password="pw-runner-1")
    roles.add_to_group(user, roles.RUNNER)
    token = Token.objects.create(user=user).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client, token


def agent_run(trial_id: str, calls: int) -> list:
    """An agent span over `calls` model calls, as the SDK hands them to its exporter (the root last)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"benchmark.trial.id": trial_id}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent coder") as agent:
        agent.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder",
                              "benchmark.reward": 1.0})  # fmt: skip
        for n in range(calls):
            with tracer.start_as_current_span("chat") as chat:
                output = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {n}"}]}]
                chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                     "gen_ai.output.messages": json.dumps(output)})  # fmt: skip
    return list(memory.get_finished_spans())
