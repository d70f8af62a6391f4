"""OpenTelemetry GenAI traces: the SDK's OTLP/HTTP exporter sending to the running server with a
runner's token, harbor-atif2otel's spans of the reference ATIF files, through POST /v1/traces, the
upload form and import_packs, with the steps coming back as the ATIF files have them."""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from google.rpc import status_pb2
from harbor_atif2otel import convert_trajectory, resource_spans_to_otlp_json
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from playwright.sync_api import expect

from tests.builders import REFERENCE
from tests.live.helpers import runner_client
from trials import search
from trials.ingest.formats import otlp
from trials.models import Import, ReceivedSpan, Trial

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
ATIF = REFERENCE / "harbor" / "atif"
FILES = [
    "claude-code/trajectory_pass.json",
    "claude-code/hello-load-atif-trajectory.json",
    "terminus-2/hello-world-invalid-json.trajectory.json",
    "terminus-2/hello-world-context-summarization.trajectory.json",
    "terminus-2/hello-world-timeout.trajectory.json",
]
CUT = 2048 - len("...[truncated]")  # harbor-atif2otel cuts tool arguments and results to 2,048 bytes


@pytest.fixture
def token(transactional_db) -> str:
    return runner_client()[1]


def exporter_trace(url: str, token: str, trial_id: str, fail_tool: bool = False) -> None:
    """A two-step agent run as an instrumented agent reports it: invoke_agent > chat, execute_tool, chat."""
    resource = Resource.create(
        {
            "service.name": "my-runner",
            "benchmark.trial.id": trial_id,
            "benchmark.task.id": "fix-readme",
            "benchmark.dataset.id": "lime-tasks",
            "benchmark.dataset.version": "2026-05",
            "benchmark.job.id": "jobs/otel-candidate",
            "benchmark.configuration.id": "candidate-otel",
            "benchmark.configuration.role": "candidate",
            "benchmark.attempt": 2,  # (on the resource: every batch of the trial carries it)
        }
    )
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Token {token}"})
    provider.add_span_processor(BatchSpanProcessor(exporter))  # (the SDK's usual processor)
    tracer = provider.get_tracer("runner")
    call = {"type": "tool_call", "id": "call_1", "name": "read_file", "arguments": {"path": "README.md"}}
    done = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}])
    history = [  # (each chat span repeats the conversation so far: only the new user turn is a step)
        {"role": "user", "parts": [{"type": "text", "content": "Fix the README."}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Reading it."}, call]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "# Old title"}]},
    ]
    with tracer.start_as_current_span("invoke_agent coder") as agent:
        agent.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder",
                              "benchmark.reward": 1.0})  # fmt: skip
        with tracer.start_as_current_span("chat gpt-5") as chat:
            chat.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-5",
                    "gen_ai.usage.input_tokens": 120,
                    "gen_ai.usage.output_tokens": 30,
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": "Fix the README."}]}]
                    ),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": "Reading it."}, call]}]
                    ),
                }
            )
        with tracer.start_as_current_span("execute_tool read_file") as tool:
            tool.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                                 "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": '{"path": "README.md"}',
                                 "gen_ai.tool.call.result": "# Old title"})  # fmt: skip
            if fail_tool:
                tool.set_status(Status(StatusCode.ERROR, "disk on fire"))
        provider.force_flush()  # a first batch (the chat and its tool); the rest comes in a second
        with tracer.start_as_current_span("chat gpt-5") as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5",
                                 "gen_ai.usage.input_tokens": 200, "gen_ai.usage.output_tokens": 10,
                                 "gen_ai.input.messages": json.dumps(history),
                                 "gen_ai.output.messages": done})  # fmt: skip
    provider.shutdown()


