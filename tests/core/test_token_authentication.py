"""A token request knows its user and rights from one query (core/roles.py TokenAuthentication), the
rights the same as the groups give a signed-in user, and a bad or inactive token is still a 401."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from core import roles

pytestmark = pytest.mark.django_db


def token_of(name: str, *groups: str, active: bool = True) -> str:
    user = get_user_model().objects.create_user(name, password="pw-token-1", is_active=active)
    for group in groups:
        roles.add_to_group(user, group)
    return Token.objects.create(user=user).key


@pytest.mark.parametrize(
    "groups",
    [(), (roles.VIEWER,), (roles.RUNNER,), (roles.REVIEWER, roles.RUNNER), (roles.TRIAGER, roles.APPROVER)],
)
def test_one_query_gives_the_rights_the_groups_give(groups, django_assert_num_queries) -> None:
    key = token_of("token-user", *groups)
    expected = frozenset({roles.READ}).union(*(roles.GROUP_RIGHTS[g] for g in groups))
    with django_assert_num_queries(1):
        user, _ = roles.TokenAuthentication().authenticate_credentials(key)
        rights = roles.user_rights(user)
    assert rights == expected
    fresh = get_user_model().objects.get(pk=user.pk)  # (the groups read as a signed-in page reads them)
    assert roles.user_rights(fresh) == expected


def test_an_unknown_or_inactive_token_is_refused() -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert client.get("/api/trials/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_of('gone', roles.RUNNER, active=False)}")
    answer = client.get("/api/trials/")
    assert answer.status_code == 401
    assert "inactive" in answer.json()["detail"]


def test_a_token_reads_the_api() -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_of('reader', roles.VIEWER)}")
    assert client.get("/api/trials/").status_code == 200
