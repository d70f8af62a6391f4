"""Find the trial packs under a path and pick each one's parser from its content.

File names are never trusted to say what a file is: a `.json` is opened and its keys
decide. Archives are found by their magic bytes and extracted by the service. Each format's
traits (`traits_of`) are what pages and comparisons ask of a trial's format instead of its name.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from trials.ingest import context_kinds, documents
from trials.ingest.archives import DEFAULT_LIMITS, Budget, archive_kind
from trials.ingest.folders import entries_under
from trials.ingest.formats import (
    agentcontext,
    agentqc,
    agentv,
    harbor,
    harbor_parity,
    harbor_sidecars,
    harbor_trajectories,
    inspect,
    inspect_zip,
    lime,
    lime_threads,
    native_logs,
    openchrome,
    otlp,
    otlp_stream,
    terminal_bench,
)
from trials.ingest.formats.atif import looks_like_atif
from trials.ingest.jsonio import load_json, load_jsonl, without_bom
from trials.ingest.records import FormatTraits, PackError, ParsedDocument, ParsedPack, Problem
from trials.ingest.values import as_dict, as_list

# The kind of a pack that is one trial's evidence, joined to that trial when it is stored apart.
EVIDENCE_PACK_KIND = "lime-evidence-pack"


@dataclass
class Candidate:
    path: Path
    rel: str  # path as shown to the user, relative to what they imported
    kind: str  # harbor-job | harbor-trial | agentv-run | tb1-run | tb1-trial | trajectory-group | archive | file…
    trial_dirs: list[Path] = field(default_factory=list)  # harbor-job: found once, used for progress and parsing
    members: list[Path] = field(default_factory=list)  # trajectory-group: its files, trajectory.json first


def discover(path: Path, rel: str, top: bool = True) -> list[Candidate]:
    """Packs under `path`: folders that are jobs, trials or AgentV runs, else every file."""
    if path.is_symlink():
        return [Candidate(path, rel, "skipped")]
    if path.is_file():
        kind = "inspect-eval" if inspect_zip.is_eval_file(path) else "archive" if archive_kind(path) else "file"
        if kind == "file" and not top and not _looks_like_data(path):
            kind = "skipped"
        return [Candidate(path, rel, kind)]
    if not path.is_dir():
        return [Candidate(path, rel, "skipped")]
    if harbor.is_job_dir(path):
        return [Candidate(path, rel, "harbor-job", harbor.trial_dirs(path))]
    if harbor.is_trial_dir(path):
        return [Candidate(path, rel, "harbor-trial")]
    if is_agentv_run_folder(path):
        return [Candidate(path, rel, "agentv-run")]
    if terminal_bench.is_run_dir(path):
        return [Candidate(path, rel, "tb1-run")]
    if terminal_bench.is_trial_dir(path):
        return [Candidate(path, rel, "tb1-trial")]
    found: list[Candidate] = []
    children = sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    grouped: set[Path] = set()
    for group in harbor_trajectories.trajectory_groups(path):  # one trial each, as in a Harbor trial's agent/ folder
        found.append(Candidate(path, rel, "trajectory-group", members=group))
        grouped.update(group)
    children = [c for c in children if c not in grouped]
    for child in children:  # folders first, so a trial exists before an evidence pack beside it
        found.extend(discover(child, f"{rel}/{child.name}" if rel else child.name, top=False))
    return found


def skip_reason(path: Path) -> str:
    """Why `discover` passed this over, as the import's outcome line says it."""
    if path.is_symlink():
        return f"link not followed (it points to {os.readlink(path)!r})"
    if not path.is_file():
        return "not a regular file (a device, pipe or socket)"
    return "not a pack format (kept out)"


def over_the_limit(path: Path, rel: str, max_file_bytes: int, size: int | None = None) -> Problem | None:
    size = path.stat().st_size if size is None else size
    if size <= max_file_bytes:
        return None
    message = f"file is {size} bytes, over the limit of {max_file_bytes}"
    return Problem(rel, message, kept="nothing: the file was not read")


