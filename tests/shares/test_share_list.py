"""The page of one's share links (views, expiry, state, Revoke), the expiry chosen at creation,
and a second Share of the same thing offering the live link instead of minting another."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from shares.models import Share, ShareEvent
from tests.builders import REFERENCE, build_side, import_path, make_user
from trials.models import QCItem, Trial

pytestmark = pytest.mark.django_db


@pytest.fixture
def trial() -> Trial:
    """A real shared Harbor trial (ThinHarness, Terminal-Bench 2.1), imported as a user would."""
    import_path(REFERENCE / "harbor" / "job-thinharness" / "failed-trial")
    return Trial.objects.latest("pk")


@pytest.fixture
def rita(client, user):
    client.force_login(user)
    return client


def share(client, body: dict, status: int = 201) -> dict:
    response = client.post("/api/shares/", body, content_type="application/json")
    assert response.status_code == status, response.content
    return response.json()


def visitor_path(made: dict) -> str:
    return made["url"].removeprefix("http://testserver")


def row_of(html: str, pk: int) -> str:
    found = re.search(rf'<tr id="share-{pk}".*?</tr>', html, re.S)
    assert found, f"share {pk} not listed"
    return found.group(0)


def test_the_page_lists_my_links_with_views_expiry_and_state_and_not_another_users(rita, trial, triager):
    mine = share(rita, {"trial": trial.pk, "expires_in_days": 30})
    other = Client()
    other.force_login(triager)
    theirs = share(other, {"trial": trial.pk})
    visitor = Client()
    for _ in range(3):
        assert visitor.get(visitor_path(mine)).status_code == 200

    html = rita.get("/shares/").content.decode()
    row = row_of(html, mine["id"])
    assert f'<span class="badge">trial</span> <a href="/trials/{trial.pk}/">{trial.name}</a>' in row
    assert '<td class="num" data-field="views">3</td>' in row
    made = Share.objects.get(pk=mine["id"])
    assert made.expires_at.isoformat() in row and made.created_at.isoformat() in row
    last_view = made.views.order_by("-at").first().at
    assert last_view.isoformat() in row
    assert 'data-field="state">live<' in row and "Revoke</button>" in row
    assert f'id="share-{theirs["id"]}"' not in html
    # the triager's page holds only the triager's link
    theirs_html = other.get("/shares/").content.decode()
    assert f'id="share-{theirs["id"]}"' in theirs_html and f'id="share-{mine["id"]}"' not in theirs_html


def test_an_administrator_sees_everyones_links_and_a_viewer_only_theirs(rita, trial, django_user_model):
    made = share(rita, {"trial": trial.pk})
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser("root", password="pw-root-1"))
    row = row_of(admin.get("/shares/").content.decode(), made["id"])
    assert "<td>reviewer</td>" in row  # who made it
    viewer = Client()
    viewer.force_login(make_user("vic", "viewer"))
    page = viewer.get("/shares/")
    assert page.status_code == 200 and f'id="share-{made["id"]}"' not in page.content.decode()
    assert viewer.post(f"/shares/{made['id']}/revoke/").status_code == 403  # a viewer writes nothing
    assert Share.objects.get(pk=made["id"]).revoked_at is None


def test_revoke_closes_the_link_at_once_keeps_it_listed_and_is_audited(rita, trial, user, triager):
    made = share(rita, {"trial": trial.pk})
    assert Client().get(visitor_path(made)).status_code == 200
    other = Client()
    other.force_login(triager)
    assert other.post(f"/shares/{made['id']}/revoke/").status_code == 404  # not theirs to revoke

    answer = rita.post(f"/shares/{made['id']}/revoke/", {"page": "1"})
    assert answer.status_code == 302 and answer["Location"] == "/shares/?page=1"
    assert Client().get(visitor_path(made)).status_code == 404
    row = row_of(rita.get("/shares/").content.decode(), made["id"])
    assert 'data-field="state">revoked<' in row and "Revoke</button>" not in row
    history = list(ShareEvent.objects.filter(share_id=made["id"]).values_list("action", "actor__username"))
    assert history == [("created", user.username), ("revoked", user.username)]
    assert rita.get(f"/shares/{made['id']}/revoke/").status_code == 405  # a GET never revokes


def test_the_revoke_form_carries_a_csrf_token_and_is_refused_without_one(user, trial):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    made = share(browser, {"trial": trial.pk}, status=403)  # (the API too refuses a session without CSRF)
    assert "CSRF" in made["detail"]
    made = Share.objects.create(
        kind=Share.Kind.TRIAL,
        trial=trial,
        token_hash="x" * 64,
        created_by=user,
        expires_at=timezone.now() + timedelta(days=1),
    )
    html = browser.get("/shares/").content.decode()
    assert 'name="csrfmiddlewaretoken"' in row_of(html, made.pk)
    assert browser.post(f"/shares/{made.pk}/revoke/").status_code == 403
    assert Share.objects.get(pk=made.pk).revoked_at is None


def test_an_expired_link_reads_expired_and_has_no_revoke_button(rita, trial):
    made = share(rita, {"trial": trial.pk})
    Share.objects.filter(pk=made["id"]).update(expires_at=timezone.now() - timedelta(minutes=1))
    row = row_of(rita.get("/shares/").content.decode(), made["id"])
    assert 'data-field="state">expired<' in row and "(expired)" in row and "Revoke</button>" not in row


def test_the_expiry_chosen_at_creation_is_the_shares_expires_at(rita, trial):
    for days in (1, 7, 30, 90):
        before = timezone.now()
        made = share(rita, {"trial": trial.pk, "expires_in_days": days, "if_exists": "new"})
        expires = Share.objects.get(pk=made["id"]).expires_at
        assert before + timedelta(days=days) <= expires <= timezone.now() + timedelta(days=days)
    item = QCItem.objects.create(trial=trial, kind="failure-mode", category="tool")
    default = share(rita, {"qc_item": item.pk})
    created = Share.objects.get(pk=default["id"])
    assert created.expires_at - created.created_at == timedelta(days=7)  # the default, unchanged
    row = row_of(rita.get("/shares/").content.decode(), default["id"])
    assert f'<span class="badge">QC item</span> <a href="{item.get_absolute_url()}">{item.label}</a>' in row


@pytest.mark.parametrize("bad", [0, -3, 91, 365, "soon", 1.5])
def test_a_bad_expiry_answers_400_naming_the_field_and_makes_nothing(rita, trial, bad):
    answer = share(rita, {"trial": trial.pk, "expires_in_days": bad}, status=400)
    assert "expires_in_days" in answer
    assert Share.objects.count() == 0


def test_an_expiry_given_both_ways_answers_400(rita, trial):
    when = (timezone.now() + timedelta(days=3)).isoformat()
    answer = share(rita, {"trial": trial.pk, "expires_in_days": 3, "expires_at": when}, status=400)
    assert "not both" in answer["expires_in_days"][0]
    assert "90" in share(rita, {"trial": trial.pk, "expires_in_days": 91}, status=400)["expires_in_days"][0]


def test_a_second_share_of_the_same_trial_offers_the_live_link_instead_of_minting(rita, trial):
    first = share(rita, {"trial": trial.pk, "expires_in_days": 1})
    again = share(rita, {"trial": trial.pk}, status=409)
    assert [e["id"] for e in again["existing"]] == [first["id"]]
    assert "url" not in again and "/s/" not in str(again)  # its token is not stored, so never repeated
    assert "expiring" in again["detail"]
    assert Share.objects.count() == 1


def test_new_makes_another_beside_it_and_replace_revokes_the_old_one(rita, trial):
    first = share(rita, {"trial": trial.pk})
    second = share(rita, {"trial": trial.pk, "if_exists": "new"})
    assert Client().get(visitor_path(first)).status_code == 200
    third = share(rita, {"trial": trial.pk, "if_exists": "replace"})
    assert Client().get(visitor_path(first)).status_code == 404
    assert Client().get(visitor_path(second)).status_code == 404
    assert Client().get(visitor_path(third)).status_code == 200
    assert list(Share.objects.filter(revoked_at=None).values_list("pk", flat=True)) == [third["id"]]
    revoked = ShareEvent.objects.filter(action=ShareEvent.Action.REVOKED).values_list("share_id", flat=True)
    assert set(revoked) == {first["id"], second["id"]}
    share(rita, {"trial": trial.pk, "if_exists": "sometimes"}, status=400)


def test_an_expired_or_revoked_link_or_another_users_does_not_stop_a_new_one(rita, trial, triager):
    other = Client()
    other.force_login(triager)
    share(other, {"trial": trial.pk})
    old = share(rita, {"trial": trial.pk})
    Share.objects.filter(pk=old["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    fresh = share(rita, {"trial": trial.pk})
    assert rita.delete(f"/api/shares/{fresh['id']}/").status_code == 204
    share(rita, {"trial": trial.pk})


def test_a_second_share_of_the_same_comparison_is_offered_whatever_the_ids_type(rita):
    tasks = {f"t{i}": [1.0] for i in range(3)}
    base = build_side("base", tasks, role="baseline")
    cand = build_side("cand", tasks, role="candidate", dataset=base.trials.first().dataset)
    first = share(rita, {"comparison": {"baseline": str(base.pk), "candidate": str(cand.pk)}})
    again = share(rita, {"comparison": {"baseline": base.pk, "candidate": cand.pk}}, status=409)
    assert [e["id"] for e in again["existing"]] == [first["id"]]
    share(rita, {"comparison": {"baseline": cand.pk, "candidate": base.pk}})  # the other way round is another
    grid = share(rita, {"comparison": {"sides": [base.pk, cand.pk], "reference": base.pk}})
    html = rita.get("/shares/").content.decode()
    assert f'<a href="/comparisons/?baseline={base.pk}&amp;candidate={cand.pk}">{base.key} → {cand.key}</a>' in html
    grid_row = row_of(html, grid["id"])
    assert '<span class="badge">grid</span>' in grid_row and f">{base.key}, {cand.key}</a>" in grid_row


def test_the_list_pages_without_counting_and_each_page_reads_a_fixed_number_of_queries(
    rita, trial, user, django_assert_max_num_queries
):
    from shares.mine import PAGE_SIZE

    now = timezone.now()
    Share.objects.bulk_create(
        Share(
            kind=Share.Kind.TRIAL,
            trial=trial,
            token_hash=f"{i:064x}",
            created_by=user,
            created_at=now - timedelta(minutes=i),
            expires_at=now + timedelta(days=1),
        )
        for i in range(PAGE_SIZE + 5)
    )
    with django_assert_max_num_queries(12):
        first = rita.get("/shares/").content.decode()
    assert first.count('<tr id="share-') == PAGE_SIZE and "next →" in first
    second = rita.get("/shares/?page=2").content.decode()
    assert second.count('<tr id="share-') == 5 and "← previous" in second and "next →" not in second


def test_sharing_off_hides_the_page_the_nav_link_and_the_revoke(rita, trial, settings):
    made = share(rita, {"trial": trial.pk})
    assert 'href="/shares/"' in rita.get(f"/trials/{trial.pk}/").content.decode()
    settings.SHARING_ENABLED = False
    assert rita.get("/shares/").status_code == 404
    assert rita.post(f"/shares/{made['id']}/revoke/").status_code == 404
    html = rita.get(f"/trials/{trial.pk}/").content.decode()
    assert 'href="/shares/"' not in html and 'id="share-button"' not in html and 'id="share-expiry"' not in html


def test_the_share_control_offers_the_expiry_choices_with_the_default_chosen(rita, trial):
    html = rita.get(f"/trials/{trial.pk}/").content.decode()
    select = re.search(r'<select id="share-expiry".*?</select>', html, re.S)
    assert select, "no expiry choice beside the Share button"
    options = re.findall(r'<option value="(\d+)"( selected)?>', select.group(0))
    assert [int(v) for v, _ in options] == [1, 7, 30, 90]
    assert [v for v, chosen in options if chosen] == ["7"]
