"""python manage.py import_packs PATH [PATH ...]: import trial packs from this machine.

`--watch DIR` follows a Harbor jobs folder a running job is writing (trials/imports/watch.py).
"""

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from celery import current_app as app
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import InterfaceError, OperationalError, connections
from tqdm import tqdm
from watchfiles import watch

from core import locks
from trials import search
from trials.imports import watch as watched
from trials.imports.service import run_import
from trials.models import Import
from trials.queue import create_import
from trials.tasks import import_pack_task

PROBLEMS_SHOWN = 30
T = TypeVar("T")


class DatabaseUnreachable(Exception):
    pass


class Command(BaseCommand):
    help = "Import trial packs (Harbor job or trial folders, archives, evidence packs, events, results)."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="*")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--watch",
            metavar="DIR",
            help="follow a Harbor jobs (or job) folder: import each trial when its result.json is complete, "
            "each job when its own is; Ctrl-C stops",
        )

    def handle(self, *paths, **options):
        if options["watch"]:
            return self.follow(Path(options["watch"]).resolve(), not options["no_progress"])
        if not options["paths"]:
            raise CommandError("give the paths to import, or --watch DIR")
        rejected = 0
        found: list[tuple[str, Path]] = []
        for raw in options["paths"]:
            path = Path(raw).resolve()
            if not path.exists():  # said, and the other paths still imported
                self.stdout.write(
                    self.describe({"outcome": "rejected", "kind": "-", "pack": raw, "reason": "no such file or folder"})
                )
                rejected += 1
                continue
            found.append((raw, path))
        show_progress = not options["no_progress"]
        if settings.CELERY_TASK_ALWAYS_EAGER:  # each created and imported here, in turn
            for raw, path in found:
                rejected += self.report(self.import_here(self.new_import(raw, path), show_progress))
        else:  # every path is queued before the first is waited for: a database outage later drops none
            imports = self.queue_all(found)
            for number, imp in enumerate(imports):
                try:
                    imp = self.wait_for_worker(imp, show_progress)
                except DatabaseUnreachable as exc:
                    raise self.unfinished(imports[number:], [], exc) from exc
                rejected += self.report(imp)
        if settings.CELERY_TASK_ALWAYS_EAGER:  # with a worker, the import task queues this itself
            indexed = search.index_pending()
            if indexed:
                self.stdout.write(f"search index: steps of {indexed} trial(s) added")
        if rejected:
            raise CommandError(f"{rejected} pack(s) rejected")

    def follow(self, root: Path, show_progress: bool) -> None:
        """Import what is ready under `root` now, then whatever becomes ready, until Ctrl-C."""
        if not root.is_dir():
            raise CommandError(f"--watch needs a folder: {root}")
        self.stdout.write(f"watching {root} (Ctrl-C stops)")
        # The watch starts before what is there is imported: a folder finished meanwhile is a change it sees.
        # (`yield_on_timeout`: the first pass comes once the watch is set up, even with nothing changing.)
        changes_seen = watch(
            root, raise_interrupt=False, debounce=400, step=100, rust_timeout=1000, yield_on_timeout=True
        )
        try:
            for number, changes in enumerate(changes_seen):
                folders = watched.changed_folders(path for _, path in changes)
                self.import_ready(
                    [*watched.folders_with_results(root), *folders] if number == 0 else folders, show_progress
                )
        except KeyboardInterrupt:  # during an import: it is whole or not there, and the next watch finishes it
            pass
        self.stdout.write("stopped watching")

    def import_ready(self, folders: list[Path], show_progress: bool) -> None:
        for ready in watched.ready_to_import(folders):
            imp = self.new_import(str(ready.path), ready.path)
            if settings.CELERY_TASK_ALWAYS_EAGER:
                imp = self.import_here(imp, show_progress)
                search.index_pending()
            else:
                import_pack_task.delay(str(imp.pk))
                imp = self.wait_for_worker(imp, show_progress)
            self.report(imp)
            self.stdout.flush()

    @staticmethod
    def new_import(raw: str, path: Path) -> Import:
        return create_import(origin=Import.Origin.CLI, source_name=raw, source_path=str(path))

    def queue_all(self, paths: list[tuple[str, Path]]) -> list[Import]:
        """An import per path, sent to the workers; with the database gone, which were queued and which not."""
        imports: list[Import] = []
        for number, (raw, path) in enumerate(paths):
            try:
                imp = self.while_the_database_is_away(partial(self.new_import, raw, path))
            except DatabaseUnreachable as exc:
                raise self.unfinished(imports, [raw for raw, _ in paths[number:]], exc) from exc
            import_pack_task.delay(str(imp.pk))
            imports.append(imp)
        return imports

    def report(self, imp: Import) -> int:
        """Print the import's outcomes and problems; how many of its packs count as rejected."""
        for outcome in imp.outcomes:
            self.stdout.write(self.describe(outcome))
        self.report_problems(imp)
        return imp.rejected_count + (imp.status == Import.Status.FAILED)

    def import_here(self, imp: Import, show_progress: bool) -> Import:
        bar = tqdm(total=0, unit="trial", disable=not show_progress, desc=imp.source_name[-40:])

        def progress(current: Import) -> None:
            bar.total = current.progress_total
            bar.n = current.progress_done
            bar.refresh()

        with locks.worker_lock(str(imp.pk), wait=0):  # so no sweep takes it for stranded
            imp = run_import(str(imp.pk), on_progress=progress)
        bar.close()
        return imp

    def wait_for_worker(self, imp: Import, show_progress: bool) -> Import:
        bar = tqdm(total=0, unit="trial", disable=not show_progress, desc=imp.source_name[-40:])
        hint_at = time.monotonic() + self.queued_hint_seconds
        while imp.status in (Import.Status.QUEUED, Import.Status.RUNNING):
            time.sleep(0.5)
            self.while_the_database_is_away(imp.refresh_from_db)
            bar.total, bar.n = imp.progress_total, imp.progress_done
            bar.refresh()
            if imp.status == Import.Status.QUEUED and time.monotonic() > hint_at:
                hint_at = float("inf")  # said once
                self.stderr.write(self.queued_hint())
        bar.close()
        return imp

    queued_hint_seconds = 5.0

    def while_the_database_is_away(self, query: Callable[[], T]) -> T:
        """`query()`, again after each reconnection while the database is unreachable (a restart),
        for up to IMPORT_COMMAND_DATABASE_WAIT seconds; then DatabaseUnreachable."""
        deadline = time.monotonic() + settings.IMPORT_COMMAND_DATABASE_WAIT
        said = False
        while True:
            try:
                return query()
            except (OperationalError, InterfaceError) as exc:
                connections.close_all()  # the next query opens a new connection
                if time.monotonic() > deadline:
                    raise DatabaseUnreachable(str(exc).strip()) from exc
                if not said:
                    self.stderr.write(f"the database is unreachable ({str(exc).strip()}); waiting for it")
                    said = True
                time.sleep(1.0)

    def unfinished(self, waiting: list[Import], not_queued: list[str], exc: Exception) -> CommandError:
        """What an operator needs when the command gives up: what the workers still have, what they never got."""
        lines = [f"the database stayed unreachable for {settings.IMPORT_COMMAND_DATABASE_WAIT} s: {exc}"]
        lines += [f"  queued, a worker imports it: {imp.source_name} (import {imp.pk})" for imp in waiting]
        lines += [f"  not queued: {raw}" for raw in not_queued]
        return CommandError("\n".join(lines))

    @staticmethod
    def queued_hint() -> str:
        """Why an import waits: no worker at all (the usual surprise), or workers busy with other work."""
        workers = app.control.ping(timeout=1.0)
        if not workers:
            return (
                "still queued: no Celery worker answered. The import waits until one starts "
                "(celery -A benchviewer worker); the worker reads the path on its own machine."
            )
        return f"still queued behind other work: {len(workers)} worker(s) answered."

    def report_problems(self, imp: Import) -> None:
        """Errors first, then warnings; past PROBLEMS_SHOWN, where to read the rest."""
        ordered = sorted(imp.problems, key=lambda p: p.get("severity") != "error")
        for problem in ordered[:PROBLEMS_SHOWN]:
            where = problem["file"] + (f":{problem['line']}" if problem.get("line") else "")
            where += f" {problem['json_path']}" if problem.get("json_path") else ""
            kept = problem.get("kept") or "-"
            self.stderr.write(f"  {problem.get('severity', 'error')} {where}: {problem['message']} (kept: {kept})")
        if len(ordered) > PROBLEMS_SHOWN:
            self.stderr.write(f"  ... {len(ordered) - PROBLEMS_SHOWN} more: GET /api/imports/{imp.pk}/")

    @staticmethod
    def describe(outcome: dict) -> str:
        line = f"{outcome['outcome']:>16}  {outcome['kind']:<22} {outcome['pack']}"
        if outcome.get("reason"):
            line += f"  ({outcome['reason']})"
        elif outcome["outcome"] == "imported":
            shown = {k: v for k, v in outcome.items() if k not in ("pack", "pack_id", "kind", "outcome") and v}
            details = ", ".join(f"{k} {v}" for k, v in shown.items())
            line += f"  ({details})" if details else ""
        return line
