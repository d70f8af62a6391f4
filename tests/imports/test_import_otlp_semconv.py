"""OTLP from the GenAI conventions' newer spans and events (issue 41): an `invoke_workflow` span above
the agents of a crew, `plan` spans around the model call that makes a plan, and
`gen_ai.evaluation.result` events, as a span event and as a log record naming the span evaluated.
Written by opentelemetry-sdk; the known answers come from what the test exported."""

from __future__ import annotations

import pytest

from tests.builders import import_path
from tests.imports.otlp_helpers import EVALUATION, crew_run, otlp_file
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