def test_the_sdks_protobuf_exporter_streams_a_live_trial_with_its_steps_tools_tokens_and_reward(live_server, token):
    exporter_trace(live_server.url, token, "otel-trial-1")
    trial = Trial.objects.get(key="lime:otel-trial-1")
    assert (trial.source_format, trial.status, trial.reward, trial.attempt) == ("live", "passed", 1.0, 2)
    assert (trial.task.name, trial.dataset.name, trial.configuration.key) == (
        "fix-readme",
        "lime-tasks",
        "candidate-otel",
    )
    assert trial.job.key == "live:jobs/otel-candidate"
    steps = list(trial.steps.order_by("index").values("source", "message_text", "prompt_tokens", "tool_call_count"))
    assert steps == [
        {"source": "user", "message_text": "Fix the README.", "prompt_tokens": None, "tool_call_count": 0},
        {"source": "agent", "message_text": "Reading it.", "prompt_tokens": 120, "tool_call_count": 1},
        {"source": "agent", "message_text": "Done.", "prompt_tokens": 200, "tool_call_count": 0},
    ]
    call = trial.steps.get(index=1).tool_calls.get()
    assert (call.tool_call_id, call.function_name, call.arguments) == ("call_1", "read_file", {"path": "README.md"})
    assert trial.steps.get(index=1).observations.get().preview == "# Old title"
    assert (trial.input_tokens, trial.output_tokens) == (320, 40)
    assert trial.events.filter(type="benchmark.trial.completed").count() == 1


def post_json(url: str, token: str | None, body: bytes, **headers: str) -> urllib3.BaseHTTPResponse:
    auth = {"Authorization": f"Token {token}"} if token else {}
    return urllib3.request("POST", f"{url}/v1/traces", body=body,
                           headers={"Content-Type": "application/json", **auth, **headers})  # fmt: skip


