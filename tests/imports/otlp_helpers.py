"""OTLP as the SDK exports it, for the import tests (issue 41): an ADK-style agent run with its GenAI log
events, a crew under `invoke_workflow` with its plan and evaluations, written as OTLP/JSON or Grafana
Tempo's export."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, set_span_in_context

USAGE = {"call_llm": [(120, 20), (180, 25)]}  # per model call: (input, output) tokens


def recorders(resource_attributes: dict[str, str], tracer_name: str, logger_name: str) -> tuple[Any, Any, Any, Any]:
    """The SDK's own span and log record exporters in memory, and a tracer and a logger writing to them."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    resource = Resource.create(resource_attributes)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    log_provider = LoggerProvider(resource=resource)
    log_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    return spans, logs, tracer_provider.get_tracer(tracer_name), log_provider.get_logger(logger_name)


def adk_run(parent: SpanContext | None = None) -> tuple[list[Any], list[Any]]:
    """One ADK-style agent run: two model calls, each on call_llm > generate_content, its messages as log events."""
    spans, logs, tracer, logger = recorders(
        {"service.name": "adk-agent", "benchmark.task.id": "weather"}, "google.adk", "google.genai"
    )
    context = set_span_in_context(NonRecordingSpan(parent)) if parent else None

    def event(name: str, body: Any, as_attribute: bool = False) -> None:
        attrs = {"event.name": name} if as_attribute else {}
        logger.emit(LogRecord(event_name=None if as_attribute else name, body=body, attributes=attrs))

    total = [sum(x) for x in zip(*USAGE["call_llm"], strict=True)]
    agent_attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather_agent",
        "gen_ai.usage.input_tokens": total[0],
        "gen_ai.usage.output_tokens": total[1],
    }
    with tracer.start_as_current_span("invoke_agent weather_agent", context=context, attributes=agent_attrs):
        for n, (tokens_in, tokens_out) in enumerate(USAGE["call_llm"]):
            usage = {"gen_ai.usage.input_tokens": tokens_in, "gen_ai.usage.output_tokens": tokens_out}
            model = {"gen_ai.request.model": "gemini-2.0-flash"}
            with tracer.start_as_current_span(
                "call_llm", attributes={"gen_ai.system": "gcp.vertex.agent", **model, **usage}
            ):
                with tracer.start_as_current_span(
                    "generate_content gemini-2.0-flash",
                    attributes={
                        "gen_ai.operation.name": "generate_content",
                        "gen_ai.system": "gemini",
                        **model,
                        **usage,
                    },
                ):
                    event("gen_ai.system.message", {"content": "You tell the weather."})
                    event("gen_ai.user.message", {"content": "Weather in Paris?"}, as_attribute=True)
                    if n == 0:
                        call = {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                        event("gen_ai.choice", {"index": 0, "message": {"role": "assistant", "tool_calls": [call]}})
                    else:
                        event("gen_ai.assistant.message", {"content": ""})
                        event("gen_ai.tool.message", {"content": "sunny", "id": "call_1"})
                        event("gen_ai.choice", {"index": 0, "message": {"content": "It is sunny in Paris."}})
            if n == 0:
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": "call_1",
                    "gen_ai.tool.call.result": "sunny",
                }
                with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
                    pass
    return list(spans.get_finished_spans()), list(logs.get_finished_logs())


def hex_ids(node: Any) -> Any:
    """protobuf's JSON writes ids in base64; OTLP/JSON in hex."""
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else hex_ids(v)
            for k, v in node.items()
        }
    return [hex_ids(v) for v in node] if isinstance(node, list) else node


def otlp_file(path: Path, spans: list[Any], logs: list[Any]) -> Path:
    """Spans and log records in one OTLP/JSON file, as a collector's file exporter writes them."""
    body = hex_ids(MessageToDict(encode_spans(spans)))
    if logs:
        body |= hex_ids(MessageToDict(encode_logs(logs)))
    path.write_bytes(json.dumps(body).encode())
    return path


def tempo_body(spans: list[Any]) -> dict[str, Any]:
    """Tempo's export of the spans: `batches` / `instrumentationLibrarySpans`, base64 ids, numeric times."""
    body = MessageToDict(encode_spans(spans))
    for batch in body["resourceSpans"]:
        batch["instrumentationLibrarySpans"] = batch.pop("scopeSpans")
        for scope in batch["instrumentationLibrarySpans"]:
            for span in scope["spans"]:
                span["startTimeUnixNano"] = int(span["startTimeUnixNano"])
                span["endTimeUnixNano"] = int(span["endTimeUnixNano"])
    return {"batches": body["resourceSpans"]}


EVALUATION = "gen_ai.evaluation.result"


