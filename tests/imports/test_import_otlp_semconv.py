"""OTLP from the GenAI conventions' newer spans and events (issue 41): an `invoke_workflow` span above
the agents of a crew, `plan` spans around the model call that makes a plan,
`gen_ai.evaluation.result` events, as a span event and as a log record naming the span evaluated, and
agent-skill spans (semconv-genai's `execute_tool` spans carrying `gen_ai.skill.*`: load a skill, run
its script), by file and by `POST /v1/traces`, as the trial's pages and API read them.
Written by opentelemetry-sdk; the known answers come from what the test exported."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils.html import escape

from tests.builders import import_path
from tests.imports.otlp_helpers import EVALUATION, crew_run, otlp_body, otlp_file, skill_run
from trials.models import Step, Trial

pytestmark = pytest.mark.django_db


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


def span_id(span: Any) -> str:
    return format(span.context.span_id, "016x")


def skill_answers(spans: list[Any]) -> dict[str, Any]:
    """What the exported spans say a reviewer should read: a step per model call in time order, the skill
    each ran within (the `gen_ai.skill.name` of a span above it), the calls each asked for (its output
    messages) with the skill each tool span names, and the tokens of the model calls alone."""
    by_id = {s.context.span_id: s for s in spans}

    def skill_above(span: Any) -> str:
        parent = by_id.get(span.parent.span_id) if span.parent else None
        while parent is not None:
            if "gen_ai.skill.name" in parent.attributes:
                return str(parent.attributes["gen_ai.skill.name"])
            parent = by_id.get(parent.parent.span_id) if parent.parent else None
        return ""

    tools = {
        s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.attributes["gen_ai.operation.name"] == "execute_tool"
    }
    chats = sorted((s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"), key=lambda s: s.start_time)
    steps = []
    for chat in chats:
        parts = [p for m in json.loads(chat.attributes["gen_ai.output.messages"]) for p in m["parts"]]
        calls = {}
        for part in (p for p in parts if p["type"] == "tool_call"):
            attrs = tools[part["id"]].attributes
            skill = {k: attrs[f"gen_ai.skill.{k}"] for k in ("name", "description") if f"gen_ai.skill.{k}" in attrs}
            if "gen_ai.skill.resource.name" in attrs:
                skill["resource"] = attrs["gen_ai.skill.resource.name"]
            if "gen_ai.skill.source.uri" in attrs:
                skill["source_uri"] = attrs["gen_ai.skill.source.uri"]
            calls[part["id"]] = (part["name"], skill or None, attrs["gen_ai.tool.call.result"])
        text = "".join(p["content"] for p in parts if p["type"] == "text")
        steps.append({"skill": skill_above(chat), "calls": calls, "message": text,
                      "prompt_tokens": chat.attributes["gen_ai.usage.input_tokens"]})  # fmt: skip
    return {
        "steps": steps,
        "input": sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats),
        "output": sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats),
        "criteria": [dict(e.attributes) for s in spans for e in s.events if e.name == EVALUATION],
        "plan": {
            span_id(c) for c in chats if by_id[c.parent.span_id].attributes.get("gen_ai.operation.name") == "plan"
        },
    }


def assert_skill_trial_reads(client: Any, trial: Trial, spans: list[Any]) -> None:
    known = skill_answers(spans)
    detail = client.get(f"/api/trials/{trial.pk}/").json()
    # the skill span's own summed usage is not counted again: the model calls' is the trial's
    assert (detail["input_tokens"], detail["output_tokens"]) == (known["input"], known["output"])
    shown = client.get(f"/api/trials/{trial.pk}/steps/").json()["steps"]
    assert [s["source"] for s in shown] == ["agent"] * len(known["steps"])
    assert [s["skill"] for s in shown] == [k["skill"] for k in known["steps"]]
    assert [s["prompt_tokens"] for s in shown] == [k["prompt_tokens"] for k in known["steps"]]
    assert [s["message"] for s in shown] == [k["message"] for k in known["steps"]]
    # each tool call on the step of the model call that asked for it (the skill's own tool on the skill's step,
    # the file read after the skill on the step that asked for it), each named with the skill it loads or runs
    assert [{c["tool_call_id"]: (c["function_name"], c["skill"]) for c in s["tool_calls"]} for s in shown] == [
        {i: (name, skill) for i, (name, skill, _) in k["calls"].items()} for k in known["steps"]
    ]
    for number, step in enumerate(known["steps"], start=1):
        full = client.get(f"/api/trials/{trial.pk}/steps/{number}/").json()
        results = {o["source_call_id"]: o["content"] for o in full["observations"]}
        assert results == {i: result for i, (_, _, result) in step["calls"].items()}
        assert (full["extra"].get("phase") == "plan") == (full["extra"]["otel"]["span_id"] in known["plan"])
    page = client.get(f"/trials/{trial.pk}/").content.decode()
    within = [k["skill"] for k in known["steps"] if k["skill"]]
    assert page.count('<span class="badge skill-badge" title="run within the agent skill') == len(within)
    for _, skill, _ in (call for k in known["steps"] for call in k["calls"].values()):
        if skill:
            label = f"skill {skill['name']}" + (f" · {skill['resource']}" if "resource" in skill else "")
            assert f">{escape(label)}</span>" in page
    verifier = client.get(f"/trials/{trial.pk}/?tab=verifier").content.decode()
    for said in known["criteria"]:
        row = f"<tr><td>{escape(said['gen_ai.evaluation.name'])}</td><td>{said['gen_ai.evaluation.score.value']}</td>"
        assert row in verifier and escape(said["gen_ai.evaluation.explanation"]) in verifier


def test_an_agent_skill_its_calls_and_an_evaluation_read_as_steps_from_a_file(tmp_path, client_logged_in):
    spans = skill_run()
    imp = import_path(otlp_file(tmp_path / "skill.json", spans, []))
    assert imp.status == "done", imp.problems
    assert_skill_trial_reads(client_logged_in, Trial.objects.get(), spans)


def test_an_agent_skill_its_calls_and_an_evaluation_read_as_steps_from_v1_traces(transactional_db, client_logged_in):
    from tests.live.helpers import runner_client

    spans = skill_run()
    runner, _ = runner_client()
    response = runner.post("/v1/traces", data=json.dumps(otlp_body(spans)), content_type="application/json")
    assert response.status_code == 200, response.content
    trial = Trial.objects.get()
    assert trial.status != Trial.Status.RUNNING  # (its root span came: the run is over)
    assert_skill_trial_reads(client_logged_in, trial, spans)
