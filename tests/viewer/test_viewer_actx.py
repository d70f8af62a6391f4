"""ACTX-AR cases (../shared/seeds/agent-context-runtime-test-cases.txt), one test each:
what the trial page and the API show for crafted Agent Context events."""

from __future__ import annotations

import itertools

import pytest
from django.urls import reverse

from tests.builders import crafted_trial_dir, import_trial_dir

pytestmark = pytest.mark.django_db

IDS = {
    "runtime_id": "rt_1",
    "session_id": "sess_1",
    "thread_id": "thread_1",
    "turn_id": "turn_1",
    "task_id": "task_1",
    "run_id": "run_1",
}
_counter = itertools.count(1)
SECRET = "sk-actx-RAW-SECRET-VALUE-42"


def event(event_type: str, data: dict, **ids) -> dict:
    return {
        "schema_version": "0.1.1",
        "event_id": f"ctxevt_{next(_counter)}",
        "event_type": event_type,
        "time": "2026-11-03T14:02:32.000Z",
        "context_id": "ctx_1",
        **IDS,
        "step_id": "3",
        **ids,
        "data": data,
    }


def item(item_id: str, **extra) -> dict:
    return {
        "item_id": item_id,
        "context_kind": "file",
        "title": f"title of {item_id}",
        "content": f"content of {item_id}",
        "source_refs": [{"source_id": f"src_{item_id}", "uri": f"file:///app/{item_id}.py"}],
        "sensitivity": "internal",
        "redaction_state": "none",
        **extra,
    }


@pytest.fixture
def trial_with(tmp_path):
    def build(*events):
        return import_trial_dir(crafted_trial_dir(tmp_path, context_events=list(events)))

    return build


def context_tab(client, trial) -> str:
    response = client.get(reverse("trial-detail", args=[trial.pk]), {"tab": "context"})
    assert response.status_code == 200
    return response.content.decode()


def trajectory_tab(client, trial) -> str:
    return client.get(reverse("trial-detail", args=[trial.pk])).content.decode()


def api_records(client, trial, kind=None) -> list[dict]:
    params = {"kind": kind} if kind else {}
    return client.get(reverse("api-trial-context", args=[trial.pk]), params).json()["records"]


def test_actx_ar_id_001_turn_context_envelope_keeps_session_thread_and_turn_ids(client_logged_in, trial_with):
    envelope = {"context_id": "ctx_turn_1", "scope": "turn", "lifecycle": "active", **IDS}
    trial = trial_with(event("context.surface.created", {"envelope": envelope}))
    (record,) = api_records(client_logged_in, trial, "envelope")
    assert record["context_id"] == "ctx_turn_1"
    for key, value in (("sessionId", "sess_1"), ("threadId", "thread_1"), ("turnId", "turn_1")):
        assert record["correlation"][key] == value
    html = context_tab(client_logged_in, trial)
    section = html[html.index('id="ctx-envelope"') :]
    assert "<code>ctx_turn_1</code>" in section
    for value in ("sess_1", "thread_1", "turn_1"):
        assert f"<code>{value}</code>" in section


def test_actx_ar_id_002_task_retry_selections_keep_attempt_ids_and_both_attempts(client_logged_in, trial_with):
    def selection(sel_id, attempt):
        data = {"selection": {"selection_id": sel_id, "selected_item_refs": ["item_a"], "omitted_item_refs": []}}
        return event("context.selection.completed", data, attempt_id=attempt)

    trial = trial_with(selection("sel_attempt_1", "attempt_1"), selection("sel_attempt_2", "attempt_2"))
    records = [r for r in api_records(client_logged_in, trial, "selection") if r["status"] == ""]
    by_id = {r["record_id"]: r["correlation"] for r in records}
    assert set(by_id) == {"sel_attempt_1", "sel_attempt_2"}  # the old attempt is not overwritten
    assert by_id["sel_attempt_1"]["attemptId"] == "attempt_1"
    assert by_id["sel_attempt_2"]["attemptId"] == "attempt_2"
    assert all(c["taskId"] == "task_1" and c["runId"] == "run_1" for c in by_id.values())
    html = context_tab(client_logged_in, trial)
    assert "<code>sel_attempt_1</code>" in html and "<code>sel_attempt_2</code>" in html


