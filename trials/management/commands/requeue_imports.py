"""python manage.py requeue_imports: send stranded imports again (what beat does periodically)."""

from django.core.management.base import BaseCommand

from trials.tasks import resend_stale_imports


class Command(BaseCommand):
    help = (
        "Send again the imports no worker will finish: queued with no message left in the broker, "
        "or running with no live worker holding them."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="list them, send nothing")

    def handle(self, *args, **options):
        stale = resend_stale_imports(dry_run=options["dry_run"])
        verb = "would send again" if options["dry_run"] else "sent again"
        for item in stale:
            self.stdout.write(f"{verb}  {item.import_id}  ({item.reason})")
        self.stdout.write(f"{len(stale)} import(s) {verb}" if stale else "no stranded import")
