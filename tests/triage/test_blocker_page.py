"""A release blocker's page: its evidence refs link to their steps, an approver grants a waiver from it,
and the triage forms mark their required fields before a submit."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.builders import good_steps, import_path, make_user, write_trial
from trials.models import Trial
from trials.models.qc import AuditEntry, QCItem
from trials.triage import services
from trials.triage.forms import FeedbackForm

pytestmark = pytest.mark.django_db


def file(user, trial: Trial, **data) -> QCItem:
    form = FeedbackForm(data=data, trial=trial, user=user)
    assert form.is_valid(), form.errors
    return services.file_item(user, trial, form.cleaned_data)


@pytest.fixture
def blocker(tmp_path) -> QCItem:
    steps = [*good_steps(), {"step_id": 3, "source": "agent", "message": "done"}]
    steps[2]["tool_calls"] = [{"tool_call_id": "call_8", "function_name": "bash", "arguments": {"cmd": "rm -rf x"}}]
    import_path(write_trial(tmp_path, steps=steps))
    trial = Trial.objects.get()
    triager = make_user("tina", "triager")
    return file(
        triager,
        trial,
        kind="release-blocker",
        category="runtime",
        severity="P0",
        step_id="3",
        evidence_refs=["step:2", "tool_call:call_8", "trial:" + trial.key, "tool_call:c1"],
    )


def test_evidence_refs_link_to_their_steps_on_the_trial_page(client, blocker):
    client.force_login(make_user("vic", "viewer"))
    html = client.get(blocker.get_absolute_url()).content.decode()
    links = re.findall(r'<a class="evidence-link" href="([^"]+)"><code>([^<]+)</code></a>', html)
    trial = blocker.trial
    assert links == [
        (f"/trials/{trial.pk}/steps/2/", "2"),
        (f"/trials/{trial.pk}/steps/3/", "call_8"),  # the step that made the call
        (f"/trials/{trial.pk}/", trial.key),
        (f"/trials/{trial.pk}/steps/2/", "c1"),
    ]
    assert f'<a href="/trials/{trial.pk}/steps/3/">step 3</a>' in html  # the item's own step
    assert client.get(f"/trials/{trial.pk}/steps/3/").status_code == 200


def test_a_ref_to_something_the_trial_does_not_have_stays_plain_text(client, blocker):
    QCItem.objects.filter(pk=blocker.pk).update(evidence_refs=[{"kind": "step", "ref": "99"}])
    client.force_login(make_user("vic", "viewer"))
    html = client.get(blocker.get_absolute_url()).content.decode()
    assert "<code>99</code>" in html and 'class="evidence-link"' not in html


def waiver_data(days: int = 30) -> dict:
    expires = (timezone.now() + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M")
    return {"expires_at": expires, "scope": "beta release", "reason": "known flake, fix in 2.1"}


def test_an_approver_grants_a_waiver_from_the_blocker_page(client, blocker):
    approver = make_user("ann", "approver")
    client.force_login(approver)
    page = client.get(blocker.get_absolute_url()).content.decode()
    assert 'id="waive-form"' in page
    response = client.post(reverse("qc-item-waive", args=[blocker.pk]), waiver_data())
    assert response.status_code == 302 and response["Location"] == blocker.get_absolute_url()
    waiver = QCItem.objects.get(kind=QCItem.Kind.WAIVER)
    assert waiver.waived_item == blocker and waiver.approver == approver and waiver.trial == blocker.trial
    assert (waiver.scope, waiver.reason, waiver.severity) == ("beta release", "known flake, fix in 2.1", "P0")
    assert AuditEntry.objects.filter(item=waiver, action="filed", actor=approver).count() == 1
    assert not QCItem.objects.filter(pk=blocker.pk).unwaived().exists()
    page = client.get(blocker.get_absolute_url()).content.decode()
    assert waiver.get_absolute_url() in page


def test_a_triager_may_not_grant_a_waiver_nor_sees_the_form(client, blocker):
    client.force_login(make_user("tom", "triager"))
    assert 'id="waive-form"' not in client.get(blocker.get_absolute_url()).content.decode()
    assert client.post(reverse("qc-item-waive", args=[blocker.pk]), waiver_data()).status_code == 403
    assert not QCItem.objects.filter(kind=QCItem.Kind.WAIVER).exists()


def test_a_waiver_without_expiry_or_with_a_past_one_is_refused_with_the_field_named(client, blocker):
    client.force_login(make_user("ann", "approver"))
    url = reverse("qc-item-waive", args=[blocker.pk])
    missing = client.post(url, waiver_data() | {"expires_at": ""})
    assert missing.status_code == 400 and "This field is required." in missing.content.decode()
    past = client.post(url, waiver_data(days=-1))
    assert past.status_code == 400 and "The expiry must be in the future." in past.content.decode()
    assert "known flake, fix in 2.1</textarea>" in past.content.decode()  # what was typed is kept
    assert not QCItem.objects.filter(kind=QCItem.Kind.WAIVER).exists()


def test_the_waiver_form_marks_its_fields_required_before_a_submit(client, blocker):
    client.force_login(make_user("ann", "approver"))
    html = client.get(blocker.get_absolute_url()).content.decode()
    form = html[html.index('id="waive-form"') : html.index("</form>", html.index('id="waive-form"'))]
    for name in ("expires_at", "scope", "reason"):
        field = re.search(rf'<(input|textarea)[^>]*name="{name}"[^>]*>', form).group(0)
        assert " required" in field, name
        label = form[form.index(f'id="field-{name}"') :][:400]
        assert 'class="required-mark"' in label, name


def test_the_feedback_form_marks_fields_required_for_a_waiver_before_a_submit(client, blocker):
    client.force_login(make_user("ann", "approver"))
    html = client.get(reverse("triage-feedback", args=[blocker.trial.pk])).content.decode()
    for name in ("expires_at", "approver", "reason", "scope", "waived_item"):
        start = html.index(f'id="field-{name}"')
        assert 'data-required-for="waiver"' in html[start - 200 : start + 100], name
        assert 'title="required for: waiver">*</abbr>' in html[start : start + 600], name
    target = html.index('id="field-target_name"')
    assert 'data-required-for="replay-fixture verifier-criterion"' in html[target - 200 : target + 100]
