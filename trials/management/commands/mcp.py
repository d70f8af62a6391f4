"""`manage.py mcp --user NAME`: the MCP server over stdio, for a local agent (trials/mcp/stdio.py)."""

import os

from django.core.management.base import BaseCommand, CommandError

from trials.mcp import stdio


class Command(BaseCommand):
    help = "Serve Benchviewer's MCP tools over stdio, with the rights of one user (docs/agents.md)."

    def add_arguments(self, parser):
        parser.add_argument("--user", default=os.environ.get("BENCHVIEWER_MCP_USER", ""), help="whose rights")
        parser.add_argument("--url", default=os.environ.get("BENCHVIEWER_URL", ""), help="the site's address")

    def handle(self, *args, **options):
        if not options["user"]:
            raise CommandError("name the user the agent acts as: --user NAME (or BENCHVIEWER_MCP_USER)")
        try:
            stdio.main(options["user"], options["url"])
        except stdio.get_user_model().DoesNotExist:
            raise CommandError(f"no active user {options['user']!r}") from None
