"""`benchviewer view`'s one-time sign-in link (core/signin_link.py): it signs its person in once."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from core import signin_link


def test_the_link_signs_its_person_in_once_and_a_made_up_one_never(db):
    owner = get_user_model().objects.create_user("owner")
    link = reverse("signin-link", args=[signin_link.issue(owner.pk)])
    browser = Client()
    response = browser.get(link)
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert browser.get(reverse("home")).wsgi_request.user == owner
    assert Client().get(link).status_code == 404  # used
    assert Client().get(reverse("signin-link", args=["made-up"])).status_code == 404
    assert Client().post(reverse("signin-link", args=[signin_link.issue(owner.pk)])).status_code == 405
