"""One trial as a zip laid out as a Harbor trial folder (GET /api/commands/export_benchmark_trial/).

Inside one top folder: the trial's own stored files (a Harbor trial's folder as imported),
or, for a trial read from another format or written live, `result.json` and `agent/*.json`
made from its rows; then `verifier/reward.json` and `verifier/reward-details.json` when the
folder has none, `events.jsonl` (events not already in its files), the evidence pack joined to
it, `qc-items.json` (the QC items citing it), `redaction-manifest.json` and last
`export-manifest.json` (path, size and sha256 of every other file). Importing the zip gives
the same trial (trials/ingest/formats/benchviewer_export.py reads the added files back).

Raw bytes are the source of truth: files are copied from the blob storage in 1 MiB chunks,
into a zip (the standard `zipfile`) in an unnamed temporary file the response then streams,
so no trial is ever held whole in memory. A redacted value never leaves: a trajectory a
redaction withheld values of is its scrubbed copy (as the ATIF download serves it), and
every other text file of a trial that has redactions is scrubbed by the same rules
(trials/ingest/redaction.py) before it is written.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson
from django.utils import timezone

from trials.export_rows import derived_atif, harbor_result, iso, trial_rewards
from trials.ingest import redaction
from trials.ingest.formats.atif import EMBEDDED_MARK
from trials.ingest.formats.benchviewer_export import EXPORT_MANIFEST, QC_ITEMS, REDACTION_MANIFEST
from trials.ingest.formats.detect import EVIDENCE_PACK_KIND
from trials.ingest.jsonio import json_bytes
from trials.models import Artifact, Blob, Pack, PackFile, RuntimeEvent, Trajectory, Trial
from trials.models.qc import QCItem
from trials.models.trial import counts_as_passed
from trials.storage.backend import open_blob
from trials.thresholds import pass_threshold, threshold_of

CHUNK = 1 << 20
HARBOR_FOLDER_PACKS = ("harbor-trial", "harbor-job")
TEXT_SUFFIXES = (".json", ".jsonl", ".txt", ".log", ".md", ".toml", ".yaml", ".yml", ".csv", ".out", ".err")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class Written:
    path: str
    size: int
    sha256: str
    source: str  # stored file | scrubbed copy | made from rows

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "source": self.source}


class ExportZip:
    """A zip being written under one top folder, noting each file's size and sha256 as it goes."""

    def __init__(self, fileobj: IO[bytes], root: str):
        self.zip = zipfile.ZipFile(fileobj, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1)
        self.root = root
        self.files: list[Written] = []

    @property
    def paths(self) -> set[str]:
        return {f.path for f in self.files}

    def add(self, path: str, chunks: Iterable[bytes], source: str) -> None:
        digest, size = hashlib.sha256(), 0
        with self.zip.open(f"{self.root}/{path}", "w", force_zip64=True) as out:
            for chunk in chunks:
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        self.files.append(Written(path, size, digest.hexdigest(), source))

    def add_json(self, path: str, value: Any, source: str = "made from rows") -> None:
        self.add(path, [json_bytes(value)], source)


def blob_chunks(blob: Blob) -> Iterator[bytes]:
    with open_blob(blob) as f:
        yield from iter(lambda: f.read(CHUNK), b"")


def export_name(trial: Trial) -> str:
    """The zip's top folder (and file name): the trial's folder name, safe in any file system."""
    folder = harbor_folder(trial)
    name = folder.rsplit("/", 1)[-1] if folder else trial.name
    return _UNSAFE.sub("-", name).strip("-.")[:120] or f"trial-{trial.pk}"


def harbor_folder(trial: Trial) -> str:
    """The pack-relative folder of a trial imported from a Harbor trial folder ("" for any other)."""
    if trial.pack is None or trial.pack.kind not in HARBOR_FOLDER_PACKS:
        return ""
    refs = trial.refs or {}
    result = refs.get("harborTrialResultRef") or ""
    if isinstance(result, str) and result.endswith("/result.json"):
        return result.removesuffix("/result.json")
    trajectory = refs.get("trajectoryRef") or ""
    return trajectory.rsplit("/agent/", 1)[0] if isinstance(trajectory, str) and "/agent/" in trajectory else ""


