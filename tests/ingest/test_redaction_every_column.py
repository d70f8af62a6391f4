"""No stored row keeps a redacted value, whichever of the redaction, the events, the spans and the
completion comes first (issue 43): every text and JSON column of every model the app registry has
is read for a canary, on the import path, the live path and the OTLP path."""

from __future__ import annotations

import json
from itertools import permutations

import orjson
import pytest
from django.apps import apps
from django.db import models
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.builders import good_steps, import_path, write_trial
from tests.live.helpers import event, runner_client, spine
from trials.models import Blob, PermissionDecision, ReceivedSpan, Trial

pytestmark = pytest.mark.django_db(transaction=True)  # (a released blob's file goes once its transaction commits)

CANARY = "LEAKCANARY-43"
ITEM = {"item_id": "item-43", "content": CANARY}
TEXT = json.dumps(ITEM)  # the item as JSON inside a text: a prompt, a reason, a tool's result


def text_and_json_columns() -> dict[type[models.Model], list[str]]:
    """Every model's text and JSON columns, from the app registry: a new one is read without a change here."""
    kinds = (models.CharField, models.TextField, models.JSONField)
    found = {m: [f.name for f in m._meta.concrete_fields if isinstance(f, kinds)] for m in apps.get_models()}
    return {model: names for model, names in found.items() if names and not model._meta.proxy}


def rows_with_canary() -> list[str]:
    """'app.Model.column #pk' for each stored value holding the canary."""
    found = []
    for model, names in text_and_json_columns().items():
        for pk, *values in model._default_manager.values_list("pk", *names):
            for name, value in zip(names, values, strict=True):
                if CANARY in (value if isinstance(value, str) else json.dumps(value)):
                    found.append(f"{model._meta.label}.{name} #{pk}")
    return found


def blob_bytes() -> bytes:
    """Every stored blob's bytes (a live trial has no pack whose files keep the value)."""
    return b"".join(blob.read() for blob in Blob.objects.all())


def test_the_walk_reads_the_tables_a_redaction_must_reach():
    columns = {model._meta.label: names for model, names in text_and_json_columns().items()}
    assert {"prompt", "scope", "reason", "raw"} <= set(columns["trials.PermissionDecision"])
    assert "span" in columns["trials.ReceivedSpan"] and "data" in columns["trials.ContextRecord"]
    assert "arguments" in columns["trials.ToolCall"] and "text" in columns["trials.StepText"]


# ---------------------------------------------------------------- import: a Harbor trial, a redaction file

SESSION = "sess-bad-input"  # (the session id tests.builders.atif gives the trial)


def harbor_trial(root) -> object:
    """A Harbor trial whose events.jsonl carries the item, and a permission asked and denied over it."""
    steps = good_steps()
    steps[1]["tool_calls"][0]["arguments"] = dict(ITEM)
    trial_dir = write_trial(root / "jobs", steps=steps)
    common = {"sessionId": SESSION, "timestamp": "2026-11-03T14:07:27Z"}
    lines = [
        {**common, "type": "context.item.added", "eventId": "e1", "payload": {"item": dict(ITEM)}},
        {**common, "type": "permission.requested", "eventId": "e2",
         "payload": {"actionId": "act-1", "toolName": "bash", "prompt": f"May I use {TEXT}?",
                     "scope": {"item": dict(ITEM)}}},
        {**common, "type": "permission.resolved", "eventId": "e3",
         "payload": {"actionId": "act-1", "decision": "deny", "reason": f"it holds {TEXT}"}},
    ]  # fmt: skip
    (trial_dir / "events.jsonl").write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    return trial_dir


def redactions_file(root) -> object:
    redaction = {"type": "context.redaction.applied", "eventId": "e9", "sessionId": SESSION,
                 "payload": {"redaction_id": "r1", "item_id": "item-43", "reason": "pii"}}  # fmt: skip
    path = root / "redactions.jsonl"
    path.write_bytes(orjson.dumps(redaction) + b"\n")
    return path


@pytest.mark.parametrize("first", ["the trial", "the redaction"])
def test_an_imported_trials_permissions_and_every_other_row_lose_a_redacted_value_whichever_comes_first(
    tmp_path, first
):
    trial_dir, later = harbor_trial(tmp_path), redactions_file(tmp_path)
    if first == "the trial":
        import_path(trial_dir)
        permission = PermissionDecision.objects.get()
        assert permission.decision == "deny"
        # the walk sees the value where it is before the redaction comes: the permission's four columns too
        held = rows_with_canary()
        for column in ("prompt", "scope", "reason", "raw"):
            assert f"trials.PermissionDecision.{column} #{permission.pk}" in held
        assert import_path(later).outcomes[0]["outcome"] == "imported"
    else:
        import_path(later)
        import_path(trial_dir)
    trial = Trial.objects.get()
    assert trial.events.count() == 4 and PermissionDecision.objects.filter(trial=trial).count() == 1
    assert rows_with_canary() == []
    assert CANARY.encode() in (trial_dir / "events.jsonl").read_bytes()  # the pack keeps its bytes


# ---------------------------------------------------------------- live: events, a redaction, the completion