def screen_folder(folder: Path, rel: str, max_file_bytes: int) -> tuple[list[tuple[str, Path]], list[Problem]]:
    """The folder's regular files as (pack-relative path, path), and a problem for each thing left out.

    A link is never followed (it could point anywhere on this machine) and a file past the
    size limit is never read, so a pack is what its own regular files say.
    """
    kept: list[tuple[str, Path]] = []
    problems: list[Problem] = []
    for relative, entry in entries_under(folder):
        path, path_rel = Path(entry.path), f"{rel}/{relative}"
        if entry.is_symlink():
            problems.append(Problem(path_rel, skip_reason(path), kept="nothing: a link has no bytes of its own"))
        elif entry.is_file(follow_symlinks=False):
            size = entry.stat(follow_symlinks=False).st_size  # (one lstat)
            if (too_big := over_the_limit(path, path_rel, max_file_bytes, size)) is None:
                kept.append((path_rel, path))
            else:
                problems.append(too_big)
        else:
            problems.append(Problem(path_rel, skip_reason(path), kept="nothing"))
    return sorted(kept), problems


def is_agentv_run_folder(path: Path) -> bool:
    """AgentV's run bundle: summary.json beside index.jsonl (or .internal/index.jsonl)."""
    return (path / "summary.json").is_file() and (
        (path / "index.jsonl").is_file() or (path / ".internal" / "index.jsonl").is_file()
    )


def _looks_like_data(path: Path) -> bool:
    with open(path, "rb") as f:
        head = without_bom(f.read(64)).lstrip()
    return head[:1] in (b"{", b"[") or path.suffix == ".toml"


def parse_candidate(candidate: Candidate, budget: Budget | None = None) -> ParsedPack:
    """The candidate's pack; archive-like members (an `.eval`'s) are read under `budget`: the upload's limits."""
    if candidate.kind == "harbor-job":
        return harbor.parse_job_dir(candidate.path, candidate.rel, candidate.trial_dirs)
    if candidate.kind == "harbor-trial":
        return harbor.parse_single_trial(candidate.path, candidate.rel)
    if candidate.kind == "agentv-run":
        return agentv.parse_run_folder(candidate.path, candidate.rel)
    max_rows = (budget.limits if budget else DEFAULT_LIMITS).max_run_rows
    if candidate.kind == "tb1-run":
        return terminal_bench.parse_run_dir(candidate.path, candidate.rel, max_rows)
    if candidate.kind == "tb1-trial":
        return terminal_bench.parse_trial_folder(candidate.path, candidate.rel)
    if candidate.kind == "inspect-eval":  # a ZIP read member by member, never extracted
        return inspect.parse_eval(candidate.path, candidate.rel, budget)
    if candidate.kind == "trajectory-group":
        return harbor_trajectories.parse_trajectory_group(candidate.members, candidate.rel)
    return parse_file(candidate.path, candidate.rel, max_rows)


def parse_file(path: Path, rel: str, max_run_rows: int = DEFAULT_LIMITS.max_run_rows) -> ParsedPack:
    """One file (its size already checked against the limit, by `screen_folder` or the service)."""
    size = path.stat().st_size
    if size == 0:
        raise PackError(Problem(rel, "empty file", kept="nothing"))
    if harbor_trajectories.sniff_trajectory(path):  # parsed once, by the trajectory reader (streaming when big)
        return harbor_trajectories.parse_lone_trajectory(path, rel)
    if inspect.sniff_json_log(path):  # read sample by sample (streamed when big), not loaded here
        return inspect.parse_json_log(path, rel)
    if terminal_bench.sniff_big_results(path):  # a big TB1 results.json: streamed row by row
        return terminal_bench.parse_results_path(path, rel, max_run_rows)
    if otlp_stream.sniff(path) and (streamed := otlp_stream.parse_path(path, rel)) is not None:
        return streamed  # a big OTLP file: read in passes, never whole
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise PackError(Problem(rel, "UTF-16 text: JSON files must be UTF-8 (RFC 8259)", kept="the raw bytes"))
    stripped = without_bom(head).lstrip()
    if stripped[:1] not in (b"{", b"["):
        if path.suffix == ".toml" or b"[" in head[:200] or b"=" in head[:200]:
            try:
                return harbor_trajectories.parse_task_toml(path, rel)
            except PackError:
                pass
        raise PackError(
            Problem(rel, f"not a recognised trial pack format (one of: {known_formats()})", kept="the raw bytes")
        )
    noticed: list[Problem] = []
    try:
        data = load_json(path, rel, noticed)
    except PackError as exc:
        rows, problems = load_jsonl(path, rel)
        if len(rows) < 2 and not (rows and problems == []):
            raise exc
        return parse_rows(rows, problems, rel)
    try:
        pack = parse_json(data, path, rel, max_run_rows)
    except PackError as exc:
        exc.noticed[:0] = noticed
        raise
    pack.problems[:0] = noticed
    return pack


