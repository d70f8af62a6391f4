"""`manage.py sqlite_schema --write`: core/sqlite_schema.sql made again from a fresh `migrate`, after a migration."""

from django.core.management.base import BaseCommand, CommandError

from core import sqlite_schema


class Command(BaseCommand):
    help = "Migrate a throwaway SQLite file and write its dump, what a new data folder is made from."

    def add_arguments(self, parser):
        parser.add_argument("--write", action="store_true", help=f"write it to {sqlite_schema.SCHEMA_FILE}")
        parser.add_argument("--check", action="store_true", help="fail if the shipped file differs from it")

    def handle(self, *args, **options):
        if options["write"] == options["check"]:
            raise CommandError("give one of --write or --check")
        made = sqlite_schema.migrated_dump()
        if options["write"]:
            sqlite_schema.SCHEMA_FILE.write_text(made)
            self.stdout.write(f"wrote {sqlite_schema.SCHEMA_FILE} ({made.count(chr(10))} lines)")
        elif made != sqlite_schema.SCHEMA_FILE.read_text():
            raise CommandError(
                f"{sqlite_schema.SCHEMA_FILE} is not what the migrations make: run manage.py sqlite_schema --write"
            )
        else:
            self.stdout.write(f"{sqlite_schema.SCHEMA_FILE} is what the migrations make")