REDACTION = event(9, "context.redaction.applied", redaction_id="r1", item_id="item-43", reason="pii")
LIVE_EVENTS = [
    event(2, "context.item.added", item=dict(ITEM)),
    event(3, "permission.requested", actionId="act-1", toolName="use_context", prompt=f"May I use {TEXT}?",
          scope={"item": dict(ITEM)}),
    event(4, "permission.resolved", actionId="act-1", decision="deny", reason=f"it holds {TEXT}"),
]  # fmt: skip
CARRYING_STEP = {
    "step_id": 1,
    "source": "agent",
    "message": f"using {TEXT}",
    "tool_calls": [{"tool_call_id": "c1", "function_name": "use_context", "arguments": dict(ITEM)}],
    "observation": {"results": [{"source_call_id": "c1", "content": TEXT}]},
}


@pytest.mark.parametrize("order", list(permutations(["redaction", "events", "completion"])), ids=" then ".join)
def test_a_live_trials_rows_lose_a_redacted_value_whichever_of_redaction_events_and_completion_comes_first(order):
    runner, _ = runner_client()
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(), format="json").json()["trial_id"]
    assert runner.post(f"/api/trials/{pk}/events/", {"steps": [CARRYING_STEP]}, format="json").status_code == 200
    for what in order:
        if what == "completion":
            body = {"trial_id": pk, "status": "completed"}
            assert runner.post("/api/commands/complete_benchmark_trial/", body, format="json").status_code == 200
        else:
            sent = {"events": [REDACTION] if what == "redaction" else LIVE_EVENTS}
            assert runner.post(f"/api/trials/{pk}/events/", sent, format="json").status_code == 200
        if what == "events" and "redaction" not in order[: order.index("events")]:
            assert any(row.startswith("trials.RuntimeEvent.") for row in rows_with_canary())  # (the walk sees it)
    if order.index("events") < order.index("completion"):  # (a completed trial's permissions are written then)
        assert PermissionDecision.objects.get(trial_id=pk).decision == "deny"
    assert rows_with_canary() == []
    assert CANARY.encode() not in blob_bytes()


# ---------------------------------------------------------------- OTLP: spans, a redaction, the completion

OTLP_ORDERS = [*permutations(["redaction", "spans", "completion"]), ("spans", "redaction", "root span"),
               ("redaction", "spans", "root span"), ("spans", "root span", "redaction")]  # fmt: skip


def carrying_spans(trial_id: str) -> tuple[list, object]:
    """A model call and a tool call carrying the item, under an agent span: ([chat, tool], the agent span)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"benchmark.trial.id": trial_id}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("runner")
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"using {TEXT}"}]}])
    with tracer.start_as_current_span("invoke_agent coder") as agent:
        agent.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"})
        with tracer.start_as_current_span("chat") as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.output.messages": answer})
        with tracer.start_as_current_span("execute_tool use_context") as tool:
            tool.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "use_context",
                                 "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": TEXT,
                                 "gen_ai.tool.call.result": TEXT})  # fmt: skip
    provider.shutdown()
    chat_span, tool_span, agent_span = memory.get_finished_spans()
    return [chat_span, tool_span], agent_span


@pytest.mark.parametrize("order", OTLP_ORDERS, ids=" then ".join)
def test_an_otlp_trials_spans_and_rows_lose_a_redacted_value_whichever_comes_first(live_server, order):
    runner, token = runner_client()
    trial_id = "otlp-redacted"
    pk = runner.post("/api/commands/start_benchmark_trial/", spine(trial_id), format="json").json()["trial_id"]
    children, root = carrying_spans(trial_id)
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Token {token}"})
    for what in order:
        done = Trial.objects.get(pk=pk).status != "running"
        if what == "redaction":
            body = {"events": [REDACTION]}
            assert runner.post(f"/api/trials/{pk}/events/", body, format="json").status_code == 200
        elif what == "completion":
            body = {"trial_id": pk, "status": "completed"}
            assert runner.post("/api/commands/complete_benchmark_trial/", body, format="json").status_code == 200
        elif done:  # spans for a trial that has ended: refused, nothing stored, nothing changed
            before = Trial.objects.values("status", "reward", "step_count").get(pk=pk)
            assert exporter.export(children).name == "FAILURE"
            assert not ReceivedSpan.objects.filter(trial_id=pk).exists()
            assert Trial.objects.values("status", "reward", "step_count").get(pk=pk) == before
        else:
            assert exporter.export(children if what == "spans" else [root]).name == "SUCCESS"
            if what == "spans" and "redaction" not in order[: order.index("spans")]:
                assert any(row.startswith("trials.ReceivedSpan.span") for row in rows_with_canary())
    trial = Trial.objects.get(pk=pk)
    assert trial.status == "passed"
    if order.index("spans") < order.index("completion" if "completion" in order else "root span"):
        assert (trial.step_count, trial.tool_call_count) == (1, 1)  # (the tool call is its model call's)
    assert rows_with_canary() == []
    assert CANARY.encode() not in blob_bytes()
    assert not ReceivedSpan.objects.filter(trial=trial).exclude(span={}).exists()  # (a finished trial's bodies go)