def write_trial_zip(trial: Trial, fileobj: IO[bytes]) -> None:
    """Write the trial's export zip into `fileobj` (left open, at its end)."""
    named = trial.redactions()
    out = ExportZip(fileobj, export_name(trial))
    trajectories = list(trial.trajectories.select_related("blob", "step_bodies").order_by("position", "pk"))
    folder = harbor_folder(trial)
    scrubbed: list[str] = []
    if folder:
        _write_folder(out, trial, folder, trajectories, named, scrubbed)
    else:
        out.add_json("result.json", harbor_result(trial))
        _write_trajectories(out, trial, trajectories)
        _write_artifacts(out, trial)
    _write_verifier(out, trial)
    _write_events(out, trial, folder)
    joined = Pack.objects.filter(other_trials=trial, kind=EVIDENCE_PACK_KIND).exists()
    if trial.documents.get("evidence_pack") and (joined or not folder):
        out.add_json("evidence-pack.json", redaction.scrub_tree(trial.documents["evidence_pack"], named))
    out.add_json("qc-items.json", {"schemaVersion": QC_ITEMS, "trial": trial.name, "items": qc_items(trial, named)})
    withheld = [out_path for t, out_path in _placed(trajectories, folder) if t.withheld]
    out.add_json("redaction-manifest.json", redaction_manifest(named, withheld, scrubbed))
    manifest = {
        "schemaVersion": EXPORT_MANIFEST,
        "trial": redaction.scrub_tree(exported_trial(trial), named),
        "exportedAt": timezone.now().isoformat(),
        "files": [f.as_dict() for f in out.files],
    }
    out.zip.writestr(f"{out.root}/export-manifest.json", json_bytes(manifest))
    out.zip.close()


def exported_trial(trial: Trial) -> dict[str, Any]:
    """What the trial is beyond its files, read back by benchviewer_export.restore: the same trial again."""
    dataset, task, configuration, job = trial.dataset, trial.task, trial.configuration, trial.job
    return {
        "id": trial.pk,
        "key": trial.key,
        "name": trial.name,
        "sourceFormat": trial.source_format,
        "status": trial.status,
        # (the threshold its status and its pass were decided at, as its pages state it: trials/thresholds.py)
        "passThreshold": pass_threshold(dataset),
        "passed": counts_as_passed(trial.status, trial.reward, threshold_of(dataset)),
        "failureCategory": trial.failure_category,
        "attempt": trial.attempt,
        "benchmark": trial.benchmark,
        "runtimeCorrelation": trial.runtime_correlation,
        "refs": trial.refs,
        "provenance": trial.provenance,
        "dataset": {"name": dataset.name, "version": dataset.version, "ref": dataset.ref} if dataset else None,
        "task": {"name": task.name, "checksum": task.checksum, "source": task.source} if task else None,
        "configuration": {
            "key": configuration.key,
            "role": configuration.role,
            "agentName": configuration.agent_name,
            "agentVersion": configuration.agent_version,
            "modelName": configuration.model_name,
            "profiles": configuration.profiles,
        }
        if configuration
        else None,
        "job": {
            "key": job.key,
            "name": job.name,
            "sourceFormat": job.source_format,
            "startedAt": iso(job.started_at),
            "finishedAt": iso(job.finished_at),
        }
        if job
        else None,
    }


def _write_folder(
    out: ExportZip,
    trial: Trial,
    folder: str,
    trajectories: list[Trajectory],
    named: dict[str, dict[str, Any]],
    scrubbed: list[str],
) -> None:
    """The trial's own files as stored; a withheld trajectory as its scrubbed copy, other texts scrubbed."""
    pack_ids = [trial.pack_id, *trial.also_in_packs.values_list("pk", flat=True)]
    rows = PackFile.objects.filter(pack_id__in=pack_ids, path__startswith=f"{folder}/").select_related("blob")
    files: dict[str, Blob] = {}
    for row in rows.order_by("path"):
        files.setdefault(row.path[len(folder) + 1 :], row.blob)
    withheld = {path: t for t, path in _placed(trajectories, folder) if t.withheld}
    for local, blob in files.items():
        if local in withheld:
            out.add(local, withheld[local].withheld_atif(), "scrubbed copy")
        elif named and local.lower().endswith(TEXT_SUFFIXES):
            data = blob.read()
            clean = redaction.scrub_file(data, named)
            if clean != data:
                scrubbed.append(local)
            out.add(local, [clean], "scrubbed copy" if clean != data else "stored file")
        else:
            out.add(local, blob_chunks(blob), "stored file")


def _placed(trajectories: list[Trajectory], folder: str) -> list[tuple[Trajectory, str]]:
    """Each trajectory with a file of its own, and where it is in the export."""
    placed = []
    for number, trajectory in enumerate(t for t in trajectories if EMBEDDED_MARK not in t.path):
        if folder:
            if trajectory.path.startswith(f"{folder}/"):
                placed.append((trajectory, trajectory.path[len(folder) + 1 :]))
            continue
        name = _UNSAFE.sub("-", trajectory.path.rsplit("/", 1)[-1].split("#", 1)[0]) or f"trajectory-{number}.json"
        main = number == 0 or trajectory.role in ("main", "step") and not placed
        taken = {path for _, path in placed}
        path = "agent/trajectory.json" if main else f"agent/{name}"
        if path in taken or (name == "trajectory.json" and not main):
            path = f"agent/{number}-{name}"
        placed.append((trajectory, path))
    return placed


