"""`manage.py generate_demo [OUT_DIR]`: write the baseline and candidate demo jobs to disk (default DATA_DIR/demo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from trials.demo import write_demo


class Command(BaseCommand):
    help = (
        "Write two deterministic Harbor job directories (baseline-job, candidate-job) "
        "with realistic trial packs, for the demo and for import tests."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("out_dir", nargs="?", help="default: DATA_DIR/demo")
        parser.add_argument("--tasks", type=int, default=20, help="tasks per job (default 20)")
        parser.add_argument("--attempts", type=int, default=3, help="attempts per task (default 3)")
        parser.add_argument("--seed", type=int, default=0, help="same seed, same bytes (default 0)")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="delete existing baseline-job/candidate-job directories in OUT_DIR first",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["tasks"] < 1 or options["attempts"] < 1:
            raise CommandError("--tasks and --attempts must be at least 1")
        try:
            jobs = write_demo(
                Path(options["out_dir"] or settings.DATA_DIR / "demo"),
                tasks=options["tasks"],
                attempts=options["attempts"],
                seed=options["seed"],
                replace=options["replace"],
            )
        except FileExistsError as exc:
            raise CommandError(f"{exc}; pass --replace to overwrite it") from exc
        for job in jobs:
            self.stdout.write(str(job))
