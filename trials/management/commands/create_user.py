"""Create (or update) a user in one of the role groups.

    python manage.py create_user alice --group triager --password s3cret
    BENCHVIEWER_PASSWORD=s3cret python manage.py create_user alice --group approver

Never prompts. Without a password (flag or env var) the account gets an unusable
password: it can log in only after `changepassword`, or through an API token
(`manage.py drf_create_token alice`: a runner's account, docs/reporting-from-a-runner.md).
"""

from __future__ import annotations

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from core import roles

PASSWORD_ENV = "BENCHVIEWER_PASSWORD"


class Command(BaseCommand):
    help = "Create a user in a group (reviewer, triager, approver, viewer, runner)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--group", required=True, choices=roles.GROUPS)
        parser.add_argument("--password", help=f"the password (default: ${PASSWORD_ENV}; none: unusable password)")
        parser.add_argument("--email", default="")

    @transaction.atomic
    def handle(self, *args, username: str, group: str, password: str | None, email: str, **options):
        password = password or os.environ.get(PASSWORD_ENV) or None
        users = get_user_model().objects
        user, created = users.get_or_create(username=username, defaults={"email": email})
        if password:
            user.set_password(password)
        elif created:
            user.set_unusable_password()
        if email:
            user.email = email
        user.save()
        try:
            roles.add_to_group(user, group)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} user {username!r} in group {group!r}.")
        if not user.has_usable_password():  # (said, or POST /api/token/ refusing it is a mystery)
            self.stdout.write(
                f"It has no password: give it an API token (manage.py drf_create_token {username}) "
                "or a password (--password)."
            )
