"""The `benchviewer` command (pyproject.toml's console script), from a clone or an installed package.

    benchviewer view PATH [PATH ...]   one person: folders of runs in the browser (manage.py view)
    benchviewer serve [--workers N]    the web server of a team's deployment (gunicorn)
    benchviewer worker | beat          its Celery worker and its one beat (docs/deploy.md)
    benchviewer manage COMMAND ...     any management command (migrate, create_user, import_packs…)

Every one reads the environment variables of docs/configuration.md. Its data folder (DATA_DIR) is
$BENCHVIEWER_HOME, else DATA_DIR, else the platform's user data folder (~/.local/share/benchviewer).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from django.core.management import execute_from_command_line
from gunicorn.app.wsgiapp import run as run_gunicorn  # type: ignore[import-untyped]  # no types shipped

from benchviewer.celery import app as celery_app


def user_data_dir() -> Path:
    """The data folder of the person running the command, as the platform places such folders."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "benchviewer"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "benchviewer"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "benchviewer"


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="benchviewer", description=__doc__.split("\n\n")[0])
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    view = commands.add_parser("view", help="open folders of runs in the browser (one person, on 127.0.0.1)")
    view.add_argument("paths", nargs="+", metavar="PATH", help="Harbor jobs, Inspect logs, TB1 runs, OTLP files…")
    view.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    view.add_argument("--no-browser", action="store_true", help="print the sign-in link, open no browser")
    view.add_argument("--no-progress", action="store_true", help="no progress bars")
    serve = commands.add_parser("serve", help="the web server (gunicorn); other options go to gunicorn")
    serve.add_argument("--workers", type=int, default=4, help="gunicorn worker processes (default 4)")
    serve.add_argument("--bind", default="127.0.0.1:8000", help="where to listen (default 127.0.0.1:8000)")
    # (no help of their own: --help is celery's, or Django's, whose options they pass on)
    commands.add_parser("worker", help="a Celery worker (needs REDIS_URL); options as celery worker's", add_help=False)
    commands.add_parser("beat", help="Celery beat, one per deployment; options as celery beat's", add_help=False)
    commands.add_parser("manage", help="any management command: benchviewer manage migrate", add_help=False)
    return root


def main(argv: list[str] | None = None) -> int | None:
    args, rest = parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    if os.environ.get("BENCHVIEWER_HOME"):
        os.environ["DATA_DIR"] = str(Path(os.environ["BENCHVIEWER_HOME"]).expanduser())
    os.environ.setdefault("DATA_DIR", str(user_data_dir()))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchviewer.settings")
    if args.command == "manage":
        execute_from_command_line(["benchviewer manage", *rest])
        return None
    if args.command == "serve":
        sys.argv = ["benchviewer serve", "--workers", str(args.workers), "--bind", args.bind, *rest]
        sys.argv.append("benchviewer.wsgi:application")
        run_gunicorn()
        return None
    if args.command in ("worker", "beat"):
        return celery_app.start([args.command, "--loglevel=INFO", *rest])
    if rest:
        parser().error(f"unrecognized arguments: {' '.join(rest)}")
    flags = ["--no-browser"] * args.no_browser + ["--no-progress"] * args.no_progress
    execute_from_command_line(["benchviewer", "view", *args.paths, "--port", str(args.port), *flags])
    return None


if __name__ == "__main__":
    sys.exit(main())