def otlp_json(name: str, trial_id: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    atif = json.loads((ATIF / name).read_text())
    data = {"resourceSpans": [resource_spans_to_otlp_json(convert_trajectory(atif))["resourceSpans"][0]]}
    if trial_id:
        data["resourceSpans"][0]["resource"]["attributes"].append(
            {"key": "benchmark.trial.id", "value": {"stringValue": trial_id}}
        )
    return atif, data


def assert_same_steps(atif: dict[str, Any], trial: Trial) -> None:
    """The ATIF file's steps (less the copied context the converter leaves out) as the trial's rows."""
    wanted = [s for s in atif["steps"] if not s.get("is_copied_context")]
    rows = list(trial.trajectories.get(role="main").steps.order_by("index").prefetch_related("tool_calls"))
    assert [r.source for r in rows] == [s["source"] for s in wanted]
    results = {r["source_call_id"]: otlp.text_of(r.get("content")) for s in wanted
               for r in (s.get("observation") or {}).get("results", []) if r.get("source_call_id")}  # fmt: skip
    for step, row in zip(wanted, rows, strict=True):
        if not (step.get("extra") or {}).get("context_management"):  # (the converter keeps its kind, not its text)
            assert row.message_text == otlp.text_of(step.get("message"))[: 10240 - 14] or row.message_text.endswith(
                "...[truncated]"
            )
        if step["source"] == "agent":
            metrics = step.get("metrics") or {}
            assert (row.prompt_tokens, row.completion_tokens) == (metrics.get("prompt_tokens"),
                                                                  metrics.get("completion_tokens"))  # fmt: skip
        calls = list(row.tool_calls.order_by("pk"))
        assert [c.function_name for c in calls] == [c["function_name"] for c in step.get("tool_calls", [])]
        for call, sent in zip(calls, step.get("tool_calls", []), strict=True):
            if len(json.dumps(sent["arguments"]).encode()) <= 2048:
                assert call.arguments == sent["arguments"]
        observed = [o.preview for o in row.observations.order_by("pk")]  # (its first 2,000 characters)
        for text, sent in zip(observed, step.get("tool_calls", []), strict=False):
            if (want := results.get(sent["tool_call_id"])) is not None:
                assert want.startswith(text[: min(CUT, len(text))]) and len(text) >= min(len(want), 1000)


@pytest.mark.parametrize("name", FILES)
def test_harbor_atif2otel_spans_posted_as_otlp_json_come_back_as_the_same_steps(live_server, token, name):
    atif, data = otlp_json(name, trial_id=f"atif2otel-{Path(name).stem}")
    response = post_json(live_server.url, token, orjson.dumps(data))
    assert response.status == 200, response.data
    assert response.json() == {}  # (no partial_success: every span kept)
    trial = Trial.objects.get(key=f"lime:atif2otel-{Path(name).stem}")
    assert trial.status == "passed"  # (the root span ended: completed, with no reward)
    assert_same_steps(atif, trial)


def test_spans_of_no_trace_are_refused_by_name_and_the_good_ones_kept(live_server, token):
    _, data = otlp_json("terminus-2/hello-world-timeout.trajectory.json", trial_id="half-good")
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    bad = spans[-1]
    bad["traceId"] = ""
    response = post_json(live_server.url, token, orjson.dumps(data))
    assert response.status == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"  # (int64: a string in OTLP/JSON)
    assert f"span {bad['spanId']} {bad['name']!r}" in partial["errorMessage"]
    assert "no trace" in partial["errorMessage"] and "resourceSpans[0].scopeSpans[0].spans[" in partial["errorMessage"]
    assert Trial.objects.get(key="lime:half-good").step_count == 4  # (the last tool call's span alone lost)


def test_a_body_over_the_limit_is_a_413_before_it_is_read_and_a_bad_one_a_400(live_server, token, settings):
    settings.OTLP_MAX_BODY_BYTES = 1000
    _, data = otlp_json("terminus-2/hello-world-timeout.trajectory.json")
    response = post_json(live_server.url, token, orjson.dumps(data))
    assert response.status == 413 and "1,000 bytes" in response.json()["message"]
    assert not Trial.objects.exists()
    response = post_json(live_server.url, token, b"{not json")
    assert response.status == 400 and response.json()["message"].startswith("POST /v1/traces:")
    assert post_json(live_server.url, None, b"{}").status == 401


def test_a_failed_tool_and_a_second_export_of_the_same_trial_keep_one_trial(live_server, token):
    exporter_trace(live_server.url, token, "otel-trial-2", fail_tool=True)
    trial = Trial.objects.get(key="lime:otel-trial-2")
    assert trial.steps.get(index=1).observations.get().preview == "# Old title"
    assert trial.events.filter(type="benchmark.trial.completed").count() == 1
    other, other_token = runner_client(name="runner-2")
    exporter_trace(live_server.url, other_token, "otel-trial-2")  # another account: refused, nothing written
    _, data = otlp_json("terminus-2/hello-world-timeout.trajectory.json", trial_id="otel-trial-2")
    partial = post_json(live_server.url, other_token, orjson.dumps(data)).json()["partialSuccess"]
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert partial["rejectedSpans"] == str(len(spans)) and "started by another account" in partial["errorMessage"]
    assert Trial.objects.filter(key="lime:otel-trial-2").count() == 1
    assert Trial.objects.get(key="lime:otel-trial-2").step_count == 3


def test_a_batch_the_exporter_sends_again_is_stored_once(live_server, token):
    """The SDK's exporter sends each batch until it hears back: a retry after a lost answer is no news."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"benchmark.trial.id": "sent-twice"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("runner")
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Looking."}]}])
    with tracer.start_as_current_span("chat") as chat:
        chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.output.messages": answer})
    with tracer.start_as_current_span("execute_tool ls") as tool:
        tool.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ls",
                             "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.result": "README.md"})  # fmt: skip
    first_batch = memory.get_finished_spans()
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"})
    for _ in range(2):
        assert exporter.export(first_batch).name == "SUCCESS"
    trial = Trial.objects.get(key="lime:sent-twice")
    assert (trial.step_count, trial.tool_call_count) == (1, 1)
    assert list(trial.steps.values_list("message_text", flat=True)) == ["Looking."]
    # a later batch holding one span already stored and a new one: the new one alone is added
    with tracer.start_as_current_span("chat") as chat:
        chat.set_attributes(
            {"gen_ai.operation.name": "chat", "gen_ai.output.messages": answer.replace("Looking", "Done")}
        )
    provider.shutdown()
    assert exporter.export([first_batch[0], memory.get_finished_spans()[-1]]).name == "SUCCESS"
    trial.refresh_from_db()
    assert list(trial.steps.order_by("index").values_list("message_text", flat=True)) == ["Looking.", "Done."]


# ---------------------------------------------------------------- OTLP JSON files, imported


def test_an_otlp_json_file_imports_through_import_packs_as_the_same_steps(db, tmp_path):
    atif, data = otlp_json("claude-code/trajectory_pass.json", trial_id="imported-otel")
    path = tmp_path / "traces.otlp.json"
    path.write_bytes(orjson.dumps(data))
    call_command("import_packs", str(path), "--no-progress", stdout=io.StringIO(), stderr=io.StringIO())
    trial = Trial.objects.get(key="lime:imported-otel")
    assert (trial.source_format, trial.step_count) == ("otlp", 12)
    assert trial.tool_call_count == 12
    assert_same_steps(atif, trial)


def test_an_otlp_json_file_through_the_upload_form_names_its_span_of_no_trace(
    client_logged_in, django_capture_on_commit_callbacks
):
    atif, data = otlp_json("terminus-2/hello-world-invalid-json.trajectory.json", trial_id="uploaded-otel")
    extra = json.loads(json.dumps(data["resourceSpans"][0]))
    extra["scopeSpans"][0]["spans"] = [
        {**extra["scopeSpans"][0]["spans"][0], "traceId": "", "spanId": "00000000000000aa"}
    ]
    data["resourceSpans"].append(extra)
    upload = SimpleUploadedFile("run.otlp.json", orjson.dumps(data))
    with django_capture_on_commit_callbacks(execute=True):
        assert client_logged_in.post("/imports/", {"files": [upload]}).status_code == 302
    imp = Import.objects.get()
    assert imp.status == "done", imp.problems
    trial = Trial.objects.get(key="lime:uploaded-otel")
    assert_same_steps(atif, trial)
    named = [p for p in imp.problems if "span 00000000000000aa" in p["message"]]
    assert named and named[0]["file"] == "run.otlp.json" and "no trace" in named[0]["message"]
    assert named[0]["json_path"] == "resourceSpans[1].scopeSpans[0].spans[0]" and named[0]["kept"] == "the other spans"
    page = client_logged_in.get(f"/trials/{trial.pk}/")
    assert page.status_code == 200 and b"mark_task_complete" in page.content


@pytest.mark.browser
def test_a_trial_sent_by_the_sdk_exporter_and_one_imported_read_on_their_pages(browser, live_server, token, tmp_path):
    exporter_trace(live_server.url, token, "otel-page")
    trial = Trial.objects.get(key="lime:otel-page")
    reader = get_user_model().objects.create_user("reader", password="pw-reader-1")
    client = Client()
    client.force_login(reader)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    page.goto(f"/trials/{trial.pk}/")
    expect(page.get_by_text("Fix the README.").first).to_be_visible()
    expect(page.get_by_text("read_file").first).to_be_visible()
    page.screenshot(path=str(tmp_path / "otlp-trial.png"))
    atif, data = otlp_json("terminus-2/hello-world-context-summarization.trajectory.json", trial_id="page-import")
    path = tmp_path / "summarization.otlp.json"
    path.write_bytes(orjson.dumps(data))
    call_command("import_packs", str(path), "--no-progress", stdout=io.StringIO(), stderr=io.StringIO())
    page.goto(f"/trials/{Trial.objects.get(key='lime:page-import').pk}/")
    expect(page.get_by_text("steps 1–10 of 10")).to_be_visible()
    expect(page.get_by_text("bash_command").first).to_be_visible()
    page.screenshot(path=str(tmp_path / "otlp-imported.png"))
    context.close()


def test_a_gzipped_body_is_read_and_one_that_inflates_past_the_limit_is_a_413(live_server, token, settings):
    atif, data = otlp_json("claude-code/hello-load-atif-trajectory.json", trial_id="gzipped")
    response = post_json(live_server.url, token, gzip.compress(orjson.dumps(data)), **{"Content-Encoding": "gzip"})
    assert response.status == 200, response.data
    assert_same_steps(atif, Trial.objects.get(key="lime:gzipped"))
    settings.OTLP_MAX_BODY_BYTES = 100_000
    bomb = gzip.compress(b'{"resourceSpans": [' + b" " * 10_000_000 + b"]}")
    assert len(bomb) < 100_000
    response = post_json(live_server.url, token, bomb, **{"Content-Encoding": "gzip"})
    assert response.status == 413 and "100,000 bytes" in response.json()["message"]


def test_a_protobuf_body_that_is_no_request_is_a_400_with_an_otlp_status(live_server, token):
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Token {token}"}
    body = b"\xff\xff\xff not protobuf"
    response = urllib3.request("POST", f"{live_server.url}/v1/traces", body=body, headers=headers)
    assert response.status == 400 and response.headers["Content-Type"] == "application/x-protobuf"
    status = status_pb2.Status()
    status.ParseFromString(response.data)
    assert status.message.startswith("POST /v1/traces: not an OTLP ExportTraceServiceRequest")
    assert not Trial.objects.exists()


def subagent_spans(trial_id: str) -> list[Any]:
    """A lead agent that hands a search to a subagent, which runs out of time: the SDK's finished spans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"benchmark.trial.id": trial_id}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("runner")
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Delegating."}]}])
    with tracer.start_as_current_span("invoke_agent lead") as lead:
        lead.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead"})
        with tracer.start_as_current_span("chat") as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.output.messages": answer})
        with tracer.start_as_current_span("invoke_agent searcher") as sub:
            sub.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "searcher"})
            with tracer.start_as_current_span("execute_tool grep") as tool:
                tool.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"})
                tool.set_attributes({"gen_ai.tool.call.id": "call_9", "gen_ai.tool.call.result": "3 matches"})
        lead.set_status(Status(StatusCode.ERROR, "the searcher ran out of time"))
        lead.set_attribute("error.type", "TimeoutError")
    provider.shutdown()
    return list(memory.get_finished_spans())