def test_actx_ar_sel_001_selected_and_omitted_items_are_explicit_with_reasons(client_logged_in, trial_with):
    selection = {
        "selection_id": "sel_budget",
        "selected_item_refs": [{"item_id": "item_main", "reason": "directly edited file"}],
        "omitted_item_refs": ["item_old_notes", "item_style"],
        "omission_reasons": {"item_old_notes": "stale source", "item_style": "over budget"},
    }
    trial = trial_with(event("context.selection.completed", {"selection": selection}))
    rows = {r["item_id"]: r for r in api_records(client_logged_in, trial, "selection") if r["status"]}
    assert rows["item_main"]["status"] == "selected" and rows["item_main"]["reason"] == "directly edited file"
    assert rows["item_old_notes"]["status"] == "omitted" and rows["item_old_notes"]["reason"] == "stale source"
    assert rows["item_style"]["reason"] == "over budget"
    html = context_tab(client_logged_in, trial)
    omitted = html[html.index('class="omitted"') :]
    omitted = omitted[: omitted.index("</table>")]
    assert "<code>item_old_notes</code></td><td>stale source</td>" in omitted
    assert "<code>item_style</code></td><td>over budget</td>" in omitted
    selected = html[html.index('class="selected"') :]
    assert "<code>item_main</code></td><td>directly edited file</td>" in selected
    assert 'class="ctx-ref ctx-selection"' in trajectory_tab(client_logged_in, trial)  # inline on step 3


def test_actx_ar_budget_001_budget_record_explains_the_truncation(client_logged_in, trial_with):
    budget = {
        "budget_id": "budget_1",
        "max_tokens": 8000,
        "reserved_tokens": 1500,
        "actual_tokens": 6500,
        "overflow_strategy": "truncate_tail",
        "truncation_records": [{"item_id": "item_build_log", "original_tokens": 9000, "kept_tokens": 2000}],
    }
    trial = trial_with(event("context.budget.applied", {"budget": budget}))
    (record,) = api_records(client_logged_in, trial, "budget")
    assert record["overflow_strategy"] == "truncate_tail"
    assert record["truncation_records"][0]["item_id"] == "item_build_log"
    html = context_tab(client_logged_in, trial)
    section = html[html.index('id="ctx-budget"') :]
    assert "max 8000 tokens · reserved 1500 · actual 6500 · overflow <code>truncate_tail</code>" in section
    assert "<code>item_build_log</code>" in section


def test_actx_ar_asm_001_assembly_points_to_source_refs_and_item_ids(client_logged_in, trial_with):
    assembly = {
        "assembly_id": "asm_1",
        "target": "model_request",
        "model_request_id": "req_42",
        "source_item_refs": ["item_instruction", "item_main"],
        "source_refs": [{"source_id": "src_task", "uri": "task://demo/instruction.md"}],
    }
    trial = trial_with(event("context.assembly.created", {"assembly": assembly}))
    (record,) = api_records(client_logged_in, trial, "assembly")
    assert record["model_request_id"] == "req_42"
    assert record["source_item_refs"] == ["item_instruction", "item_main"]
    html = context_tab(client_logged_in, trial)
    section = html[html.index('id="ctx-assembly"') :]
    assert "model request <code>req_42</code>" in section
    assert "<code>item_instruction</code> <code>item_main</code>" in section
    assert "<code>task://demo/instruction.md</code>" in section
    step = trajectory_tab(client_logged_in, trial)
    step = step[step.index('id="step-3"') :]
    assert 'class="ctx-ref ctx-assembly"' in step[: step.index("</article>")]


def test_actx_ar_missing_001_missing_context_is_a_requestable_fact(client_logged_in, trial_with):
    missing = {
        "missing_id": "miss_1",
        "requested_from": "user",
        "blocked_actions": ["read /etc/app/secrets.yaml"],
        "safe_summary": "The agent needs the deployment config, which it cannot read.",
    }
    trial = trial_with(event("context.missing.detected", {"missing": missing}))
    (record,) = api_records(client_logged_in, trial, "missing")
    assert record["status"] == "missing"
    assert record["owner"] == "user"
    assert record["requested_action"] == ["read /etc/app/secrets.yaml"]
    assert record["safe_summary"].startswith("The agent needs")
    html = context_tab(client_logged_in, trial)
    section = html[html.index('id="ctx-missing"') :]
    assert "<dt>Owner</dt><dd>user</dd>" in section
    assert "<dt>Requested action</dt><dd>read /etc/app/secrets.yaml</dd>" in section
    # a missing-context record is never turned into a permission approval
    assert not trial.permissions.filter(decision="approve").exists()


