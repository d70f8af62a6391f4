"""python manage.py derive_trajectories: an ATIF trajectory for each trial that has runtime events and none."""

from django.core.management.base import BaseCommand

from trials.live.trajectories import derive_from_events
from trials.models import Trial


class Command(BaseCommand):
    help = (
        "Derive an ATIF trajectory from the runtime events of every trial that has events and no "
        "trajectory (imported Lime event packs; live trials get theirs when they complete)."
    )

    def handle(self, *args, **options):
        trials = Trial.objects.filter(events__isnull=False, trajectories__isnull=True).exclude(status="running")
        count = 0
        for trial in trials.distinct().only("pk", "session_id", "provenance").iterator():
            if derive_from_events(trial) is not None:
                count += 1
                self.stdout.write(f"derived  trial {trial.pk} {trial.name}")
        self.stdout.write(f"{count} trajector{'y' if count == 1 else 'ies'} derived")
