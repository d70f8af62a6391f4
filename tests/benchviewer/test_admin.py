"""Every model is in the Django admin, and each list page opens for a superuser."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

pytestmark = pytest.mark.django_db

MODELS = [m for label in ("trials", "comparisons") for m in apps.get_app_config(label).get_models()]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_model_is_registered_and_its_list_opens(model, client, django_user_model):
    assert admin.site.is_registered(model)
    client.force_login(django_user_model.objects.create_superuser("admin", password="pw-admin-1"))
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert client.get(url).status_code == 200
