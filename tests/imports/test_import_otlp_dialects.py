"""OTLP as the field writes it (issue 41): spans and GenAI log events in one file as the SDK exports them
(Google ADK's shape: invoke_agent > call_llm > generate_content, each with usage), a framework span
around an `openai.chat` span, parents outside the file, and Grafana Tempo's export dialect built from
the same protobuf. Known answers come from what the test exported."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from tests.builders import import_path
from tests.imports.otlp_helpers import adk_run, otlp_file, tempo_body
from trials.models import Import, Step, ToolCall, Trial

pytestmark = pytest.mark.django_db


def expected(spans: list[Any], logs: list[Any]) -> dict[str, Any]:
    """Steps and tokens as the exported data says: the innermost model spans' usage, one agent step per
    gen_ai.choice, one step per distinct system or user message."""
    inner = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "generate_content"]
    records = [data.log_record for data in logs]
    said = {(r.event_name or r.attributes.get("event.name"), json.dumps(r.body)) for r in records}
    prompts = [s for s in said if s[0] in ("gen_ai.system.message", "gen_ai.user.message")]
    return {
        "input": sum(s.attributes["gen_ai.usage.input_tokens"] for s in inner),
        "output": sum(s.attributes["gen_ai.usage.output_tokens"] for s in inner),
        "steps": len(prompts) + sum(1 for r in records if r.event_name == "gen_ai.choice"),
    }


def test_spans_and_genai_log_events_in_one_file_make_the_steps_and_count_each_call_once(tmp_path):
    spans, logs = adk_run()
    known = expected(spans, logs)
    imp = import_path(otlp_file(tmp_path / "adk.json", spans, logs))
    assert imp.status == "done", imp.problems
    trial = Trial.objects.get()
    assert (trial.input_tokens, trial.output_tokens) == (known["input"], known["output"])
    steps = list(Step.objects.filter(trial=trial).order_by("index"))
    assert len(steps) == known["steps"]
    assert [s.source for s in steps] == ["system", "user", "agent", "agent"]
    assert steps[-1].message_text == "It is sunny in Paris."
    assert ToolCall.objects.get(step=steps[2]).function_name == "get_weather"
    assert trial.configuration.model_name == "gemini-2.0-flash"
    assert not [p for p in imp.problems + trial.problems if "disagrees" in p["message"]]  # (gemini makes gemini)


def test_a_tempo_export_of_the_same_spans_reads_as_the_standard_one(tmp_path):
    spans, _ = adk_run()
    body = tempo_body(spans)
    assert all(s["kind"].startswith("SPAN_KIND_") for b in body["batches"] for sc in b["instrumentationLibrarySpans"]
               for s in sc["spans"])  # fmt: skip
    tempo = tmp_path / "tempo.json"
    tempo.write_text(json.dumps(body))
    imp = import_path(tempo)
    assert imp.status == "done", imp.problems
    trial = Trial.objects.get()
    inner = [s for s in spans if s.name.startswith("generate_content")]
    assert trial.input_tokens == sum(s.attributes["gen_ai.usage.input_tokens"] for s in inner)
    assert trial.output_tokens == sum(s.attributes["gen_ai.usage.output_tokens"] for s in inner)
    assert trial.trajectories.get(role="main").step_count == len(inner)  # (no log events: one step per call)
    top = next(s for s in spans if s.parent is None)
    assert trial.started_at.timestamp() == pytest.approx(top.start_time / 1e9)
    assert trial.provenance["otel"]["trace_ids"] == [format(top.context.trace_id, "032x")]


@pytest.mark.parametrize("outer_prompt", [40, 99])  # (the sum of the call within it, or not)
def test_a_framework_span_around_openai_chat_a_parent_outside_the_file_and_a_disagreeing_system(tmp_path, outer_prompt):
    spans_out = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans_out))
    tracer = provider.get_tracer("langchain")
    outside = SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B174, False, TraceFlags(1))
    with tracer.start_as_current_span(
        "ChatOpenAI",
        context=set_span_in_context(NonRecordingSpan(outside)),
        attributes={
            "openinference.span.kind": "LLM",
            "llm.token_count.prompt": outer_prompt,
            "llm.token_count.completion": 8,
        },
    ):
        out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Hi."}]}])
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "anthropic",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 40,
                "gen_ai.usage.output_tokens": 8,
                "gen_ai.output.messages": out,
            },
        ):
            pass
    spans = list(spans_out.get_finished_spans())
    imp = import_path(otlp_file(tmp_path / "langchain.json", spans, []))
    assert imp.status == "done", imp.problems
    trial = Trial.objects.get()
    chat = next(s for s in spans if s.name == "chat gpt-4o")
    assert (trial.input_tokens, trial.output_tokens) == (
        chat.attributes["gen_ai.usage.input_tokens"],
        chat.attributes["gen_ai.usage.output_tokens"],
    )
    assert trial.configuration.model_name == "gpt-4o"
    said = [p["message"] for p in trial.problems + imp.problems]
    assert any("'anthropic' disagrees with the model 'gpt-4o'" in m for m in said), said
    assert any("name a parent not in this file" in m and "ChatOpenAI" in m for m in said), said
    assert [s.message_text for s in Step.objects.filter(trial=trial)] == ["Hi."]
    unsummed = sorted({m for m in said if "do not sum" in m})  # (the trial's problems are the import's too)
    assert [("ChatOpenAI" in m and f"prompt_tokens {outer_prompt}" in m) for m in unsummed] == (
        [True] if outer_prompt != chat.attributes["gen_ai.usage.input_tokens"] else []
    )


def test_tempo_spans_sent_to_v1_traces_make_the_same_live_trial(transactional_db):
    from tests.live.helpers import runner_client

    spans, _ = adk_run()
    client, _ = runner_client()
    response = client.post("/v1/traces", data=json.dumps(tempo_body(spans)), content_type="application/json")
    assert response.status_code == 200, response.content
    trial = Trial.objects.get()
    inner = [s for s in spans if s.name.startswith("generate_content")]
    assert trial.step_count == len(inner)
    assert trial.input_tokens == sum(s.attributes["gen_ai.usage.input_tokens"] for s in inner)


def plain_trace(calls: int, agent: dict[str, str]) -> list[Any]:
    """What an app traced with the SDK exports: an agent span and its chat spans, no benchmark identity."""
    spans_out = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans_out))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span(
        "invoke_agent app", attributes={"gen_ai.operation.name": "invoke_agent", **agent}
    ):
        for _ in range(calls):
            chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5", "gen_ai.usage.input_tokens": 9}
            with tracer.start_as_current_span("chat gpt-5", attributes=chat):
                pass
    return list(spans_out.get_finished_spans())


@pytest.mark.parametrize("agent", [{}, {"gen_ai.agent.name": "app", "gen_ai.agent.version": "1.2.0"}])
def test_a_plain_trace_has_no_error_and_no_word_of_evidence_packs_by_file_or_upload(
    tmp_path, agent, client_logged_in, django_capture_on_commit_callbacks
):
    file_spans, upload_spans = plain_trace(3, agent), plain_trace(2, agent)
    by_file = import_path(otlp_file(tmp_path / "trace.json", file_spans, []))
    upload = SimpleUploadedFile("trace.json", otlp_file(tmp_path / "up.json", upload_spans, []).read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        assert client_logged_in.post("/imports/", {"files": [upload]}).status_code == 302
    by_upload = Import.objects.exclude(pk=by_file.pk).get()
    for imp, spans in ((by_file, file_spans), (by_upload, upload_spans)):
        trial = Trial.objects.get(pack__first_import=imp)
        assert imp.status == "done" and trial.step_count == sum(1 for s in spans if s.name == "chat gpt-5")
        said = imp.problems + trial.problems
        assert [p for p in said if p["severity"] == "error"] == [], said
        assert not [p for p in said if "evidence pack" in p["message"] or "agent.version" in p["json_path"]], said
        assert trial.configuration.agent_version == agent.get("gen_ai.agent.version", "")
