"""Walking a pack's folder: every entry once, with what the directory listing already knows of it."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path


def entries_under(folder: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """Every entry under the folder but its folders, as (path relative to it, entry).

    Top-down, in name order. A linked folder is an entry, never entered. (os.scandir: an
    entry knows its type without a stat of its own; a job is thousands of files.)
    """
    folders = deque([(folder, "")])
    while folders:
        directory, prefix = folders.popleft()
        with os.scandir(directory) as found:
            entries = sorted(found, key=lambda entry: entry.name)
        for entry in entries:
            relative = f"{prefix}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                folders.append((Path(entry.path), f"{relative}/"))
            else:
                yield relative, entry


def files_under(folder: Path) -> list[Path]:
    """Every file under the folder, sorted."""
    return sorted(Path(entry.path) for _, entry in entries_under(folder) if entry.is_file())


def relative_name(name: str) -> str:
    """An uploaded file's path relative to the folder it was chosen in (`webkitRelativePath`, the API's `path`),
    kept so that it imports as `import_packs` on that folder would: no root, no `.` or `..`, `/` between parts."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..") and "\x00" not in p]
    return "/".join(parts)
