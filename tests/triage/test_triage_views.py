"""QC pages: triage queue with assignment and progress, scenarios from a manifest, blockers board."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.builders import REFERENCE, import_path, make_user
from trials.models import Document
from trials.models.qc import AuditEntry, FailureMode, QCItem, QCScenario, TriageAssignment
from trials.triage import scenario_manifests, services
from trials.triage.forms import FeedbackForm

pytestmark = pytest.mark.django_db


def _file(user, trial, **data) -> QCItem:
    base = {"kind": "release-blocker", "category": "runtime", "severity": "P1", "evidence_refs": [f"trial:{trial.key}"]}
    form = FeedbackForm(data=base | data, trial=trial, user=user)
    assert form.is_valid(), form.errors
    return services.file_item(user, trial, form.cleaned_data)


def test_the_queue_is_one_table_of_untriaged_failed_trials(client, failed, triager):
    client.force_login(triager)
    _file(triager, failed[0])
    page = client.get("/triage/")
    assert page.status_code == 200
    assert {t.pk for t in page.context["page"]} == {t.pk for t in failed[1:]}
    assert page.context["total"] == len(failed) - 1
    html = page.content.decode()
    assert html.count('id="queue-table"') == 1 and html.count('<form method="post" action="/triage/assign/"') == 1
    for trial in page.context["page"]:
        assert trial.category in ("runtime", "tool", "verifier", "environment", "model", "gui-projection")
        assert trial.reasons[0].startswith(trial.status)


def test_assigning_trials_shows_progress_per_assignee(client, failed, triager):
    lead = make_user("lead", "approver")
    client.force_login(lead)
    response = client.post("/triage/assign/", {"trials": [failed[1].pk, failed[2].pk], "assignee": triager.pk})
    assert response.status_code == 302
    assert TriageAssignment.objects.filter(assignee=triager).count() == 2
    assert AuditEntry.objects.filter(action="assigned", actor=lead).count() == 2
    _file(triager, failed[1])
    page = client.get("/triage/")
    assert page.context["progress"] == [{"assignee": "tina", "done": 1, "remaining": 1, "total": 2}]
    assert "tina" in page.content.decode()


def test_a_reviewer_comments_and_the_comment_is_in_the_history(client, failed):
    reviewer = make_user("rita", "reviewer")
    client.force_login(reviewer)
    response = client.post(f"/trials/{failed[0].pk}/comments/", {"text": "step 3 looks stuck", "step_id": "3"})
    assert response.status_code == 302
    entry = AuditEntry.objects.get(action="commented")
    assert entry.actor == reviewer and entry.trial == failed[0]
    assert failed[0].qc_comments.get().text == "step 3 looks stuck"


def test_the_reference_manifest_seeds_14_scenarios_with_their_failure_modes(client, triager):
    import_path(REFERENCE / "lime-app" / "agent-qc-scenarios.manifest.json")
    document = Document.objects.get(kind=scenario_manifests.MANIFEST_KIND)
    client.force_login(triager)
    assert "Import scenarios" in client.get("/qc/scenarios/").content.decode()
    assert client.post("/qc/scenarios/import/", {"document": document.pk}).status_code == 302
    assert QCScenario.objects.count() == 14
    tool = QCScenario.objects.get(scenario_id="tool-approval-sandbox-boundary")
    assert (tool.risk, tool.source, tool.executor) == ("P0", "manifest", "runtime_harness")
    assert list(tool.failure_modes.values_list("name", flat=True)) == [
        "approval bypass",
        "tool result missing",
        "timeout without recovery",
        "unsafe tool exposed",
    ]
    assert tool.failure_modes.get(name="tool result missing").code == "tool-result-missing"
    # Importing again adds nothing.
    client.post("/qc/scenarios/import/", {"document": document.pk})
    assert QCScenario.objects.count() == 14 and FailureMode.objects.filter(scenario=tool).count() == 4


def test_the_scenario_page_shows_modes_the_trials_that_hit_them_and_counts(client, failed, triager):
    import_path(REFERENCE / "lime-app" / "agent-qc-scenarios.manifest.json")
    scenario_manifests.import_manifest(triager, Document.objects.get(kind=scenario_manifests.MANIFEST_KIND))
    mode = FailureMode.objects.get(scenario__scenario_id="tool-approval-sandbox-boundary", name="tool result missing")
    _file(triager, failed[0], kind="failure-mode", failure_mode=mode.pk, severity="P0")
    _file(triager, failed[1], kind="failure-mode", failure_mode=mode.pk, severity="P1")
    client.force_login(make_user("vera", "viewer"))
    page = client.get(mode.scenario.get_absolute_url())
    scenario = page.context["scenario"]
    assert (scenario.p0_open, scenario.p1_open, scenario.trials_hit) == (1, 1, 2)
    row = next(r for r in page.context["modes"] if r["mode"] == mode)
    assert row["status"] == "open" and {i.trial for i in row["items"]} == set(failed[:2])
    assert failed[0].name in page.content.decode()
    listing = client.get("/qc/scenarios/")
    assert listing.context["page"][0].scenario_id == "tool-approval-sandbox-boundary"  # open P0 first


def test_the_blockers_board_puts_open_p0s_first_and_lists_expiring_waivers(client, failed, triager):
    approver = make_user("abe", "approver")
    p2 = _file(triager, failed[0], severity="P2")
    p0 = _file(triager, failed[1], severity="P0")
    done = _file(triager, failed[2], severity="P0")
    services.update_item(triager, done, {"status": QCItem.Status.RESOLVED})
    expires = (timezone.now() + timedelta(days=2)).isoformat()
    waiver = _file(
        approver,
        failed[0],
        kind="waiver",
        waived_item=p2.pk,
        approver=approver.pk,
        reason="known",
        scope="beta",
        expires_at=expires,
    )
    client.force_login(make_user("vera", "viewer"))
    page = client.get("/qc/blockers/")
    assert [i.pk for i in page.context["open_items"]] == [p0.pk, p2.pk]
    assert [i.pk for i in page.context["closed_items"]] == [done.pk]
    assert [w.pk for w in page.context["expiring"]] == [waiver.pk]
    item_rows = [row for row in page.content.decode().split("<tr") if "data-item" in row]
    rows = {row.split('data-item="')[1].split('"')[0]: row for row in item_rows}
    assert f'waived</span> by <a href="{waiver.get_absolute_url()}">{waiver.label}</a>' in rows[str(p2.pk)]
    assert "waived" not in rows[str(p0.pk)]
    assert client.get("/qc/waivers/").status_code == 200
    home = client.get("/qc/")
    assert home.context["verdict"]["status"] == "blocked"
    assert 'href="/api/qc/export/?download=1"' in home.content.decode()


def test_an_item_edit_is_recorded_with_old_and_new_values(client, failed, triager):
    item = _file(triager, failed[0])
    client.force_login(triager)
    response = client.post(item.get_absolute_url(), {"status": "resolved", "severity": "P0", "note": "fixed in #12"})
    assert response.status_code == 302
    entry = item.history.get(action="edited")
    assert entry.changes == {"status": ["open", "resolved"], "severity": ["P1", "P0"], "note": ["", "fixed in #12"]}
    page = client.get(item.get_absolute_url()).content.decode()
    assert "fixed in #12" in page and "resolved" in page


def test_only_an_approver_edits_a_waiver(client, failed, triager):
    approver = make_user("abe", "approver")
    blocker = _file(triager, failed[0])
    expires = (timezone.now() + timedelta(days=2)).isoformat()
    waiver = _file(
        approver,
        failed[0],
        kind="waiver",
        waived_item=blocker.pk,
        approver=approver.pk,
        reason="known",
        scope="beta",
        expires_at=expires,
    )
    client.force_login(triager)
    assert client.post(waiver.get_absolute_url(), {"status": "revoked"}).status_code == 403
    client.force_login(approver)
    data = {
        "status": "revoked",
        "severity": waiver.severity,
        "reason": "known",
        "scope": "beta",
        "expires_at": (timezone.now() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"),
    }
    assert client.post(waiver.get_absolute_url(), data).status_code == 302
    waiver.refresh_from_db()
    assert waiver.status == "revoked" and list(blocker.waivers.active_waivers()) == []


def test_the_history_shows_a_list_of_evidence_refs_as_text_not_python(client, failed, triager):
    item = _file(triager, failed[0])
    client.force_login(triager)
    html = client.get(item.get_absolute_url()).content.decode()
    history = html[html.index('id="history"') :]
    assert f"<ins>trial:{failed[0].key}</ins>" in history and "[&#x27;" not in history