class JsonFile(NamedTuple):
    """A JSON document read whole, as a parser of JSON_FORMATS is given it."""

    data: Any
    path: Path
    rel: str  # the file as the user names it
    max_run_rows: int  # the upload's limit on a results file's rows


@dataclass(frozen=True)
class JsonFormat:
    """A format a JSON document may be: `recognises` it by its keys; `parse` makes its pack, or None (not ours)."""

    name: str  # as the rejection message names it to the user
    recognises: Callable[[Any], bool]
    parse: Callable[[JsonFile], ParsedPack | None]


def _any(data: Any) -> bool:
    return True  # (a parser that tells its own documents apart as it reads them)


# Every format a whole JSON document can be, tried in this order, the first that takes it wins. A new
# format adds its entry here (CONTRIBUTING.md); what it sets on its records, the writer reads.
JSON_FORMATS: list[JsonFormat] = [
    JsonFormat("ATIF trajectory", looks_like_atif, lambda f: harbor_trajectories.parse_lone_trajectory(f.path, f.rel)),
    JsonFormat("Terminal-Bench 1 results", _any, lambda f: terminal_bench.parse(f.data, f.path, f.rel, f.max_run_rows)),
    JsonFormat("Inspect AI log", inspect.is_json_log, lambda f: inspect.parse_json_log(f.path, f.rel)),
    JsonFormat(
        "Harbor trial result",
        harbor.is_trial_result,
        lambda f: harbor.parse_single_trial(
            f.path.parent, f.rel.rsplit("/", 1)[0] if "/" in f.rel else f.path.parent.name
        ),
    ),
    JsonFormat("Harbor job result", harbor.is_job_result, lambda f: harbor.parse_job_result_file(f.data, f.rel)),
    JsonFormat("Harbor job config", harbor.is_job_config, lambda f: _job_config(f.data, f.rel)),
    JsonFormat("Harbor trial lock", harbor.is_trial_lock, lambda f: _document("harbor-trial-lock", f.rel, f.data, {})),
    JsonFormat("CTRF report", harbor.is_ctrf_report, lambda f: _ctrf_report(f.data, f.rel)),
    JsonFormat(
        "Lime evidence pack",
        lime.is_evidence_pack,
        lambda f: ParsedPack(kind=EVIDENCE_PACK_KIND, trials=[lime.parse_evidence_pack(f.data, f.rel)], trial_count=1),
    ),
    JsonFormat("Lime runtime event", lime.is_runtime_event, lambda f: lime.parse_event_file(f.data, f.rel)),
    JsonFormat(
        "Lime thread snapshot",
        lime_threads.is_thread_snapshot,
        lambda f: ParsedPack(
            kind="lime-thread-snapshot", documents=[lime_threads.parse_thread_snapshot(f.data, f.rel)]
        ),
    ),
    JsonFormat(
        "JSON Schema",
        documents.is_json_schema,
        lambda f: ParsedPack(kind="json-schema", documents=[documents.parse_json_schema(f.data, f.rel)]),
    ),
    JsonFormat(
        "Agent Context record or event",
        lambda data: context_kinds.is_context_event(data) or context_kinds.is_context_record(data),
        lambda f: agentcontext.parse_context_document(f.data, f.rel),
    ),
    JsonFormat("Agent QC document", _any, lambda f: agentqc.parse(f.data, f.rel)),
    JsonFormat("OpenChrome envelope", openchrome.is_envelope, lambda f: openchrome.parse_envelope(f.data, f.rel)),
    JsonFormat(
        "OpenChrome headline gates",
        openchrome.is_headline_gates,
        lambda f: ParsedPack(
            kind="openchrome-headline-gates", documents=[openchrome.parse_headline_gates(f.data, f.rel)]
        ),
    ),
    JsonFormat("AgentV results", agentv.is_result_row, lambda f: agentv.parse_rows([(1, f.data)], f.rel)),
    JsonFormat(
        "AgentV results",
        lambda data: isinstance(data, list) and bool(data) and all(agentv.is_result_row(r) for r in data),
        lambda f: agentv.parse_rows(list(enumerate(f.data, start=1)), f.rel),
    ),
    JsonFormat("OTLP traces", otlp.is_otlp, lambda f: otlp.parse(f.data, f.rel)),
    JsonFormat(
        "Harbor traces export",
        harbor_trajectories.is_traces_export,
        lambda f: harbor_trajectories.parse_traces_export(f.data, f.rel),
    ),
    JsonFormat(
        "mini-swe-agent trajectory",
        native_logs.is_mini_swe_agent,
        lambda f: native_logs.parse_mini_swe_agent(f.data, f.rel),
    ),
    JsonFormat(
        "gemini-cli session",
        native_logs.is_gemini_cli_session,
        lambda f: native_logs.parse_gemini_cli_session(f.data, f.rel),
    ),
    JsonFormat(
        "Harbor parity experiment", harbor_parity.is_parity_experiment, lambda f: harbor_parity.parse(f.data, f.rel)
    ),
]

