"""`benchviewer view PATH [PATH ...]` (or `manage.py view`): folders of runs in the browser, for one person.

The embedded default: the data folder migrated (a new one made from the migrations' dump,
core/sqlite_schema.py), a server on 127.0.0.1 (a free port, or `--port`), a one-time sign-in link
printed (core/signin_link.py) and the browser opened on it. Each path is imported in a thread
beside the server, through the same import service as `import_packs`, so the first trials are on
the pages while the rest still imports; then the folders are followed as `import_packs --watch`
follows them. A second `view` on the same data folder finds the lock file
and says where the first one is. Ctrl-C stops the server and the watch.
"""

from __future__ import annotations

import fcntl
import getpass
import logging
import os
import signal
import threading
import time
import webbrowser
from pathlib import Path
from typing import IO, TextIO, cast

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler, get_internal_wsgi_application
from django.db import DatabaseError, connection, connections
from django.urls import get_resolver
from tqdm import tqdm
from watchfiles import watch

from core import locks, signin_link, sqlite_schema
from trials import search
from trials.imports import watch as watched
from trials.imports.service import run_import
from trials.management.commands.import_packs import Command as ImportPacks
from trials.models import Import

LOCK_FILE = "view.lock"
TRIAL_LIST = "/trials/"


def migrated() -> bool:
    """Every migration on disk recorded as applied in the data folder's database (one query)."""
    on_disk = set()
    for config in apps.get_app_configs():
        if (folder := Path(config.path) / "migrations").is_dir():
            on_disk |= {(config.label, path.stem) for path in folder.glob("[0-9]*.py")}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT app, name FROM django_migrations")
            applied = set(cursor.fetchall())
    except DatabaseError:  # no table yet: a new data folder
        return False
    return on_disk <= applied


def first_finished_trial(root: Path) -> Path | None:
    """A Harbor trial folder under `root` whose result is written (the first found), if any."""
    for folder in watched.folders_with_results(root):
        ready = watched.finished(folder)
        if ready is not None and ready.kind == "trial":
            return folder
    return None


class PagesFirst:
    """The site's WSGI app, counting the requests it is serving: the import beside it gives way to them
    (one process, one GIL: a page rendered while a job imports took seconds, not a tenth)."""

    def __init__(self, app) -> None:
        self.app, self.serving, self.lock = app, 0, threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            self.serving += 1
        try:
            return self.app(environ, start_response)
        finally:
            with self.lock:
                self.serving -= 1

    def give_way(self, longest: float = 1.0) -> None:
        """Wait while a page is being served, up to `longest` seconds (a poll every second starves nothing)."""
        deadline = time.monotonic() + longest
        while self.serving and time.monotonic() < deadline:
            time.sleep(0.01)


class EmbeddedImports(ImportPacks):
    """import_packs' importer, its import giving way to the pages after each trial it writes."""

    pages: PagesFirst

    def import_here(self, imp: Import, show_progress: bool) -> Import:
        bar = tqdm(total=0, unit="trial", disable=not show_progress, desc=imp.source_name[-40:])

        def progress(current: Import) -> None:  # (called between trials: none is half-written)
            bar.total, bar.n = current.progress_total, current.progress_done
            bar.refresh()
            self.pages.give_way()

        with locks.worker_lock(str(imp.pk), wait=0):  # so no sweep takes it for stranded
            imp = run_import(str(imp.pk), on_progress=progress)
        bar.close()
        return imp