def _write_trajectories(out: ExportZip, trial: Trial, trajectories: list[Trajectory]) -> None:
    for trajectory, path in _placed(trajectories, ""):
        if trajectory.withheld:
            out.add(path, trajectory.withheld_atif(), "scrubbed copy")
        elif trajectory.blob is not None:
            out.add(path, [trajectory.atif_bytes()], "stored file")
        else:
            out.add(path, [json_bytes(derived_atif(trial, trajectory))], "made from rows")


def _write_artifacts(out: ExportZip, trial: Trial) -> None:
    """A trial's artifacts (not from a Harbor folder, which has its own): their bytes and a manifest."""
    entries = []
    for artifact in Artifact.objects.filter(trial=trial).select_related("blob").order_by("pk"):
        where = (artifact.destination or artifact.source).removeprefix("/logs/artifacts/").strip("/")
        local = "/".join(_UNSAFE.sub("-", part) for part in where.split("/") if part not in ("", ".", ".."))
        if artifact.blob is not None and local:
            out.add(f"artifacts/{local}", blob_chunks(artifact.blob), "stored file")
        entries.append(
            {
                "source": artifact.source,
                "destination": local,
                "type": artifact.kind or "file",
                "status": artifact.status,
                "service": artifact.service,
            }
        )
    if entries:
        out.add_json("artifacts/manifest.json", {"artifacts": entries})


def _write_verifier(out: ExportZip, trial: Trial) -> None:
    rewards = trial_rewards(trial)
    if rewards and "verifier/reward.json" not in out.paths:
        out.add_json("verifier/reward.json", rewards)
    criteria = trial.criteria.order_by("pk").values_list("name", "score", "weight", "reasoning", "evidence_refs")
    if criteria and "verifier/reward-details.json" not in out.paths:
        details = [
            {"name": name, "score": score, "weight": weight, "reasoning": reasoning, "evidence": evidence}
            for name, score, weight, reasoning, evidence in criteria
        ]
        out.add_json("verifier/reward-details.json", {"criteria": details})


def _write_events(out: ExportZip, trial: Trial, folder: str) -> None:
    """The runtime transcript: the events its own files do not already hold (joined, or sent live)."""
    events = RuntimeEvent.objects.filter(trial=trial).order_by("sequence", "timestamp", "pk")
    if folder and trial.pack_id is not None:
        events = events.exclude(pack_id=trial.pack_id)
    rows = list(events.values_list("raw", "type", "event_id", "timestamp", "sequence", "correlation", "payload"))
    if not rows:
        return
    name = "events.jsonl" if "events.jsonl" not in out.paths else "events.export.jsonl"
    out.add(name, (orjson.dumps(_event_line(*row)) + b"\n" for row in rows), "made from rows")


def _event_line(raw, type_, event_id, timestamp, sequence, correlation, payload) -> dict[str, Any]:
    if raw:
        return raw
    return {
        "type": type_,
        "eventId": event_id,
        "timestamp": iso(timestamp),
        "sequence": sequence,
        **(correlation or {}),
        "payload": payload,
    }


def qc_items(trial: Trial, named: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The QC items citing the trial here, then those that cited it where it was exported from."""
    rows = QCItem.objects.filter(trial=trial).select_related("scenario", "failure_mode", "waived_item").order_by("pk")
    items = [
        {
            "id": item.label,
            "kind": item.kind,
            "category": item.category,
            "code": item.code,
            "severity": item.severity,
            "status": item.status,
            "stepId": item.step_id,
            "evidenceRefs": item.evidence_refs,
            "note": item.note,
            "targetName": item.target_name,
            "scenarioId": item.scenario.scenario_id if item.scenario else "",
            "failureMode": item.failure_mode.name if item.failure_mode else "",
            "reason": item.reason,
            "scope": item.scope,
            "waives": item.waived_item.label if item.waived_item else "",
            "expiresAt": iso(item.expires_at),
            "createdAt": iso(item.created_at),
        }
        for item in rows
    ]
    items += trial.documents.get("qc_items") or []  # (a trial imported before they came back as items)
    return redaction.scrub_tree(items, named)


def redaction_manifest(named: dict[str, dict[str, Any]], withheld: list[str], scrubbed: list[str]) -> dict[str, Any]:
    """What was withheld, by which policy: each redacted item (read back as a redaction), and the files it changed."""
    items = []
    for item_id, entry in sorted(named.items()):
        items.append(
            {
                "item_id": item_id,
                "redaction_state": entry.get("redaction_state") or "redacted",
                "redacted_fields": entry.get("fields") or [],
                **{k: entry[k] for k in ("reason", "policy_refs", "redaction_method", "redaction_id") if k in entry},
            }
        )
    return {
        "schemaVersion": REDACTION_MANIFEST,
        "placeholder": redaction.REDACTED,
        "items": items,
        "withheldTrajectories": withheld,
        "scrubbedFiles": scrubbed,
    }
