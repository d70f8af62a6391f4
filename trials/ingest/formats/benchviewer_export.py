"""The files Benchviewer's trial export adds to a Harbor trial folder (trials/export.py), read back.

Told apart by their `schemaVersion`, never by name: the export manifest (every other file's
path, size and sha256, checked here), the redaction manifest (what was withheld; its item
entries are redaction records, so a later file naming those items is scrubbed too) and the
QC items that cited the trial. Pure: no Django.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from trials.ingest.records import ParsedTrial, Problem
from trials.ingest.values import as_dict

EXPORT_MANIFEST = "benchviewer.export-manifest.v1"
REDACTION_MANIFEST = "benchviewer.redaction-manifest.v1"
QC_ITEMS = "benchviewer.qc-items.v1"
KINDS = (EXPORT_MANIFEST, REDACTION_MANIFEST, QC_ITEMS)
# The statuses a result.json cannot always tell (a live trial failed or completed with no reward);
# "running" is not one: an export is a snapshot no runner reports to any more.
KEPT_STATUSES = ("passed", "failed", "errored", "timeout", "skipped")


def export_kind(data: Any) -> str:
    """Which of the export's own files this JSON is ("" for none)."""
    version = data.get("schemaVersion") if isinstance(data, dict) else None
    return version if version in KINDS else ""


def read_export_file(trial: ParsedTrial, data: dict[str, Any], trial_dir: Path, rel: str, local: str) -> None:
    """Keep what the file says about the trial: its QC items, or the checks of the export manifest."""
    kind = export_kind(data)
    if kind == QC_ITEMS:
        items = data.get("items")
        trial.documents["qc_items"] = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    elif kind == EXPORT_MANIFEST:
        trial.problems.extend(manifest_problems(data, trial_dir, f"{rel}/{local}"))
        exported = as_dict(data.get("trial"))
        if exported.get("status") in KEPT_STATUSES:  # (the files' own reward or exception, when any, still decide)
            trial.status = exported["status"]
        if isinstance(exported.get("failureCategory"), str) and not trial.failure_category:
            trial.failure_category = exported["failureCategory"][:60]


def manifest_problems(manifest: dict[str, Any], trial_dir: Path, rel: str) -> list[Problem]:
    """A file the manifest lists that is missing, or whose bytes are not the ones it names."""
    problems = []
    files = manifest.get("files")
    for number, entry in enumerate(files if isinstance(files, list) else []):
        path = entry.get("path") if isinstance(entry, dict) else None
        where = f"files[{number}]"
        if not isinstance(path, str) or ".." in Path(path).parts or path.startswith("/"):
            problems.append(Problem(rel, "an entry with no usable path", json_path=where, severity="warning"))
            continue
        local = trial_dir / path
        if not local.is_file():
            problems.append(Problem(rel, f"{path} is listed but not in the folder", json_path=where,
                                    severity="warning", kept="the files that are there"))  # fmt: skip
            continue
        digest = hashlib.sha256()
        with open(local, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != entry.get("sha256"):
            problems.append(Problem(rel, f"{path} is not the file the export wrote (sha256 differs)", json_path=where,
                                    severity="warning", kept="the file as it is"))  # fmt: skip
    return problems
