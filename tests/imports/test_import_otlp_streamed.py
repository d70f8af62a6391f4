"""A big OTLP file is read in passes (trials/ingest/formats/otlp_stream.py, issue 41): its trials, steps,
warnings and problems are the ones reading it whole makes, in every dialect the whole reading takes.

The streamed reading is called on small files here (only its size sends a file to it); the bench
(bench/flat_memory_bench.py) imports a big one and measures its memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.imports.otlp_helpers import adk_run, crew_run, otlp_file, skill_run, tempo_body
from trials.ingest.formats import otlp, otlp_stream
from trials.ingest.jsonio import load_json
from trials.ingest.records import ParsedPack


def read(pack: ParsedPack) -> list[Any]:
    """Everything the import writes of a pack, steps read."""
    trials = []
    for trial in pack.trials:
        fields = {k: repr(v) for k, v in vars(trial).items() if k != "trajectories"}
        trajectories = [(t.path, t.role, t.header, [s.raw for s in t.steps], t.problems) for t in trial.trajectories]
        trials.append((fields, trajectories))
    return [trials, [p.as_dict() for p in pack.problems], pack.kind, repr(pack.jobs)]


def both(path: Path) -> tuple[list[Any], list[Any]]:
    whole = otlp.parse(load_json(path, path.name), path.name)
    streamed = otlp_stream.parse_path(path, path.name)
    assert streamed is not None
    assert all(t.streamed for trial in streamed.trials for t in trial.trajectories)
    return read(whole), read(streamed)


def body_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def reversed_spans(body: dict[str, Any]) -> dict[str, Any]:
    """The spans of each scope listed backwards (children before their parents, as exporters end them)."""
    for key in ("resourceSpans", "batches"):
        for resource in body.get(key, []):
            for scope in resource.get("scopeSpans", resource.get("instrumentationLibrarySpans", [])):
                scope["spans"].reverse()
    return body


def agent_with_subagent(path: Path, calls: int) -> Path:
    """A lead agent's model calls and tool calls, and a subagent's under it, as the SDK exports them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5", "gen_ai.usage.input_tokens": 3}
    with tracer.start_as_current_span("invoke_agent lead", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                       "gen_ai.agent.name": "lead"}):  # fmt: skip
        for n in range(calls):
            with tracer.start_as_current_span("chat", attributes={**chat, "gen_ai.usage.output_tokens": n}):
                pass
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ls", "gen_ai.tool.call.id": f"c{n}"}
            with tracer.start_as_current_span("execute_tool ls", attributes=tool):
                pass
        sub = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "searcher"}
        with tracer.start_as_current_span("invoke_agent searcher", attributes=sub):
            for _ in range(calls):
                with tracer.start_as_current_span("chat", attributes=chat):
                    pass
    return otlp_file(path, list(exporter.get_finished_spans()), [])


def test_genai_log_events_and_nested_model_spans_read_as_the_whole_file_reads_them(tmp_path):
    spans, logs = adk_run()
    path = otlp_file(tmp_path / "adk.json", spans, logs)
    whole, streamed = both(path)
    assert streamed == whole
    generate = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "generate_content"]
    trial = otlp_stream.parse_path(path, "adk.json").trials[0]  # type: ignore[union-attr]
    assert trial.input_tokens == sum(s.attributes["gen_ai.usage.input_tokens"] for s in generate)


def test_a_tempo_export_listed_backwards_reads_as_the_whole_file_reads_it(tmp_path):
    spans, _ = adk_run()
    for body in (tempo_body(spans), reversed_spans(tempo_body(spans))):
        path = tmp_path / "tempo.json"
        path.write_text(json.dumps(body))
        whole, streamed = both(path)
        assert streamed == whole


def test_a_workflow_its_plan_and_its_evaluations_read_as_the_whole_file_reads_them(tmp_path):
    spans, logs = crew_run()
    path = otlp_file(tmp_path / "crew.json", spans, logs)
    whole, streamed = both(path)
    assert streamed == whole
    named = {e.attributes["gen_ai.evaluation.name"] for s in spans for e in s.events} | {
        data.log_record.attributes["gen_ai.evaluation.name"] for data in logs
    }
    trial = otlp_stream.parse_path(path, "crew.json").trials[0]  # type: ignore[union-attr]
    assert {c.name for c in trial.criteria} == named == {"plan_quality", "relevance"}