def assert_lead_and_searcher(trial: Trial) -> None:
    main, searcher = trial.trajectories.order_by("position")
    assert (main.role, main.agent["name"], main.step_count) == ("main", "lead", 1)
    assert (searcher.role, searcher.agent["name"], searcher.step_count) == ("subagent", "searcher", 1)
    step = searcher.steps.get()
    assert (step.tool_calls.get().function_name, step.observations.get().preview) == ("grep", "3 matches")


def test_a_nested_invoke_agent_span_is_a_subagent_trajectory_of_the_imported_trial(db, tmp_path):
    """Spans the SDK encodes as protobuf, decoded to OTLP/JSON and imported as a file."""
    data = otlp.decode_protobuf(encode_spans(subagent_spans("with-subagent")).SerializeToString())
    path = tmp_path / "subagent.otlp.json"
    path.write_bytes(orjson.dumps(data))
    call_command("import_packs", str(path), "--no-progress", stdout=io.StringIO(), stderr=io.StringIO())
    trial = Trial.objects.get(key="lime:with-subagent")
    assert (trial.status, trial.exception_type, trial.exception_message) == (
        "errored",
        "TimeoutError",
        "the searcher ran out of time",
    )
    assert_lead_and_searcher(trial)


def test_a_subagents_spans_sent_before_its_own_span_are_its_lane_once_the_trial_ends(live_server, token):
    """An exporter sends a span once it has ended: a long subagent's tool call may come a batch before
    the subagent's own span, and is read as the main agent's until the trial's end shows whose it was."""
    chat, tool, searcher, lead = subagent_spans("split-subagent")
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"})
    assert exporter.export([chat, tool]).name == "SUCCESS"
    trial = Trial.objects.get(key="lime:split-subagent")
    # whose the tool call is, is not known yet: it is read as the lead's, on its step
    assert (trial.trajectories.count(), trial.step_count, trial.steps.get().tool_call_count) == (1, 1, 1)
    assert exporter.export([searcher, lead]).name == "SUCCESS"
    trial.refresh_from_db()
    assert trial.status == "failed" and trial.step_count == 2
    assert_lead_and_searcher(trial)
    assert trial.trajectories.get(role="main").steps.get().tool_call_count == 0
    assert trial.tool_call_count == 1 and search.matching(trial, "matches").count() == 1
    assert all(t.blob_id for t in trial.trajectories.all())