# What each format's module declares of its trials and jobs (a source format not here declares nothing).
FORMAT_TRAITS: dict[str, FormatTraits] = {
    traits.source_format: traits
    for traits in (
        harbor.TRAITS,
        terminal_bench.TRAITS,
        openchrome.TRAITS,
        agentv.TRAITS,
        lime.TRAITS,
        agentqc.TRAITS,
        inspect.TRAITS,
        otlp.TRAITS,
    )
}


def traits_of(source_format: str) -> FormatTraits:
    """The traits a trial's or job's format declares: what pages and comparisons ask instead of its name."""
    return FORMAT_TRAITS.get(source_format) or FormatTraits(source_format)


def known_formats() -> str:
    """Every format a file can be, as a rejection names them (read from JSON_FORMATS, so none is left out)."""
    names = dict.fromkeys(f.name for f in JSON_FORMATS)
    return "; ".join([*names, "Inspect AI .eval archive", "Harbor task.toml", "zip or tar archive of these"])


def parse_json(data: Any, path: Path, rel: str, max_run_rows: int = DEFAULT_LIMITS.max_run_rows) -> ParsedPack:
    """The pack of the first of JSON_FORMATS that takes the document."""
    for candidate in JSON_FORMATS:
        if (
            candidate.recognises(data)
            and (pack := candidate.parse(JsonFile(data, path, rel, max_run_rows))) is not None
        ):
            return pack
    raise PackError(Problem(rel, f"JSON of no known pack format (one of: {known_formats()})", kept="the raw bytes"))


def _job_config(data: Any, rel: str) -> ParsedPack:
    counts = {"agents": len(as_list(data.get("agents"))), "datasets": len(as_list(data.get("datasets")))}
    return _document("harbor-job-config", rel, data, counts)


def _ctrf_report(data: Any, rel: str) -> ParsedPack:
    summary = as_dict(data["results"].get("summary"))
    counts = {k: v for k in ("tests", "passed", "failed") if isinstance(v := summary.get(k), int)}
    return _document("ctrf-report", rel, data, counts)


def parse_rows(rows: list[tuple[int, Any]], problems: list[Problem], rel: str) -> ParsedPack:
    if not rows:
        raise PackError(problems[0] if problems else Problem(rel, "no JSON lines"))
    first = rows[0][1]
    if agentv.is_result_row(first):
        pack = agentv.parse_rows(rows, rel)
    elif lime.is_runtime_event(first) or context_kinds.is_context_event(first):
        pack = events_pack(rows, rel)
    else:
        raise PackError(
            Problem(
                rel,
                "JSON lines of no known format (AgentV rows, runtime or context events)",
                line=rows[0][0],
                kept="the raw bytes",
            )
        )
    pack.problems = problems + pack.problems
    return pack


def events_pack(rows: list[tuple[int, Any]], rel: str) -> ParsedPack:
    events, records, problems = harbor_sidecars.read_event_lines(rows, rel)
    return ParsedPack(kind="runtime-events", events=events, context_records=records, problems=problems)


def _document(kind: str, rel: str, data: Any, counts: dict[str, int]) -> ParsedPack:
    return ParsedPack(kind=kind, documents=[ParsedDocument(kind=kind, path=rel, data=data, counts=counts)])