class Command(BaseCommand):
    help = "Open folders of runs in the browser: import them, follow them, serve them on 127.0.0.1."
    requires_system_checks: list[str] = []  # a second of the first look; `manage.py check` and the tests run them

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", help="Harbor jobs, Inspect logs, TB1 runs, OTLP files, packs…")
        parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
        parser.add_argument("--no-browser", action="store_true", help="print the link, open no browser")
        parser.add_argument("--no-progress", action="store_true", help="no progress bars")

    def handle(self, *args, **options):
        lock = self.take_lock()
        # The site's routes (every view module) loaded now, beside the start, not on the first page asked for.
        threading.Thread(target=lambda: get_resolver().url_patterns, name="benchviewer-view-warm", daemon=True).start()
        sqlite_schema.create_if_new(connection)  # a new data folder: the migrations' dump, not 62 migrations run
        if not migrated():  # (loading the migration graph to find nothing to do took a second)
            self.stdout.write(f"preparing the data folder {settings.DATA_DIR} (its first run migrates it)")
            self.stdout.flush()
            call_command("migrate", interactive=False, verbosity=0)
        server = self.bind(options["port"])
        pages = PagesFirst(get_internal_wsgi_application())
        server.set_app(pages)
        address = f"http://127.0.0.1:{server.server_address[1]}/"
        lock.write(f"{address}\n")
        lock.flush()
        link = f"{address}accounts/once/{signin_link.issue(self.owner().pk)}/"
        self.stdout.write(f"Benchviewer: {settings.DATA_DIR} at {address}")
        self.stdout.write(f"  sign in (the link works once): {link}")
        self.stdout.write("  Ctrl-C stops")
        self.stdout.flush()
        stop = threading.Event()
        importing = threading.Thread(
            target=self.import_and_follow,
            args=(options["paths"], stop, not options["no_progress"], pages),
            name="benchviewer-view-import",
            daemon=True,  # an import cut off by Ctrl-C is whole or not there; the next start finishes it
        )
        importing.start()
        if not options["no_browser"]:  # on the trial list, which fills as the import goes
            threading.Thread(target=webbrowser.open, args=(f"{link}?next={TRIAL_LIST}",), daemon=True).start()
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill stops as cleanly as Ctrl-C
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            stop.set()
            server.server_close()
            importing.join(timeout=5)
            lock.close()
        self.stdout.write("stopped")

    def take_lock(self) -> IO[str]:
        """The data folder's lock, held while this process lives; a running view's pid and address if taken."""
        path = Path(settings.DATA_DIR) / LOCK_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            pid, _, address = lock.read().strip().partition(" ")
            lock.close()
            raise CommandError(
                f"benchviewer view is already running on {settings.DATA_DIR} (pid {pid or '?'}) at "
                f"{address or 'an address it has not printed yet'}; its sign-in link is in its terminal"
            ) from None
        lock.truncate(0)
        lock.write(f"{os.getpid()} ")  # its address follows once it serves
        lock.flush()
        return lock

    @staticmethod
    def bind(port: int) -> ThreadedWSGIServer:
        try:
            server = ThreadedWSGIServer(("127.0.0.1", port), WSGIRequestHandler)
        except OSError as exc:
            raise CommandError(f"cannot serve on 127.0.0.1:{port} ({exc.strerror}): choose another --port") from exc
        logging.getLogger("django.server").setLevel(logging.WARNING)  # no line per request, errors still
        logging.getLogger("watchfiles").setLevel(logging.WARNING)  # nor per change seen: the imports say it
        return server

    @staticmethod
    def owner():
        """The account of the person running this: every right, no password (the link signs them in)."""
        user, made = get_user_model().objects.get_or_create(
            username=getpass.getuser(), defaults={"is_superuser": True, "is_staff": True}
        )
        if made:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        return user

    def import_and_follow(
        self, paths: list[str], stop: threading.Event, show_progress: bool, pages: PagesFirst
    ) -> None:
        """Import each path, then whatever becomes ready under the folders among them, until `stop`."""
        importer = EmbeddedImports(stdout=cast(TextIO, self.stdout), stderr=cast(TextIO, self.stderr))  # its lines
        importer.pages = pages
        roots = [Path(raw).resolve() for raw in paths]
        folders = [root for root in roots if root.is_dir()]
        try:
            if not folders:
                self.import_paths(importer, paths, roots, show_progress)
                return
            # As in import_packs --watch: the watch is set up before what is there is imported, so a
            # folder finished meanwhile is a change it sees (the first pass comes once it is set up: a
            # tenth of a second, not the second of import_packs' timeout, which was a second of the first look).
            changes_seen = watch(
                *folders,
                stop_event=stop,
                raise_interrupt=False,
                debounce=400,
                step=100,
                rust_timeout=100,
                yield_on_timeout=True,
            )
            for number, changes in enumerate(changes_seen):
                if number == 0:
                    self.import_paths(importer, paths, roots, show_progress)
                    self.stdout.write(f"following {', '.join(map(str, folders))} for new trials")
                elif changes:  # (a timeout's empty pass: nothing to do)
                    importer.import_ready(watched.changed_folders(path for _, path in changes), show_progress)
                else:
                    continue
                self.stdout.flush()
        finally:
            connections.close_all()  # this thread's own

    def import_paths(self, importer: EmbeddedImports, paths: list[str], roots: list[Path], show_progress: bool) -> None:
        for raw, root in zip(paths, roots, strict=True):
            if not root.exists():
                self.stdout.write(
                    importer.describe(
                        {"outcome": "rejected", "kind": "-", "pack": raw, "reason": "no such file or folder"}
                    )
                )
                continue
            # A job's first trial alone, as the watch imports one (it joins its job): on the list in
            # a moment, while the job's import stores and reads every trial before it writes the first.
            if root.is_dir() and (first := first_finished_trial(root)) is not None:
                importer.report(importer.import_here(importer.new_import(str(first), first), show_progress))
                search.index_pending()
                self.stdout.flush()
            importer.report(importer.import_here(importer.new_import(raw, root), show_progress))
            search.index_pending()
            self.stdout.flush()
