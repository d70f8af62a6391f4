"""Triage API: filing feedback (201 / 403 / 400) and reading scenarios, blockers and waivers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.builders import import_demo, make_user
from trials.models.qc import QCItem

pytestmark = pytest.mark.django_db


@pytest.fixture
def trial(tmp_path):
    return import_demo(tmp_path)[0]


def _step_ref(trial) -> str:
    return f"step:{trial.steps.order_by('index').first().step_id}"


def _post(client, trial, **data):
    body = {"kind": "release-blocker", "category": "runtime", "severity": "P0", "evidence_refs": [_step_ref(trial)]}
    return client.post(f"/api/trials/{trial.pk}/feedback/", body | data, content_type="application/json")


def test_a_triager_files_a_qc_item_and_gets_201(client, trial):
    client.force_login(make_user("tina", "triager"))
    response = _post(client, trial, code="stream-stuck", note="stuck after step 3")
    assert response.status_code == 201, response.content
    body = response.json()
    item = QCItem.objects.get()
    assert body["id"] == item.label and body["kind"] == "release-blocker" and body["severity"] == "P0"
    assert body["evidence_refs"] == [{"kind": "step", "ref": _step_ref(trial).split(":", 1)[1]}]
    assert item.created_by.username == "tina"


def test_evidence_refs_may_be_objects(client, trial):
    client.force_login(make_user("tina", "triager"))
    kind, ref = _step_ref(trial).split(":", 1)
    assert _post(client, trial, evidence_refs=[{"kind": kind, "ref": ref}]).status_code == 201


def test_a_viewer_and_a_reviewer_get_403_and_anonymous_is_refused(client, trial):
    assert _post(client, trial).status_code in (401, 403)
    for name, group in (("vera", "viewer"), ("rita", "reviewer")):
        client.force_login(make_user(name, group))
        assert _post(client, trial).status_code == 403
    assert not QCItem.objects.exists()


def test_a_value_of_the_wrong_json_type_is_a_400_not_a_500(client, trial):
    client.force_login(make_user("tina", "triager"))
    for expires_at in (1, ["2030-01-01"], {"at": "2030-01-01"}):
        response = _post(client, trial, expires_at=expires_at)
        assert response.status_code == 400 and "expires_at" in response.json(), expires_at
    response = _post(client, trial, note=["x"])  # not stored as the text '["x"]'
    assert response.status_code == 400 and list(response.json()) == ["note"]
    assert not QCItem.objects.exists()


def test_bad_input_gives_400_with_field_errors(client, trial):
    client.force_login(make_user("tina", "triager"))
    response = _post(client, trial, kind="verifier-criterion", severity="P9", evidence_refs=["step:nope"])
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) >= {"severity", "evidence_refs", "target_name"}
    assert errors["target_name"][0]["message"] == "Name the verifier criterion to add."
    for refs in (5, {"kind": "step"}, None, [[1]]):  # not a list of refs: a 400, never a 500
        response = _post(client, trial, evidence_refs=refs)
        assert response.status_code == 400 and "evidence_refs" in response.json(), refs


def test_only_an_approver_files_a_waiver_through_the_api(client, trial):
    triager, approver = make_user("tina", "triager"), make_user("abe", "approver")
    client.force_login(triager)
    blocker = _post(client, trial).json()
    waiver = {
        "kind": "waiver",
        "waived_item": blocker["pk"],
        "approver": approver.pk,
        "reason": "accepted for the beta",
        "scope": "beta channel",
        "expires_at": (timezone.now() + timedelta(days=3)).isoformat(),
    }
    assert _post(client, trial, **waiver).status_code == 403
    client.force_login(approver)
    response = _post(client, trial, **waiver)
    assert response.status_code == 201, response.content
    assert response.json()["approver"] == "abe"
    [listed] = client.get("/api/qc/blockers/").json()["results"]
    assert listed["waived_by"] == [response.json()["id"]] and listed["effective_status"] == "open"
    as_written_back = {**waiver, "waived_item": blocker["id"], "approver": "abe"}  # "QC-1", the user name
    response = _post(client, trial, **as_written_back)
    assert response.status_code == 201, response.content
    assert response.json()["waived_item"] == blocker["id"]


def test_list_and_detail_endpoints_for_scenarios_blockers_waivers(client, trial):
    client.force_login(make_user("tina", "triager"))
    blocker = _post(client, trial).json()
    mode = _post(
        client, trial, kind="failure-mode", severity="P1", new_failure_mode="stream stuck", new_scenario_id="stream"
    ).json()
    client.force_login(make_user("vera", "viewer"))
    scenarios = client.get("/api/qc/scenarios/").json()["results"]
    assert [(s["scenario_id"], s["p1_open"]) for s in scenarios] == [("stream", 1)]
    detail = client.get(f"/api/qc/scenarios/{scenarios[0]['id']}/").json()
    assert detail["failure_modes"] == [
        {"name": "stream stuck", "category": "runtime", "code": "", "trials": [trial.pk]}
    ]
    assert [b["id"] for b in client.get("/api/qc/blockers/").json()["results"]] == [blocker["id"]]
    one = client.get(f"/api/qc/blockers/{blocker['pk']}/").json()
    assert one["history"][0]["action"] == "filed" and one["history"][0]["actor"] == "tina"
    assert client.get(f"/api/qc/blockers/{mode['pk']}/").status_code == 404  # not a blocker
    assert client.get("/api/qc/waivers/").json()["results"] == []
    assert client.get(f"/api/qc/items/?trial={trial.pk}").json()["count"] == 2