def crew_run() -> tuple[list[Any], list[Any]]:
    """A crew (workflow) of one agent: a planning call under `plan`, then a call and a tool; one
    evaluation as the chat span's event, one as a log record naming the planning call."""
    spans, logs, tracer, logger = recorders({"service.name": "crew", "benchmark.task.id": "report"}, "crewai", "crewai")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5"}
    workflow = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "report_crew"}
    with tracer.start_as_current_span("invoke_workflow report_crew", attributes=workflow):
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"}
        with tracer.start_as_current_span("invoke_agent writer", attributes=agent):
            with tracer.start_as_current_span("plan writer", attributes={"gen_ai.operation.name": "plan"}):
                with tracer.start_as_current_span("chat gpt-5", attributes={**chat, "gen_ai.usage.input_tokens": 50}):
                    logger.emit(
                        LogRecord(
                            event_name=EVALUATION,
                            attributes={
                                "gen_ai.evaluation.name": "plan_quality",
                                "gen_ai.evaluation.score.label": "good",
                                "gen_ai.evaluation.explanation": "covers every section",
                            },
                        )
                    )
            with tracer.start_as_current_span("chat gpt-5", attributes={**chat, "gen_ai.usage.input_tokens": 80}) as s:
                s.add_event(
                    EVALUATION,
                    {"gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.75},
                )
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "write_file"}
            with tracer.start_as_current_span("execute_tool write_file", attributes=tool):
                pass
    return spans.get_finished_spans(), logs.get_finished_logs()


SKILL = {
    "gen_ai.skill.name": "code-review",
    "gen_ai.skill.description": "Review a change against the team's review policy.",
    "gen_ai.skill.source.uri": "file:///opt/skills/code-review",
}
SKILL_BODY = "# code-review\nRun scripts/check.py, then read the README."
MODEL = {"gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.provider.name": "anthropic"}


def skill_run() -> list[Any]:
    """An agent using an agent skill as semconv-genai's skill spans record it (execute-tool.md, "Agent
    skills": `execute_tool` spans named `execute_tool {tool} {skill} [{resource}]`, `gen_ai.skill.*` on
    them): a planning call asks to load the skill; the next call asks to run its script and to read a
    file; the script's span holds a model call and a tool call of its own (and, as some frameworks write
    it, their usage summed on it); the answer carries an evaluation as its span event."""
    spans, _, tracer, _ = recorders(
        {"service.name": "reviewer", "benchmark.trial.id": "review-1", "benchmark.task.id": "review"}, "agent", "agent"
    )

    def chat(tokens: tuple[int, int], calls: list[tuple[str, str, dict[str, Any]]], text: str = "") -> Any:
        parts = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
        parts += [{"type": "text", "content": text}] if text else []
        attrs = {
            "gen_ai.operation.name": "chat",
            **MODEL,
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
        }
        return tracer.start_as_current_span(f"chat {MODEL['gen_ai.request.model']}", attributes=attrs)

    def tool(name: str, call_id: str, arguments: dict[str, Any], result: str, **more: Any) -> Any:
        words = [more.get("gen_ai.skill.name"), more.get("gen_ai.skill.resource.name")]
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps(arguments),
            "gen_ai.tool.call.result": result,
            **more,
        }
        return tracer.start_as_current_span(" ".join(["execute_tool", name, *filter(None, words)]), attributes=attrs)

    load = {"skill_name": SKILL["gen_ai.skill.name"]}
    script = {**load, "file_path": "scripts/check.py"}
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reviewer"}
    with tracer.start_as_current_span("invoke_agent reviewer", attributes=agent):
        with tracer.start_as_current_span("plan reviewer", attributes={"gen_ai.operation.name": "plan"}):
            with chat((100, 10), [("call_load", "load_skill", load)]):
                pass
        with tool("load_skill", "call_load", load, SKILL_BODY, **SKILL):
            pass
        with chat(
            (300, 20), [("call_run", "run_skill_script", script), ("call_read", "read_file", {"path": "README"})]
        ):
            pass
        ran = {**SKILL, "gen_ai.skill.resource.name": script["file_path"]}
        with tool("run_skill_script", "call_run", script, "2 findings", **ran) as skill_span:
            with chat((40, 5), [("call_grep", "grep", {"pattern": "TODO"})]):
                pass
            with tool("grep", "call_grep", {"pattern": "TODO"}, "src/a.py:3: TODO"):
                pass
            with chat((60, 8), [], text="2 findings"):
                pass
            skill_span.set_attributes({"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 13})
        with tool("read_file", "call_read", {"path": "README"}, "# Project"):
            pass
        with chat((400, 30), [], text="Review: 2 findings, both TODOs.") as answer:
            evaluation = {
                "gen_ai.evaluation.name": "review_quality",
                "gen_ai.evaluation.score.value": 0.8,
                "gen_ai.evaluation.score.label": "good",
                "gen_ai.evaluation.explanation": "names both findings",
            }
            answer.add_event(EVALUATION, evaluation)
    return list(spans.get_finished_spans())


def otlp_body(spans: list[Any]) -> dict[str, Any]:
    """The spans as an exporter's OTLP/JSON request body (`POST /v1/traces`)."""
    return hex_ids(MessageToDict(encode_spans(spans)))


def scored_trace(reward: float, dataset: str, version: str) -> list[Any]:
    """One agent run on dataset@version with its benchmark reward, as an SDK-instrumented runner exports it."""
    resource = {"benchmark.trial.id": "run-1", "benchmark.task.id": "t1"}
    resource |= {"benchmark.dataset.id": dataset, "benchmark.dataset.version": version}
    spans, _, tracer, _ = recorders(resource, "runner", "runner")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "solver", "benchmark.reward": reward}
    with tracer.start_as_current_span("invoke_agent solver", attributes=agent):
        chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5", "gen_ai.usage.input_tokens": 5}
        with tracer.start_as_current_span("chat gpt-5", attributes=chat):
            pass
    return list(spans.get_finished_spans())
