"""The failure-feedback form: pre-fill, each target it files, validation that keeps input."""

from __future__ import annotations

import json
from datetime import timedelta

import orjson
import pytest
from django.utils import timezone
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.builders import REFERENCE, atif, good_steps, import_path, make_user, write_trial
from tests.factories import TrialFactory
from trials.models import RuntimeEvent, Trial
from trials.models.qc import AuditEntry, FailureMode, QCItem, QCScenario
from trials.triage import prefill, services
from trials.triage.forms import FeedbackForm

pytestmark = pytest.mark.django_db


@pytest.fixture
def approver(db):
    return make_user("abe", "approver")


def _refs(trial, kind: str = "step") -> list[str]:
    return [value for _, options in prefill.evidence_choices(trial) for value, _ in options if value.startswith(kind)]


def _form(trial, user, **data) -> FeedbackForm:
    base = {"kind": "release-blocker", "category": "tool", "severity": "P1", "evidence_refs": _refs(trial)[:1]}
    return FeedbackForm(data=base | data, trial=trial, user=user)


def _file(trial, user, **data) -> QCItem:
    form = _form(trial, user, **data)
    assert form.is_valid(), form.errors
    return services.file_item(user, trial, form.cleaned_data)


def _lime_validator() -> Draft202012Validator:
    schema = json.loads((REFERENCE / "lime-agentruntime" / "agentruntime-lime-profile-event.schema.json").read_text())
    # The portable base schema it $refs is not in shared/reference: stand in an open schema.
    base = Resource.from_contents({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"})
    registry = Registry().with_resource(
        "https://limecloud.github.io/agentruntime/schemas/agentruntime-event.schema.json", base
    )
    return Draft202012Validator(schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)


# ------------------------------------------------------------------ pre-fill


def test_prefill_reads_the_failure_category_of_the_benchmark_trial_failed_event(failed):
    trial = failed[0]
    event = trial.events.get(type="benchmark.trial.failed")
    guess = prefill.prefill(trial)
    assert guess.code == event.payload["failureCategory"]
    assert guess.source == "benchmark.trial.failed failureCategory"
    assert guess.category in ("tool", "runtime", "verifier")


def test_prefill_keeps_reading_the_pack_after_a_triager_filed_another_category(triager, db):
    trial = TrialFactory(reward=0.0, status="failed", failure_category="stale-success")
    assert not trial.events.exists()
    before = prefill.prefill(trial)
    _file(trial, triager, category="tool", code="tool-result-missing", evidence_refs=[f"trial:{trial.key}"])
    assert trial.events.filter(type="benchmark.trial.failed", pack=None).exists()  # written by triage
    assert prefill.prefill(trial) == before and before.source == "trial failure category"


def test_prefill_falls_back_to_the_trial_category_then_the_exception_type(db):
    assert prefill.prefill(TrialFactory(reward=0.0, failure_category="stale-success")).category == "verifier"
    guess = prefill.prefill(TrialFactory(reward=0.0, exception_type="VerifierTimeoutError"))
    assert (guess.category, guess.source) == ("verifier", "exception VerifierTimeoutError")
    assert prefill.prefill(TrialFactory(reward=0.0, exception_type="AgentTimeoutError")).code == "timeout"
    assert prefill.prefill(TrialFactory(reward=0.0, exception_type="DockerBuildError")).category == "environment"


def test_the_form_page_is_prefilled_and_shows_the_trial_facts(client, failed, triager):
    trial = failed[0]
    step_id = trial.steps.order_by("index").first().step_id
    client.force_login(triager)
    page = client.get(f"/trials/{trial.pk}/feedback/?step={step_id}")
    assert page.status_code == 200
    form = page.context["form"]
    assert form.initial["code"] == prefill.prefill(trial).code
    assert form.initial["step_id"] == step_id and form.initial["evidence_refs"] == [f"step:{step_id}"]
    html = page.content.decode()
    for fact in (trial.name, trial.task.name, trial.exception_type, trial.status):
        assert fact in html


def test_evidence_refs_offer_only_what_the_trial_has(failed, triager):
    trial = failed[2]
    values = [v for _, options in prefill.evidence_choices(trial) for v, _ in options]
    assert f"trial:{trial.key}" in values
    assert any(v.startswith("step:") for v in values) and any(v.startswith("tool_call:") for v in values)
    assert any(v.startswith("artifact:") for v in values)
    form = _form(trial, triager, evidence_refs=["step:9999", "tool_call:made-up"])
    assert not form.is_valid() and "evidence_refs" in form.errors


def test_a_continuations_steps_are_cited_with_their_file_and_their_feedback_links_cite_them(tmp_path, client, triager):
    trial_dir = write_trial(tmp_path)
    (trial_dir / "agent" / "trajectory.cont-1.json").write_bytes(orjson.dumps(atif(good_steps())))
    import_path(trial_dir)
    trial = Trial.objects.get()
    continuation = trial.trajectories.get(role="continuation")
    cited = "2@trajectory.cont-1.json"  # its step_ids repeat the main file's
    assert [ref for ref, _ in prefill.step_choices(trial)] == ["1", "2", "1@trajectory.cont-1.json", cited]
    client.force_login(triager)
    page = client.get(f"/trials/{trial.pk}/", {"t": continuation.pk}).content.decode()
    link = f"/trials/{trial.pk}/feedback/?step=2&amp;t={continuation.pk}"
    assert link in page
    form = client.get(link.replace("&amp;", "&")).context["form"]
    assert form.initial["step_id"] == cited and form.initial["evidence_refs"] == [f"step:{cited}"]
    assert client.get(f"/trials/{trial.pk}/feedback/", {"step": 2}).context["form"].initial["step_id"] == "2"
    item = _file(trial, triager, step_id=cited, evidence_refs=[f"step:{cited}"])
    assert item.step_id == cited and item.evidence_refs == [{"kind": "step", "ref": cited}]


# ------------------------------------------------------------------ each target


def test_a_failure_mode_creates_scenario_and_mode_with_an_audit_entry(failed, triager):
    trial = failed[0]
    form = _form(
        trial,
        triager,
        kind="failure-mode",
        code="stream-stuck",
        category="runtime",
        severity="P0",
        new_failure_mode="stream stuck after tool result",
        new_scenario_id="runtime-stream-recovery",
        new_scenario_title="Runtime stream recovery",
    )
    assert form.is_valid(), form.errors
    item = services.file_item(triager, trial, form.cleaned_data)
    assert item.scenario.scenario_id == "runtime-stream-recovery"
    assert item.failure_mode.name == "stream stuck after tool result"
    assert item.evidence_refs == [{"kind": "step", "ref": _refs(trial)[0].split(":", 1)[1]}]
    entry = AuditEntry.objects.get(item=item, action="filed")
    assert entry.actor == triager and entry.changes["severity"] == [None, "P0"]
    assert AuditEntry.objects.filter(action="scenario created", scenario=item.scenario).exists()


def test_a_second_failure_mode_with_the_same_name_is_added_to_the_existing_one(failed, triager):
    first = _file(
        failed[0], triager, kind="failure-mode", new_failure_mode="tool result missing", new_scenario_id="tools"
    )
    form = _form(
        failed[1], triager, kind="failure-mode", scenario=first.scenario.pk, new_failure_mode="Tool Result Missing"
    )
    assert form.is_valid(), form.errors
    second = services.file_item(triager, failed[1], form.cleaned_data)
    assert second.failure_mode == first.failure_mode
    assert FailureMode.objects.count() == 1


def test_duplicates_are_offered_before_a_new_failure_mode_is_made(failed, triager):
    scenario = QCScenario.objects.create(scenario_id="tool-approval-sandbox-boundary", title="Tool approval", risk="P0")
    FailureMode.objects.create(scenario=scenario, name="tool result missing", code="tool-result-missing")
    data = {"kind": "failure-mode", "code": "tool-result-missing", "new_failure_mode": "tool output lost"}
    form = _form(failed[2], triager, new_scenario_id="other-scenario", **data)
    assert not form.is_valid()
    assert "Similar failure modes already exist" in form.errors["new_failure_mode"][0]
    assert [m.name for m in form.similar] == ["tool result missing"]
    anyway = _form(failed[2], triager, new_scenario_id="other-scenario", create_anyway="on", **data)
    assert anyway.is_valid(), anyway.errors
    services.file_item(triager, failed[2], anyway.cleaned_data)
    assert FailureMode.objects.count() == 2


def test_a_replay_fixture_and_a_verifier_criterion_need_a_name(failed, triager):
    for kind in ("replay-fixture", "verifier-criterion"):
        form = _form(failed[0], triager, kind=kind)
        assert not form.is_valid() and "target_name" in form.errors
        form = _form(failed[0], triager, kind=kind, target_name=f"{kind}-stream-stuck")
        assert form.is_valid(), form.errors
        item = services.file_item(triager, failed[0], form.cleaned_data)
        assert item.kind == kind and item.target_name == f"{kind}-stream-stuck"


def test_a_release_blocker_cites_evidence(failed, triager):
    assert "evidence_refs" in _form(failed[0], triager, evidence_refs=[]).errors
    form = _form(failed[0], triager, severity="P0", note="stream never resumed")
    assert form.is_valid(), form.errors
    item = services.file_item(triager, failed[0], form.cleaned_data)
    assert (item.kind, item.severity, item.status) == ("release-blocker", "P0", "open")


def test_a_waiver_needs_an_approver_reason_scope_and_a_future_expiry(failed, triager, approver):
    trial = failed[0]
    blocker = _file(trial, triager, severity="P0")
    by_triager = _form(trial, triager, kind="waiver", waived_item=blocker.pk, approver=approver.pk)
    assert not by_triager.is_valid()
    assert "Only an approver can grant a waiver." in by_triager.errors["kind"]
    empty = _form(trial, approver, kind="waiver", waived_item=blocker.pk, approver=triager.pk)
    assert not empty.is_valid()
    assert set(empty.errors) >= {"approver", "reason", "scope", "expires_at"}
    assert empty.errors["approver"] == ["The approver must be in the approver group."]
    past = timezone.now() - timedelta(days=1)
    late = _form(
        trial,
        approver,
        kind="waiver",
        waived_item=blocker.pk,
        approver=approver.pk,
        reason="r",
        scope="s",
        expires_at=past.strftime("%Y-%m-%dT%H:%M"),
    )
    assert late.errors["expires_at"] == ["The expiry must be in the future."]
    expires = (timezone.now() + timedelta(days=7)).strftime("%Y-%m-%dT%H:%M")
    ok = _form(
        trial,
        approver,
        kind="waiver",
        waived_item=blocker.pk,
        approver=approver.pk,
        reason="fix lands next sprint",
        scope="release 1.4 desktop only",
        expires_at=expires,
    )
    assert ok.is_valid(), ok.errors
    waiver = services.file_item(approver, trial, ok.cleaned_data)
    assert waiver.waived_item == blocker and list(blocker.waivers.active_waivers()) == [waiver]


def test_a_waiver_needs_something_to_waive(failed, approver):
    form = _form(failed[1], approver, kind="waiver")
    assert "This trial has no open QC item to waive: file the blocker first." in form.errors["waived_item"]


def test_an_error_keeps_everything_the_user_typed(client, failed, triager):
    trial = failed[0]
    client.force_login(triager)
    refs = _refs(trial)[:2]
    response = client.post(
        f"/trials/{trial.pk}/feedback/",
        {
            "kind": "replay-fixture",
            "category": "runtime",
            "code": "stream-stuck",
            "severity": "P0",
            "evidence_refs": refs,
            "note": "the note I typed",
        },
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Name the replay fixture to add." in html
    assert "the note I typed" in html
    for ref in refs:
        assert f'value="{ref}"' in html and "checked" in html
    assert response.context["form"]["severity"].value() == "P0"
    assert not QCItem.objects.exists()


def test_filing_from_the_page_redirects_to_the_item_with_its_history(client, failed, triager):
    trial = failed[0]
    client.force_login(triager)
    response = client.post(
        f"/trials/{trial.pk}/feedback/",
        {"kind": "release-blocker", "category": "runtime", "severity": "P0", "evidence_refs": _refs(trial)[:1]},
        follow=True,
    )
    item = QCItem.objects.get()
    assert response.redirect_chain[-1][0] == item.get_absolute_url()
    html = response.content.decode()
    assert "History" in html and "filed" in html and "tina" in html


# ------------------------------------------------------------------ runtime events


def test_filing_writes_the_benchmark_events_the_pack_lacked_and_they_are_schema_valid(db, triager):
    trial = TrialFactory(reward=0.0, exception_type="RuntimeError", session_id="sess-1", run_id="run-1")
    form = _form(trial, triager, evidence_refs=[f"trial:{trial.key}"], code="tool-result-missing")
    assert form.is_valid(), form.errors
    item = services.file_item(triager, trial, form.cleaned_data)
    events = {e.type: e for e in RuntimeEvent.objects.filter(trial=trial)}
    assert set(events) == {"benchmark.trial.failed", "benchmark.reward.recorded"}
    failed_event = events["benchmark.trial.failed"]
    assert failed_event.payload == {
        "failureCategory": "tool-result-missing",
        "source": "triage",
        "qcItemId": item.label,
        "exceptionType": "RuntimeError",
    }
    validator = _lime_validator()
    for event in events.values():
        errors = sorted(validator.iter_errors(event.raw), key=str)
        assert not errors, [e.message for e in errors]
        assert event.raw["benchmark"]["trialId"] == trial.name and event.raw["sessionId"] == "sess-1"
    # A second item adds no second copy.
    _file(trial, triager, evidence_refs=[f"trial:{trial.key}"])
    assert RuntimeEvent.objects.filter(trial=trial).count() == 2


def test_filing_on_a_pack_with_its_own_events_writes_none(failed, triager):
    trial = failed[1]
    before = trial.events.count()
    _file(trial, triager)
    assert trial.events.count() == before
