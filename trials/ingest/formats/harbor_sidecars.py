"""What sits beside a trial in its Harbor folder: a Lime evidence pack JSON, runtime and
context event JSONL files, context documents. They are joined to the trial by content,
not by file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from trials.ingest import context_kinds
from trials.ingest.evidence import join_evidence_pack
from trials.ingest.formats import agentcontext, benchviewer_export, lime
from trials.ingest.formats.harbor_trajectories import sniff_trajectory
from trials.ingest.jsonio import load_json, load_jsonl
from trials.ingest.records import (
    PackError,
    ParsedContextRecord,
    ParsedEvent,
    ParsedTrial,
    Problem,
)


def read_sidecars(trial: ParsedTrial, trial_dir: Path, rel: str, listing: list[Path]) -> None:
    """Evidence packs and event files anywhere in the trial folder (`listing`: its files), joined by content.

    Sets the redactions found in them, in its other JSON files and in its artifacts
    (`context_kinds.redactions_in`): a redaction covers its item in every file of the trial.

    The packs are joined last, once the trial's own files have set its refs.
    """
    known = {"result.json", "config.json", "lock.json"}
    packs = []
    documents = []  # (a redaction may be in any of them: a context file, an evidence pack's `redactions`)
    in_artifacts = []  # (read for redactions only: most trials have a manifest there)
    for path in (p for p in listing if p.name.endswith(".json")):
        local = path.relative_to(trial_dir).as_posix()
        if (
            local in known
            or path.name.startswith("trajectory")
            or ({"agent", "user-agent"} & set(local.split("/")[:-1]) and sniff_trajectory(path))  # read as one
            or "/verifier/" in f"/{local}"
        ):
            continue
        if path.parent.name == "artifacts":  # an artifact (the manifest's), kept as one: read for redactions only
            if path.stat().st_size < TEXT_LIMIT:
                in_artifacts.append(_json_or_none(path))
            continue
        try:
            data = load_json(path, f"{rel}/{local}", trial.problems)
        except PackError as exc:
            trial.problems.append(exc.problem)
            continue
        documents.append(data)
        if benchviewer_export.export_kind(data):  # a Benchviewer export's own files (trials/export.py)
            benchviewer_export.read_export_file(trial, data, trial_dir, rel, local)
        elif lime.is_evidence_pack(data):
            packs.append((lime.parse_evidence_pack(data, f"{rel}/{local}"), f"{rel}/{local}"))
        elif path.stat().st_size < TEXT_LIMIT:
            trial.documents.setdefault("other", {})[local] = data
    event_files = []
    for path in (p for p in listing if p.name.endswith(".jsonl")):
        local = path.relative_to(trial_dir).as_posix()
        rows, problems = load_jsonl(path, f"{rel}/{local}")
        trial.problems.extend(problems)
        event_files.append((rows, f"{rel}/{local}"))
    # A redaction covers its item in every file of the trial, its artifacts too, which the stage never sees.
    named = context_kinds.redactions_in([row for rows, _ in event_files for _, row in rows] + documents + in_artifacts)
    for rows, file in event_files:
        read_event_rows(trial, rows, file, named)
    for pack, pack_rel in packs:
        join_evidence_pack(trial, pack, pack_rel, lambda local: own_file(trial, local))
    trial.redactions, trial.carries_context = named, bool(named or event_files or documents)


def own_file(trial: ParsedTrial, local: str) -> str | None:
    """The trial's file named `local` (a path inside its folder), the shallowest if several."""
    return min((path for path in trial.files if path.endswith(f"/{local}")), key=len, default=None)


def _json_or_none(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def read_event_lines(
    rows: list[tuple[int, Any]], rel: str, named: dict[str, dict[str, Any]] | None = None
) -> tuple[list[ParsedEvent], list[ParsedContextRecord], list[Problem]]:
    """Runtime and context events of one JSONL file, whichever kinds it mixes.

    `named`: the redactions of every file of the trial (`context_kinds.redactions_in`);
    without it, the file's own, which apply to items on any of its lines."""
    named = context_kinds.redactions_in([r for _, r in rows]) if named is None else named
    events, problems = lime.parse_event_rows([(n, r) for n, r in rows if lime.is_runtime_event(r)], rel)
    records = [r for event in events for r in agentcontext.context_records_from_runtime_event(event, named=named)]
    context_rows = [(n, r) for n, r in rows if context_kinds.is_context_event(r)]
    if context_rows:
        context_records, context_problems = agentcontext.parse_context_rows(context_rows, rel, named)
        records += context_records
        problems += context_problems
    for number, row in rows:
        if not lime.is_runtime_event(row) and not context_kinds.is_context_event(row):
            problems.append(
                Problem(
                    rel,
                    "line is neither a runtime event nor a context event",
                    line=number,
                    severity="warning",
                    kept="the raw bytes",
                )
            )
    return events, records, problems


def read_event_rows(
    trial: ParsedTrial, rows: list[tuple[int, Any]], rel: str, named: dict[str, dict[str, Any]] | None = None
) -> None:
    events, records, problems = read_event_lines(rows, rel, named)
    trial.events = every_event = [*trial.events, *events]
    trial.context_records.extend(records)
    trial.problems.extend(problems)
    if events:
        trial.permissions = lime.permissions_from_events(every_event)
        trial.present.add("runtime_events")
        trial.refs.setdefault("runtimeTranscriptRef", rel)
        for event in events:
            if trial.attempt is None:
                trial.attempt = lime.attempt_of(event)
            category = (event.payload or {}).get("failureCategory")
            if event.type == lime.TRIAL_FAILED and category and category != "none":
                trial.failure_category = str(category)
    if records:
        trial.present.add("context_records")


TEXT_LIMIT = 256 * 1024  # logs beyond this stay in the raw bytes and are downloaded whole


def read_log_text(path: Path, rel: str) -> str:
    """A log file's text up to TEXT_LIMIT bytes, saying where the rest is when it is longer."""
    with open(path, "rb") as f:
        data = f.read(TEXT_LIMIT + 1)
    text = data[:TEXT_LIMIT].decode("utf-8", "replace")
    if len(data) > TEXT_LIMIT:
        text += f"\n… [truncated at {TEXT_LIMIT} bytes; download {rel} for the rest]"
    return text
