"""OTLP from the GenAI conventions' newer spans and events (issue 41): an `invoke_workflow` span above
the agents of a crew, `plan` spans around the model call that makes a plan, and
`gen_ai.evaluation.result` events, as a span event and as a log record naming the span evaluated.
Written by opentelemetry-sdk; the known answers come from what the test exported."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.builders import import_path
from tests.imports.test_import_otlp_dialects import otlp_file
from trials.models import Step, Trial

pytestmark = pytest.mark.django_db

EVALUATION = "gen_ai.evaluation.result"


def crew_run() -> tuple[list[Any], list[Any]]:
    """A crew (workflow) of one agent: a planning call under `plan`, then a call and a tool; one
    evaluation as the chat span's event, one as a log record naming the planning call."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    resource = Resource.create({"service.name": "crew", "benchmark.task.id": "report"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    log_provider = LoggerProvider(resource=resource)
    log_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer, logger = tracer_provider.get_tracer("crewai"), log_provider.get_logger("crewai")
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


def test_a_workflow_its_plan_and_its_evaluations_read_as_the_conventions_say(tmp_path):
    spans, logs = crew_run()
    imp = import_path(otlp_file(tmp_path / "crew.json", spans, logs))
    assert imp.status == "done", imp.problems
    trial = Trial.objects.get()
    workflow = next(s for s in spans if s.attributes["gen_ai.operation.name"] == "invoke_workflow")
    assert trial.configuration.agent_name == workflow.attributes["gen_ai.workflow.name"]

    by_id = {s.context.span_id: s for s in spans}
    chats = [s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"]
    planning = {format(s.context.span_id, "016x") for s in chats if by_id[s.parent.span_id].name.startswith("plan")}
    agent_steps = [s.raw for s in Step.objects.filter(trial=trial, source="agent")]
    assert len(agent_steps) == len(chats)  # every model call is a step, the plan's too
    phases = {step["extra"]["otel"]["span_id"]: step["extra"].get("phase") for step in agent_steps}
    assert {span for span, phase in phases.items() if phase == "plan"} == planning

    said = [dict(e.attributes) for s in spans for e in s.events if e.name == EVALUATION]
    said += [dict(r.log_record.attributes) for r in logs if r.log_record.event_name == EVALUATION]
    criteria = {c.name: (c.score, c.raw.get("label"), c.reasoning) for c in trial.criteria.all()}
    assert criteria == {
        a["gen_ai.evaluation.name"]: (
            a.get("gen_ai.evaluation.score.value"),
            a.get("gen_ai.evaluation.score.label"),
            a.get("gen_ai.evaluation.explanation", ""),
        )
        for a in said
    }
