"""The files Benchviewer's trial export adds to a Harbor trial folder (trials/export.py), read back.

Told apart by their `schemaVersion`, never by name: the export manifest (every other file's
path, size and sha256, checked here, and what the trial was beyond its files), the redaction
manifest (what was withheld; its item entries are redaction records, so a later file naming
those items is scrubbed too) and the QC items that cited the trial. A bundle whose files are
not the ones its manifest names is refused whole (PackError): an export is evidence, and an
edited one is not what was exported. Pure: no Django.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from trials.ingest.formats.harbor_trajectories import KEY_PREFIX as TRAJECTORY_FILES_KEY
from trials.ingest.records import ConfigurationRef, DatasetRef, PackError, ParsedJob, ParsedTrial, Problem, TaskRef
from trials.ingest.values import as_dict, parse_iso

EXPORT_MANIFEST = "benchviewer.export-manifest.v1"
REDACTION_MANIFEST = "benchviewer.redaction-manifest.v1"
QC_ITEMS = "benchviewer.qc-items.v1"
KINDS = (EXPORT_MANIFEST, REDACTION_MANIFEST, QC_ITEMS)
MANIFEST_NAME = "export-manifest.json"
# The statuses a result.json cannot always tell (a live trial failed or completed with no reward);
# "running" is not one: an export is a snapshot no runner reports to any more.
KEPT_STATUSES = ("passed", "failed", "errored", "timeout", "skipped")
REFUSED = "nothing of this bundle: no trial written, nothing already stored changed"
# The formats whose parsers say a trial's files are its own (ParsedTrial.files_are_its_own): an
# export names its trial's format, not what that format's parser said.
OWN_FILES = ("harbor", "lime")


def export_kind(data: Any) -> str:
    """Which of the export's own files this JSON is ("" for none)."""
    version = data.get("schemaVersion") if isinstance(data, dict) else None
    return version if version in KINDS else ""


def read_export_file(trial: ParsedTrial, data: dict[str, Any], trial_dir: Path, rel: str, local: str) -> None:
    """Keep what the file says about the trial: its QC items, or (once its files check) what it was."""
    kind = export_kind(data)
    if kind == QC_ITEMS:
        items = data.get("items")
        trial.qc_items = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    elif kind == EXPORT_MANIFEST:
        problems = manifest_problems(data, trial_dir, f"{rel}/{local}")
        if problems:
            error = PackError(problems[0])
            error.noticed = problems[1:]
            raise error
        trial.exported = {**as_dict(data.get("trial")), "exportedAt": data.get("exportedAt")}


