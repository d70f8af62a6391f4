"""A runner writes only into the live trials its own account started, unless an admin granted it more."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from tests.builders import make_user
from tests.live.helpers import event, runner_client, spine
from trials.models import Trial

pytestmark = pytest.mark.django_db

START = "/api/commands/start_benchmark_trial/"
REWARD = "/api/commands/record_benchmark_reward/"
COMPLETE = "/api/commands/complete_benchmark_trial/"


@pytest.fixture
def started():
    """(the starting runner's client, the trial it started)."""
    owner = runner_client(name="runner-a")[0]
    answer = owner.post(START, spine("trial-owned"), format="json")
    assert answer.status_code == 201
    return owner, Trial.objects.get(pk=answer.json()["trial_id"])


def test_the_trial_remembers_the_account_that_started_it(started):
    _, trial = started
    assert trial.started_by.username == "runner-a"


def test_another_runner_may_not_post_events_or_overwrite_the_reward_of_a_trial_it_did_not_start(started):
    _, trial = started
    other = runner_client(name="runner-b")[0]
    posted = other.post(f"/api/trials/{trial.pk}/events/", {"events": [event(1)]}, format="json")
    assert posted.status_code == 403 and "another account" in posted.json()["detail"]
    for body in ({"trial_id": trial.pk, "reward": 0}, {"benchmark": {"trialId": "trial-owned"}, "reward": 0}):
        assert other.post(REWARD, body, format="json").status_code == 403
    assert other.post(COMPLETE, {"trial_id": trial.pk, "status": "failed"}, format="json").status_code == 403
    assert other.post(START, spine("trial-owned"), format="json").status_code == 403  # nor find it again
    trial.refresh_from_db()
    assert (trial.reward, trial.status, trial.events.filter(type="tool.progress").count()) == (None, "running", 0)


def test_the_runner_that_started_it_writes_into_it(started):
    owner, trial = started
    assert owner.post(f"/api/trials/{trial.pk}/events/", {"events": [event(1)]}, format="json").status_code == 200
    assert owner.post(START, spine("trial-owned"), format="json").status_code == 200
    assert owner.post(COMPLETE, {"trial_id": trial.pk, "status": "completed"}, format="json").status_code == 200


def test_a_runner_an_admin_granted_write_any_live_trial_writes_into_any(started):
    _, trial = started
    lead = runner_client(name="runner-lead")[0]
    user = get_user_model().objects.get(username="runner-lead")
    user.user_permissions.add(Permission.objects.get(codename="write_any_live_trial"))
    assert lead.post(REWARD, {"trial_id": trial.pk, "reward": 0.5}, format="json").status_code == 200
    trial.refresh_from_db()
    assert trial.reward == 0.5


def test_an_imported_trial_takes_live_writes_only_from_a_superuser(started, client):
    _, trial = started
    Trial.objects.filter(pk=trial.pk).update(started_by=None)  # as an imported trial: no runner started it
    owner_again = runner_client(name="runner-c")[0]
    assert owner_again.post(COMPLETE, {"trial_id": trial.pk, "status": "failed"}, format="json").status_code == 403
    admin = make_user("root")
    admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    answer = client.post(COMPLETE, {"trial_id": trial.pk, "status": "failed"}, content_type="application/json")
    assert answer.status_code == 200