def test_a_subagent_that_ends_before_its_lead_is_a_subagent_and_the_lead_ends_the_trial(live_server, token):
    """The subagent's own span comes a batch before the lead's: it is not taken for the trial's top."""
    chat, tool, searcher, lead = subagent_spans("lead-last")
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"})
    assert exporter.export([chat, tool, searcher]).name == "SUCCESS"
    trial = Trial.objects.get(key="lime:lead-last")
    assert trial.status == "running" and trial.events.filter(type="benchmark.trial.completed").count() == 0
    assert exporter.export([lead]).name == "SUCCESS"
    trial.refresh_from_db()
    assert trial.status == "failed" and trial.exception_message == "the searcher ran out of time"
    assert_lead_and_searcher(trial)
    assert ReceivedSpan.objects.filter(trial=trial, span={}).count() == 4  # (ids kept, bodies gone)
    # a span sent after the trial ended is refused whole, naming the trial and its state; nothing stored
    late = post_json(live_server.url, token, orjson.dumps(late_span_body("lead-last")))
    assert late.status == 409 and late.headers["Content-Type"] == "application/json"
    assert f"trial 'lead-last' (Benchviewer trial {trial.pk}) is failed" in late.json()["message"]
    assert trial.steps.count() == 2 and ReceivedSpan.objects.filter(trial=trial).count() == 4