def manifest_problems(manifest: dict[str, Any], trial_dir: Path, rel: str) -> list[Problem]:
    """Each member the manifest lists that is missing or not the bytes it names, and each member it does not list."""
    problems = []
    files = manifest.get("files")
    if not isinstance(files, list):
        return [Problem(rel, "the manifest lists no files (files is not a list)", json_path="files", kept=REFUSED)]
    listed = set()
    for number, entry in enumerate(files):
        path = entry.get("path") if isinstance(entry, dict) else None
        where = f"files[{number}]"
        if not isinstance(path, str) or not path or ".." in Path(path).parts or path.startswith("/"):
            problems.append(
                Problem(rel, f"member {path!r}: not a path inside the bundle", json_path=where, kept=REFUSED)
            )
            continue
        listed.add(path)
        local = trial_dir / path
        if not local.is_file():
            problems.append(
                Problem(rel, f"member {path} is listed but not in the bundle", json_path=where, kept=REFUSED)
            )
            continue
        digest, size = hashlib.sha256(), 0
        with open(local, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        if digest.hexdigest() != entry.get("sha256") or size != entry.get("size"):
            problems.append(
                Problem(
                    rel,
                    f"member {path} is not the file the export wrote (sha256 or size differs)",
                    json_path=where,
                    kept=REFUSED,
                )
            )
    for path in sorted(p.relative_to(trial_dir).as_posix() for p in trial_dir.rglob("*") if p.is_file()):
        if path != MANIFEST_NAME and path not in listed:
            problems.append(
                Problem(rel, f"member {path} is in the bundle but not in its manifest", json_path="files", kept=REFUSED)
            )
    return problems


def restore(trial: ParsedTrial) -> None:
    """The trial as it was where it was exported: its key (so a second import is the same trial),
    format, configuration and role, dataset version, task, job, attempt, correlation ids, status."""
    exported = trial.exported
    if not isinstance(exported.get("key"), str) or not exported["key"]:
        return  # (a manifest of an older export: the trial is what its files say)
    trial.key = exported["key"][:500]
    trial.source_format = str(exported.get("sourceFormat") or trial.source_format)[:20]
    trial.files_are_its_own = trial.source_format in OWN_FILES
    trial.trajectory_files_alone = trial.key.startswith(TRAJECTORY_FILES_KEY)  # (what it was when exported)
    trial.name = str(exported.get("name") or trial.name)
    if dataset := as_dict(exported.get("dataset")):
        trial.dataset = DatasetRef(
            str(dataset.get("name") or ""), str(dataset.get("version") or ""), str(dataset.get("ref") or "")
        )
    if task := as_dict(exported.get("task")):
        definition = trial.task.definition if trial.task and trial.task.name == task.get("name") else {}
        trial.task = TaskRef(
            str(task.get("name") or ""), str(task.get("checksum") or ""), str(task.get("source") or ""), definition
        )
    if config := as_dict(exported.get("configuration")):
        trial.configuration = ConfigurationRef(
            key=str(config.get("key") or "unknown"),
            role=str(config.get("role") or ""),
            agent_name=str(config.get("agentName") or ""),
            agent_version=str(config.get("agentVersion") or ""),
            model_name=str(config.get("modelName") or ""),
            profiles=as_dict(config.get("profiles")),
        )
    job = as_dict(exported.get("job"))
    trial.job_key = str(job.get("key") or "")
    attempt = exported.get("attempt")
    trial.attempt = attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else trial.attempt
    trial.benchmark = as_dict(exported.get("benchmark")) or trial.benchmark
    trial.runtime_correlation = as_dict(exported.get("runtimeCorrelation")) or trial.runtime_correlation
    # A Harbor folder's refs are paths in this pack (read now); any other trial's are what its runner
    # or pack said, not the files the export made of its rows.
    exported_refs = as_dict(exported.get("refs"))
    is_folder = trial.source_format == "harbor"
    trial.refs = {k: trial.refs.get(k, v) for k, v in exported_refs.items()} if is_folder else exported_refs
    trial.provenance = {
        **as_dict(exported.get("provenance")),
        **trial.provenance,
        "export": {k: exported.get(k) for k in ("id", "key", "sourceFormat", "exportedAt")},
    }
    if exported.get("status") in KEPT_STATUSES:
        trial.status = exported["status"]
    if isinstance(exported.get("failureCategory"), str):
        trial.failure_category = exported["failureCategory"][:60]


def exported_job(trial: ParsedTrial) -> ParsedJob | None:
    """The job the exported trial was in (its files alone name none)."""
    job = as_dict(trial.exported.get("job"))
    if not trial.job_key or job.get("key") != trial.job_key:
        return None
    key, source_format = trial.job_key[:300], str(job.get("sourceFormat") or trial.source_format)[:20]
    return ParsedJob(
        key=key,
        name=str(job.get("name") or trial.job_key)[:300],
        source_format=source_format,
        started_at=parse_iso(job.get("startedAt")),
        finished_at=parse_iso(job.get("finishedAt")),
        # (a Harbor job's, as its parser says it: trials imported before it, naming it, join it)
        trials_name_it_as=key.removeprefix("harbor:")
        if source_format == "harbor" and key.startswith("harbor:")
        else "",
    )