@pytest.mark.parametrize("backwards", [False, True])
def test_an_agent_skill_and_the_calls_under_it_read_as_the_whole_file_reads_them(tmp_path, backwards):
    path = otlp_file(tmp_path / "skill.json", skill_run(), [])
    if backwards:
        path.write_text(json.dumps(reversed_spans(body_of(path))))
    whole, streamed = both(path)
    assert streamed == whole
    steps = whole[0][0][1][0][3]  # (the main trajectory's steps)
    assert any(s["extra"].get("skill") for s in steps)  # (the skill's calls are marked: the case is the skill's)


@pytest.mark.parametrize("backwards", [False, True])
def test_a_subagent_its_tools_and_two_trials_read_as_the_whole_file_reads_them(tmp_path, backwards):
    one, two = agent_with_subagent(tmp_path / "one.json", 5), agent_with_subagent(tmp_path / "two.json", 3)
    body = body_of(one)
    body["resourceSpans"] += body_of(two)["resourceSpans"]  # (two traces: two trials)
    path = tmp_path / "both.json"
    path.write_text(json.dumps(reversed_spans(body) if backwards else body))
    whole, streamed = both(path)
    assert streamed == whole
    spans = [s for r in body["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert len(streamed[0]) == len({s["traceId"] for s in spans}) == 2
    assert [len(trajectories) for _, trajectories in streamed[0]] == [2, 2]  # (the lead's and the searcher's)


def test_spans_with_no_times_and_a_parent_outside_the_file_read_as_the_whole_file_reads_them(tmp_path):
    body = body_of(agent_with_subagent(tmp_path / "one.json", 4))
    scope = body["resourceSpans"][0]["scopeSpans"][0]
    for span in scope["spans"]:
        span.pop("startTimeUnixNano")
    scope["spans"][0]["parentSpanId"] = "00000000000000aa"
    path = tmp_path / "untimed.json"
    path.write_text(json.dumps(body))
    whole, streamed = both(path)
    assert streamed == whole
    said = [p.message for trial in otlp_stream.parse_path(path, "u").trials for p in trial.problems]  # type: ignore[union-attr]
    assert any("1 spans name a parent not in this file" in m for m in said), said


def test_a_span_id_twice_is_left_to_the_whole_reading(tmp_path):
    body = body_of(agent_with_subagent(tmp_path / "one.json", 2))
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["spanId"] = spans[0]["spanId"]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(body))
    assert otlp_stream.parse_path(path, "twice.json") is None


def test_resources_of_both_scope_keys_in_one_file_read_as_the_whole_file_reads_them(tmp_path):
    body = body_of(agent_with_subagent(tmp_path / "one.json", 3))
    older = body_of(agent_with_subagent(tmp_path / "two.json", 2))["resourceSpans"][0]
    older["instrumentationLibrarySpans"] = older.pop("scopeSpans")  # (OTLP before 1.0 names scopes so)
    body["resourceSpans"].append(older)
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(body))
    whole, streamed = both(path)
    assert streamed == whole
    assert len(streamed[0]) == 2


@pytest.mark.parametrize("backwards", [False, True])
def test_model_calls_inside_framework_calls_are_counted_once_and_warned_of_as_the_whole_file_does(tmp_path, backwards):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("langchain")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead"}
    with tracer.start_as_current_span("invoke_agent lead", attributes=agent):
        for n in range(6):  # (every third framework span says more tokens than the call within it)
            outer = {"openinference.span.kind": "LLM", "llm.token_count.prompt": 40 + (n % 3 == 0)}
            with tracer.start_as_current_span(f"ChatOpenAI {n}", attributes=outer):
                inner = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 40}
                with tracer.start_as_current_span(f"chat {n}", attributes=inner):
                    pass
    body = body_of(otlp_file(tmp_path / "nested.json", list(exporter.get_finished_spans()), []))
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(reversed_spans(body) if backwards else body))
    whole, streamed = both(path)
    assert streamed == whole
    said = [p.message for p in otlp_stream.parse_path(path, "n").trials[0].problems]  # type: ignore[union-attr]
    assert sorted(m.split("'")[1] for m in said if "do not sum" in m) == ["ChatOpenAI 0", "ChatOpenAI 3"]
    assert otlp_stream.parse_path(path, "n").trials[0].input_tokens == 6 * 40  # type: ignore[union-attr]
