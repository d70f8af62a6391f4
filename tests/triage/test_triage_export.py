"""QC evidence export: schema-valid Lime evidence pack; a waiver is never a pass; P0 counts."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from jsonschema import Draft202012Validator

from comparisons.computing.cache import fingerprint
from comparisons.computing.computation import compute
from comparisons.statistics.sides import Side
from tests.builders import REFERENCE, make_user
from tests.factories import TrialFactory
from trials.models.qc import QCItem
from trials.triage import queries, scenario_manifests, services
from trials.triage.export import build_evidence
from trials.triage.forms import FeedbackForm

pytestmark = pytest.mark.django_db
SCHEMA_PATH = REFERENCE / "lime-app" / "agent-qc-evidence.schema.json"  # (read by the test: a missing one fails it)


def _validate(data: dict) -> None:
    validator = Draft202012Validator(
        json.loads(SCHEMA_PATH.read_text()), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(data), key=str)
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


@pytest.fixture
def people(db):
    return make_user("tina", "triager"), make_user("abe", "approver")


def _file(user, trial, **data) -> QCItem:
    base = {"kind": "release-blocker", "category": "runtime", "severity": "P0", "evidence_refs": [f"trial:{trial.key}"]}
    form = FeedbackForm(data=base | data, trial=trial, user=user)
    assert form.is_valid(), form.errors
    return services.file_item(user, trial, form.cleaned_data)


def _waive(approver, item, expires_in=timedelta(days=5)) -> QCItem:
    expires = (timezone.now() + timedelta(days=5)).isoformat()
    waiver = _file(
        approver,
        item.trial,
        kind="waiver",
        waived_item=item.pk,
        approver=approver.pk,
        reason="known issue",
        scope="beta",
        expires_at=expires,
    )
    if expires_in != timedelta(days=5):
        QCItem.objects.filter(pk=waiver.pk).update(expires_at=timezone.now() + expires_in)
    return waiver


def test_an_empty_export_validates_and_needs_review(client, people):
    client.force_login(people[0])
    response = client.get("/api/qc/export/?download=1")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="agent-qc-evidence.json"'
    data = response.json()
    _validate(data)
    assert data["verdict"]["status"] == "needs-human-review"


def test_the_export_has_failure_modes_blockers_and_validates(client, people):
    triager, _ = people
    trial = TrialFactory(reward=0.0, name="t-1")
    _file(triager, trial, kind="failure-mode", new_failure_mode="stream stuck", new_scenario_id="stream", severity="P1")
    blocker = _file(triager, trial, note="release must wait")
    client.force_login(triager)
    data = client.get("/api/qc/export/?repo=lime&ref=v1.4").json()
    _validate(data)
    assert data["subject"]["repo"] == "lime" and data["subject"]["ref"] == "v1.4"
    results = {r["scenarioId"]: r for r in data["scenarioResults"]}
    assert results["stream"]["failureModes"] == ["stream stuck"] and results["stream"]["status"] == "fail"
    assert results["stream"]["attempts"] == 1
    assert f"trial:{trial.key}" in results["stream"]["evidenceRefs"]
    assert results[f"task:{trial.task.name}"]["status"] == "blocked"
    assert data["verdict"]["status"] == "blocked"
    assert data["verdict"]["blockers"][0].startswith(f"{blocker.label} P0 runtime in trial t-1: release must wait")


def test_a_waiver_turns_blocked_into_waived_never_pass_and_an_expired_one_counts_for_nothing(people):
    triager, approver = people
    trial = TrialFactory(reward=0.0)
    blocker = _file(triager, trial)
    assert queries.p0_qc_items_for_trials([trial.pk]) == 1
    waiver = _waive(approver, blocker)
    data = build_evidence()
    _validate(data)
    assert data["verdict"]["status"] == "waived"
    assert data["verdict"]["waivers"] == [
        {
            "id": waiver.label,
            "reason": f"known issue (scope: beta; waives {blocker.label})",
            "owner": "abe",
            "expiresAt": waiver.expires_at.isoformat().replace("+00:00", "Z"),
        }
    ]
    assert queries.p0_qc_items_for_trials([trial.pk]) == 0
    QCItem.objects.filter(pk=waiver.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    data = build_evidence()
    _validate(data)
    assert data["verdict"]["status"] == "blocked" and data["verdict"]["waivers"] == []
    assert queries.p0_qc_items_for_trials([trial.pk]) == 1


def test_resolving_everything_passes_and_p0_counts_only_open_items(people):
    triager, _ = people
    trial, other = TrialFactory(reward=0.0), TrialFactory(reward=0.0)
    blocker = _file(triager, trial)
    _file(triager, trial, kind="replay-fixture", target_name="stream-stuck-replay", severity="P0")
    _file(triager, other, severity="P0")
    _file(triager, trial, severity="P2")
    assert queries.p0_qc_items_for_trials([trial.pk]) == 2
    assert queries.p0_qc_items_for_trials([trial.pk, other.pk]) == 3
    for item in QCItem.objects.all():
        services.update_item(triager, item, {"status": QCItem.Status.RESOLVED})
    assert queries.p0_qc_items_for_trials([trial.pk, other.pk]) == 0
    data = build_evidence()
    _validate(data)
    assert data["verdict"]["status"] == "pass"
    assert blocker.history.filter(action="edited", changes__status=["open", "resolved"]).exists()


def test_imported_manifest_scenarios_appear_as_skipped_until_something_is_filed(people, tmp_path):
    from tests.builders import import_path
    from trials.models import Document

    import_path(REFERENCE / "lime-app" / "agent-qc-scenarios.manifest.json")
    scenario_manifests.import_manifest(people[0], Document.objects.get(kind=scenario_manifests.MANIFEST_KIND))
    data = build_evidence()
    _validate(data)
    assert len(data["scenarioResults"]) == 14
    assert {r["status"] for r in data["scenarioResults"]} == {"skipped"}


def test_p0_items_filed_against_candidate_trials_count_in_the_comparison(people):
    from tests.factories import ConfigurationFactory, TaskFactory

    triager, approver = people
    base_conf, cand_conf = ConfigurationFactory(role="baseline"), ConfigurationFactory(role="candidate")
    tasks = [TaskFactory() for _ in range(3)]
    for task in tasks:
        TrialFactory(configuration=base_conf, task=task, reward=1.0)
    candidates = [TrialFactory(configuration=cand_conf, task=task, reward=1.0) for task in tasks]
    baseline, candidate = Side("configuration", base_conf.pk), Side("configuration", cand_conf.pk)
    before = fingerprint(baseline, candidate)
    blocker = _file(triager, candidates[0], severity="P0")
    _file(triager, candidates[1], severity="P1")
    assert fingerprint(baseline, candidate) != before  # the cached comparison is stale
    result, _ = compute(baseline, candidate, resamples=200)
    assert result["comparison"]["p0QcGateRegressionCount"] == 1
    _waive(approver, blocker)
    result, _ = compute(baseline, candidate, resamples=200)
    assert result["comparison"]["p0QcGateRegressionCount"] == 0
