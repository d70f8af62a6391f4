"""Give every failed or flagged trial its failure signature, cluster and safety flags.

Imports do this for the trials they write; run it once for trials imported before
failure clusters existed (or after the signature rules change).
"""

from django.core.management.base import BaseCommand

from trials.triage import signatures


class Command(BaseCommand):
    help = "Sign failed and flagged trials into failure clusters (the backfill of an import's step)."

    def handle(self, *args, **options):
        clustered = signatures.sign_all()
        self.stdout.write(f"{clustered} trial(s) in failure clusters")
