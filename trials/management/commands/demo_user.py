"""Create (or reset) the demo login that the README's first command prints."""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo login (user and password from DEMO_USER / DEMO_PASSWORD, default demo / demo)."

    def handle(self, *args, **options):
        username = os.environ.get("DEMO_USER", "demo")
        password = os.environ.get("DEMO_PASSWORD", "demo")
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"Demo login: user {username!r}, password {password!r}")