def late_span_body(trial_id: str) -> dict:
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "One more thing."}]}])
    attributes = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                  {"key": "gen_ai.output.messages", "value": {"stringValue": answer}}]  # fmt: skip
    span = {"traceId": "c" * 32, "spanId": "d" * 16, "parentSpanId": "e" * 16, "name": "chat", "attributes": attributes}
    resource = {"attributes": [{"key": "benchmark.trial.id", "value": {"stringValue": trial_id}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}


def test_a_nested_invoke_agent_span_sent_live_is_a_subagent_trajectory_too(live_server, token, client_logged_in):
    """The SDK's exporter sending the same spans in one batch: the live trial has the imported one's lanes."""
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"})
    assert exporter.export(subagent_spans("live-subagent")).name == "SUCCESS"
    trial = Trial.objects.get(key="lime:live-subagent")
    assert trial.status == "failed" and trial.step_count == 2
    assert_lead_and_searcher(trial)
    assert all(t.blob_id for t in trial.trajectories.all())  # (each compacted into its ATIF file at completion)
    searcher = trial.trajectories.get(role="subagent")
    download = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/?trajectory={searcher.pk}")
    assert download.status_code == 200, download.status_code
    atif = orjson.loads(b"".join(download.streaming_content))
    assert (atif["agent"]["name"], [s["step_id"] for s in atif["steps"]]) == ("searcher", [1])
