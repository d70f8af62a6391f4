"""Share links: made by a reviewer, opened by someone without an account, revoked, expired, off."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from shares.models import Share, ShareView
from tests.builders import build_side, demo_jobs, import_trial_dir, make_user, set_pass_reward_in_admin, write_trial
from trials.demo import SECRET
from trials.models import Configuration, QCItem, Trial

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(tmp_path):
    call_command("import_packs", str(demo_jobs(tmp_path)), "--no-progress")
    return Trial.objects.filter(context_records__redaction_state="masked").first()


@pytest.fixture
def reviewer_client(client, user):
    client.force_login(user)
    return client


def share(client, body: dict, status: int = 201) -> dict:
    response = client.post("/api/shares/", body, content_type="application/json")
    assert response.status_code == status, response.content
    return response.json()


def body_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_shared_trial_opens_without_an_account_with_its_steps_and_no_secret(reviewer_client, demo):
    made = share(reviewer_client, {"trial": demo.pk})
    assert set(made) == {"id", "url", "expires_at"}
    path = made["url"].removeprefix("http://testserver")
    visitor = Client()
    page = visitor.get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert demo.name in html and 'id="step-1"' in html
    assert f'data-url="{path}steps/1/"' in html  # step permalinks stay inside the share
    assert SECRET not in html
    step = visitor.get(f"{path}steps/2/")
    assert step.status_code == 200 and 'class="step' in step.content.decode()
    assert SECRET not in step.content.decode()
    # no link out of the share: every href is the share itself, an anchor, or its report
    for href in [part.split('"')[0] for part in html.split('href="')[1:]]:
        assert href.startswith(path) or href.startswith("#") or href.startswith("/static/"), href
    assert ShareView.objects.filter(share_id=made["id"]).count() == 2
    assert len(ShareView.objects.first().address_hash) == 64
    assert "127.0.0.1" not in ShareView.objects.first().address_hash


def test_the_report_of_a_shared_trial_holds_its_steps_styles_and_no_secret(reviewer_client, demo):
    path = share(reviewer_client, {"trial": demo.pk})["url"].removeprefix("http://testserver")
    report = Client().get(path, {"download": "html"})
    assert report.status_code == 200
    assert report["Content-Disposition"].startswith("attachment;")
    html = report.content.decode()
    assert SECRET not in html
    assert "<style>" in html and "Plotly" in html  # styles and plotly.js inlined
    assert 'src="' not in html.replace('src="data:', "") and "<link" not in html  # nothing fetched
    assert html.count('class="step ') == demo.trajectories.order_by("position").first().step_count


def test_a_trial_report_holds_the_first_thousand_steps_and_says_how_many_it_leaves_out(reviewer_client, tmp_path):
    from tests.builders import long_trajectory

    trial = long_trajectory(tmp_path, 1_030)
    report = reviewer_client.get("/shares/report/", {"trial": trial.pk})
    assert report.status_code == 200
    html = report.content.decode()
    assert html.count('class="step ') == 1_000
    assert 'id="step-1000"' in html and 'id="step-1001"' not in html
    assert "leaves out the last 30 steps" in html


def test_a_shared_comparison_shows_its_decision_intervals_table_and_charts(reviewer_client):
    tasks = {f"t{i}": [1.0] for i in range(12)}
    base = build_side("base", tasks, role="baseline")
    cand = build_side("cand", {**tasks, "t0": [0.0]}, role="candidate", dataset=base.trials.first().dataset)
    made = share(reviewer_client, {"comparison": {"baseline": base.pk, "candidate": cand.pk}})
    path = made["url"].removeprefix("http://testserver")
    page = Client().get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="decision"' in html and "CI95" in html and 'id="matrix"' in html
    assert html.count('<tr class="outcome-') == 12
    assert 'id="figure-heatmap"' in html and 'type="application/json"' in html
    report = Client().get(path, {"download": "html"}).content.decode()
    assert 'id="figure-heatmap"' in report and 'id="decision"' in report


def test_a_shared_grid_and_a_shared_qc_item_open_for_a_visitor(reviewer_client, demo, triager):
    confs = list(Configuration.objects.order_by("pk").values_list("pk", flat=True))
    grid = share(reviewer_client, {"comparison": {"sides": confs, "reference": confs[0]}})
    page = Client().get(grid["url"].removeprefix("http://testserver"))
    assert page.status_code == 200 and 'id="figure-grid"' in page.content.decode()

    item = QCItem.objects.create(
        trial=demo, kind="failure-mode", category="tool", step_id="2", note="denied, then wrote", created_by=triager
    )
    made = share(reviewer_client, {"qc_item": item.pk})
    html = Client().get(made["url"].removeprefix("http://testserver")).content.decode()
    assert item.label in html and demo.name in html and SECRET not in html


def test_revoking_a_share_closes_it_at_once_and_the_history_says_who(reviewer_client, demo, user):
    made = share(reviewer_client, {"trial": demo.pk})
    path = made["url"].removeprefix("http://testserver")
    assert Client().get(path).status_code == 200
    assert reviewer_client.delete(f"/api/shares/{made['id']}/").status_code == 204
    assert Client().get(path).status_code == 404
    listed = reviewer_client.get("/api/shares/").json()["results"][0]
    assert listed["state"] == "revoked" and listed["views"] == 1
    assert [(h["action"], h["actor"]) for h in listed["history"]] == [
        ("created", user.username),
        ("revoked", user.username),
    ]


def test_an_expired_share_answers_410(reviewer_client, demo):
    made = share(reviewer_client, {"trial": demo.pk})
    Share.objects.filter(pk=made["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(made["url"].removeprefix("http://testserver")).status_code == 410


def test_bad_input_answers_400_or_404_naming_what_is_wrong(reviewer_client, demo):
    too_late = (timezone.now() + timedelta(days=91)).isoformat()
    answer = share(reviewer_client, {"trial": demo.pk, "expires_at": too_late}, status=400)
    assert "expires_at" in answer and "90 days" in answer["expires_at"][0]
    share(reviewer_client, {"trial": 999_999}, status=404)
    share(reviewer_client, {"qc_item": 999_999}, status=404)
    share(reviewer_client, {"comparison": {"baseline": 999_999, "candidate": 1}}, status=404)
    share(reviewer_client, {}, status=400)
    assert Client().get("/s/never-issued-token-aaaaaaaaaaaaaaaaaaaaaaaaaa/").status_code == 404
    assert Share.objects.count() == 0


def test_a_viewer_may_not_share_and_a_visitor_may_not_list(client, demo):
    client.force_login(make_user("vic", "viewer"))
    assert client.post("/api/shares/", {"trial": demo.pk}, content_type="application/json").status_code == 403
    assert client.get("/api/shares/").status_code == 403
    assert Client().get("/api/shares/").status_code == 401


def test_a_user_lists_their_own_shares_and_an_administrator_all(reviewer_client, demo, triager, django_user_model):
    share(reviewer_client, {"trial": demo.pk})
    other = Client()
    other.force_login(triager)
    share(other, {"trial": demo.pk})
    assert reviewer_client.get("/api/shares/").json()["count"] == 1
    assert other.delete(f"/api/shares/{Share.objects.get(created_by__username='reviewer').pk}/").status_code == 404
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser("root", password="pw-root-1"))
    assert admin.get("/api/shares/").json()["count"] == 2


def test_the_off_switch_closes_new_and_existing_shares(reviewer_client, demo, settings):
    made = share(reviewer_client, {"trial": demo.pk})
    settings.SHARING_ENABLED = False
    assert Client().get(made["url"].removeprefix("http://testserver")).status_code == 404
    assert reviewer_client.post("/api/shares/", {"trial": demo.pk}, content_type="application/json").status_code == 404
    settings.SHARING_ENABLED = True
    assert Client().get(made["url"].removeprefix("http://testserver")).status_code == 200


def test_the_off_switch_hides_every_share_control_and_refuses_the_report(reviewer_client, demo, settings):
    page = f"/trials/{demo.pk}/"
    assert 'id="share-button"' in reviewer_client.get(page).content.decode()
    settings.SHARING_ENABLED = False
    html = reviewer_client.get(page).content.decode()
    assert 'id="share-button"' not in html and 'id="download-report"' not in html
    assert reviewer_client.get(f"/shares/report/?trial={demo.pk}").status_code == 404


def test_the_share_button_is_on_the_trial_comparison_grid_and_qc_item_pages(reviewer_client, demo, triager):
    item = QCItem.objects.create(trial=demo, kind="failure-mode", category="tool", created_by=triager)
    confs = list(Configuration.objects.order_by("pk").values_list("pk", flat=True))
    pages = [
        f"/trials/{demo.pk}/",
        f"/comparisons/?baseline={confs[0]}&candidate={confs[1]}",
        f"/comparisons/grid/?side={confs[0]}&side={confs[1]}",
        item.get_absolute_url(),
    ]
    for url in pages:
        html = reviewer_client.get(url).content.decode()
        assert 'id="share-button"' in html and 'id="download-report"' in html, url
    viewer = Client()
    viewer.force_login(make_user("vic", "viewer"))
    assert 'id="share-button"' not in viewer.get(pages[0]).content.decode()


def test_a_visitor_reads_a_shared_steps_whole_text_and_nothing_of_another_trial(reviewer_client, tmp_path):
    long = "checked every file; " * 400  # (past the 4,000 characters a step shows before "show all")
    steps = [{"step_id": 1, "source": "user", "message": "go"}, {"step_id": 2, "source": "agent", "message": long}]
    trial = import_trial_dir(write_trial(tmp_path, steps=steps))
    other = import_trial_dir(write_trial(tmp_path, "task-b__BBBBBBB"))
    path = share(reviewer_client, {"trial": trial.pk})["url"].removeprefix("http://testserver")
    visitor = Client()
    html = visitor.get(path).content.decode()
    assert f'data-step-api="{path}api/steps/"' in html and "show all (8000 characters)" in html
    full = visitor.get(f"{path}api/steps/2/")
    assert full.status_code == 200 and full.json()["message"] == long
    assert visitor.get(f"{path}api/steps/3/").status_code == 404
    other_trajectory = other.trajectories.get().pk
    assert visitor.get(f"{path}api/steps/1/?t={other_trajectory}").status_code == 404  # (not the shared trial's)
    Share.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert visitor.get(f"{path}api/steps/2/").status_code == 410


def test_a_shared_comparison_and_grid_state_the_pass_threshold_as_their_pages_do(reviewer_client):
    tasks = {f"t{i}": [0.6] for i in range(4)}
    base = build_side("base", tasks, role="baseline")
    dataset = base.trials.first().dataset
    cand = build_side("cand", {**tasks, "t0": [0.2]}, role="candidate", dataset=dataset)
    set_pass_reward_in_admin(dataset, "0.5")
    stated = (escape("a trial passes at reward ≥ 0.5"), escape(f"(the threshold: set on dataset {dataset})"))
    shared_and_own = (
        ({"baseline": base.pk, "candidate": cand.pk}, f"/comparisons/?baseline={base.pk}&candidate={cand.pk}"),
        ({"sides": [base.pk, cand.pk], "reference": base.pk}, f"/comparisons/grid/?sides={base.pk},{cand.pk}"),
    )
    for body, own_url in shared_and_own:
        own = reviewer_client.get(own_url).content.decode()
        span = re.search(r'<span id="pass-threshold">.*?</span>', own).group(0)
        assert all(part in span for part in stated), span
        path = share(reviewer_client, {"comparison": body})["url"].removeprefix("http://testserver")
        assert span in Client().get(path).content.decode()
        assert span in Client().get(path, {"download": "html"}).content.decode()
