"""python manage.py sweep_storage: remove what is left over in the blob storage (what beat does hourly)."""

from django.core.management.base import BaseCommand

from trials.imports import blobs


class Command(BaseCommand):
    help = (
        "Remove pack objects no stored file points into (a worker killed between storing a pack and "
        "recording it), empty folders (a file removed) and half-written copies, once they are an hour old."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="list them, remove nothing")

    def handle(self, *args, **options):
        removed = blobs.sweep_storage(dry_run=options["dry_run"])
        verb = "would remove" if options["dry_run"] else "removed"
        for name in removed:
            self.stdout.write(f"{verb}  {name}")
        folders = sum(name.endswith("/") for name in removed)
        packs = len(removed) - folders
        self.stdout.write(f"{packs} unnamed pack(s) and {folders} empty folder(s) {verb}")