def test_actx_ar_compact_001_compaction_references_its_source_window(client_logged_in, trial_with):
    compaction = {
        "compaction_id": "cmp_1",
        "scope": "thread",
        "source_window": {"from_step": 3, "to_step": 12},
        "source_item_refs": ["item_a", "item_b"],
        "summary_ref": "atif://trajectory.json#/steps/12",
        "method": "summarize",
    }
    trial = trial_with(event("context.compaction.completed", {"compaction": compaction}))
    (record,) = api_records(client_logged_in, trial, "compaction")
    assert record["status"] == "compacted"
    assert record["source_window"] == {"from_step": 3, "to_step": 12}
    html = context_tab(client_logged_in, trial)
    section = html[html.index('id="ctx-compaction"') :]
    assert "&quot;from_step&quot;: 3" in section and "&quot;to_step&quot;: 12" in section
    assert "it is not a final answer" in section


def test_actx_ar_policy_001_redaction_keeps_reason_and_policy_refs_never_the_value(client_logged_in, trial_with):
    secret_item = item("item_env", content=f"OPENAI_API_KEY={SECRET}", redaction_state="masked")
    redaction = {
        "item_id": "item_env",
        "redaction_state": "masked",
        "redaction_method": "mask",
        "redacted_fields": ["content"],
        "reason": "Credential detected by the secret scanner.",
        "policy_refs": ["policy:secrets/no-credentials-in-context"],
    }
    trial = trial_with(
        event("context.item.added", {"item": secret_item}),
        event("context.redaction.applied", {"redaction": redaction}),
    )
    (record,) = api_records(client_logged_in, trial, "item")
    assert record["status"] == "redacted"
    assert record["reason"] == "Credential detected by the secret scanner."
    assert "policy:secrets/no-credentials-in-context" in record["policy_refs"]
    html = context_tab(client_logged_in, trial)
    assert "policy:secrets/no-credentials-in-context" in html
    assert "Credential detected by the secret scanner." in html
    responses = [html, trajectory_tab(client_logged_in, trial)]
    for name in ("api-trial-context", "api-trial-detail", "api-trial-steps", "api-trial-permissions"):
        responses.append(client_logged_in.get(reverse(name, args=[trial.pk])).content.decode())
    for tab in ("permissions", "verifier", "artifacts", "logs", "exception", "config", "events"):
        responses.append(client_logged_in.get(reverse("trial-detail", args=[trial.pk]), {"tab": tab}).content.decode())
    for body in responses:
        assert SECRET not in body


def test_a_redacted_items_own_reason_is_shown_when_no_redaction_record_gives_one(client_logged_in, trial_with):
    masked = item("item_tok", content="kept out", redaction_state="masked", reason="Customer data, masked at source.")
    trial = trial_with(event("context.item.added", {"item": masked}))
    (record,) = api_records(client_logged_in, trial, "item")
    assert record["reason"] == "Customer data, masked at source."
    html = context_tab(client_logged_in, trial)
    assert "Redacted (masked): Customer data, masked at source." in html and "no reason given" not in html


def test_actx_ar_evid_001_evidence_cites_context_refs_instead_of_copying_payloads(client_logged_in, trial_with):
    export = {"evidence_id": "evid_1", "source_map": [{"item_ref": "item_main", "source_ref": "src_item_main"}]}
    trial = trial_with(
        event("context.item.added", {"item": item("item_main")}),
        event("context.exported", export, evidence_id="evid_1"),
    )
    records = api_records(client_logged_in, trial)
    exported = [r for r in records if r["correlation"].get("evidenceId") == "evid_1"]
    assert exported  # the evidence id joins the context refs
    html = context_tab(client_logged_in, trial)
    assert "<code>file:///app/item_main.py</code>" in html  # the item's source ref
    for record in exported:  # the export cites refs; it does not carry the item's content
        assert "content of item_main" not in str(record["data"])


def test_actx_ar_gov_001_context_records_never_declare_runtime_status(client_logged_in, trial_with):
    trial = trial_with(
        event("context.item.added", {"item": item("item_a", status="completed", tool_status="succeeded")}),
        event("context.selection.completed", {"selection": {"selection_id": "sel_g", "turn_status": "completed"}}),
    )
    statuses = {r["status"] for r in api_records(client_logged_in, trial)}
    assert not statuses & {"completed", "failed", "approved", "succeeded", "success", "passed"}
    trial.refresh_from_db()
    assert trial.status != "completed"
    context = context_tab(client_logged_in, trial)
    assert "declares runtime status (status=completed, tool_status=succeeded); ignored" in context
    assert 'class="badge completed"' not in context and 'class="badge succeeded"' not in context
