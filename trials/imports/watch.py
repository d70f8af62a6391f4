"""A Harbor jobs folder followed while a job writes it (`import_packs --watch DIR`): what is ready.

A trial is ready when its `result.json` is complete: valid JSON, a trial's result, with its
`finished_at` written (Harbor writes it once the verifier is done); a job when its own
`result.json` is. A trial folder inside a job folder is imported on its own and joins its
job (trials.ingest.formats.harbor.parse_single_trial); the job folder, once finished, is
imported whole, which adds its result and any trial that never finished.

Nothing is imported twice: a done import of the same path created after its `result.json`
was last written means it is imported, so a restarted watcher sends nothing again (and
the import's own dedupe, packs by content and trials by key, would add nothing anyway).
The folders are watched with `watchfiles` (inotify, FSEvents…), not a loop of our own; a folder
moved or copied in whole is one change, its own, and is looked into for the results it holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from trials.ingest.formats import harbor
from trials.models import Import

RESULT = "result.json"


@dataclass(frozen=True)
class Ready:
    path: Path
    kind: str  # trial | job
    written: float  # when its result.json was last written (seconds since the epoch)


def finished(folder: Path) -> Ready | None:
    """The folder, if its result.json is a trial's or a job's, complete and finished."""
    try:
        written = (folder / RESULT).stat().st_mtime
        data = orjson.loads((folder / RESULT).read_bytes())
    except (OSError, orjson.JSONDecodeError):  # not there, or being written
        return None
    if not isinstance(data, dict) or not data.get("finished_at"):
        return None
    if harbor.is_trial_result(data):
        return Ready(folder, "trial", written)
    if harbor.is_job_result(data):
        return Ready(folder, "job", written)
    return None


def folders_with_results(root: Path) -> list[Path]:
    """Where a result.json can be under a jobs folder (or a job folder): the root, its jobs, their trials."""
    found = [path.parent for path in (root / RESULT, *root.glob(f"*/{RESULT}"), *root.glob(f"*/*/{RESULT}"))]
    return [folder for folder in found if (folder / RESULT).is_file()]


def changed_folders(changes: Iterable[str]) -> list[Path]:
    """The folders whose result.json a batch of file-system changes touched, or that appeared whole."""
    paths = [Path(path) for path in changes]
    folders = {path.parent for path in paths if path.name == RESULT}
    for path in paths:
        # A folder moved or copied in whole: its files may have no event of their own (written before its watch).
        if path.name != RESULT and path.is_dir():
            folders.update(folders_with_results(path))
    return sorted(folders)


def ready_to_import(folders: Iterable[Path]) -> list[Ready]:
    """The finished ones not imported since their result was written; trials before jobs."""
    ready = [r for r in map(finished, sorted(set(folders))) if r is not None and not imported(r)]
    return sorted(ready, key=lambda r: (r.kind != "trial", str(r.path)))


def imported(ready: Ready) -> bool:
    since = datetime.fromtimestamp(ready.written, UTC)
    return Import.objects.filter(source_path=str(ready.path), status=Import.Status.DONE, created_at__gte=since).exists()
