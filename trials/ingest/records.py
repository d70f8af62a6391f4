"""Plain data that parsers produce and the import service writes. No Django here.

A parser reads files of one input format and returns a `ParsedPack`. Nothing it
reads is dropped: whatever has no column of its own stays in a `raw`/`extra` dict,
and every file's bytes are stored by the service before parsing starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# A trial passes when its headline reward reaches full marks (Harbor rewards are 0..1), unless its dataset
# sets its own threshold (Dataset.pass_reward, trials/thresholds.py): none of the formats read carries one.
PASS_REWARD = 1.0
DECIDED_BY_REWARD = ("passed", "partial", "failed")  # the statuses a reward decides, and a threshold re-decides


def status_from_reward(reward: float | None, threshold: float = PASS_REWARD) -> str:
    """A trial's status from its headline reward alone, the one rule every format that scores by reward
    follows: passed at the threshold, partial above 0 (a score, not a failure), failed at 0 or below;
    unknown without a reward."""
    if reward is None:
        return "unknown"
    return "passed" if reward >= threshold else ("partial" if reward > 0 else "failed")


def status_at(status: str, reward: float | None, threshold: float) -> str:
    """A status its reward decided, decided again at a dataset's pass threshold; any other status
    (errored, timeout, unknown, running...) or no reward: as it was."""
    if reward is None or status not in DECIDED_BY_REWARD:
        return status
    return status_from_reward(reward, threshold)


@dataclass
class Problem:
    """Something wrong with the input: where it is, what it is, and what was kept."""

    file: str
    message: str
    json_path: str = ""
    line: int | None = None
    severity: str = "error"  # "error" rejects the file or trial, "warning" keeps it flagged
    kept: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "json_path": self.json_path,
            "line": self.line,
            "severity": self.severity,
            "message": self.message,
            "kept": self.kept,
        }


class PackError(Exception):
    """The whole file cannot be read as the format it claims to be."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem
        self.noticed: list[Problem] = []  # found in the file before it was rejected (keys written twice, ...)


@dataclass
class DatasetRef:
    name: str
    version: str = ""
    ref: str = ""
    # a run that names no dataset: the stored versioned dataset holding all these tasks names it (imports/rows.py)
    task_ids: tuple[str, ...] = ()


@dataclass
class ConfigurationRef:
    key: str
    role: str = ""  # baseline | candidate | control | ""
    agent_name: str = ""
    agent_version: str = ""
    model_name: str = ""
    profiles: dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskRef:
    name: str
    checksum: str = ""
    source: str = ""  # where the task definition lives (path, git url, package)
    definition: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedToolCall:
    tool_call_id: str
    function_name: str
    arguments: Any
    skill: dict[str, Any] = field(default_factory=dict)  # the agent skill it loads, reads or runs (`extra.skill`)


@dataclass
class ParsedObservation:
    source_call_id: str | None
    content_text: str  # text of every text part, for search and previews
    content_size: int
    subagent_refs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ParsedStep:
    index: int  # position in the file, 0-based
    step_id: Any
    source: str
    timestamp: datetime | None
    model_name: str
    message_text: str
    reasoning: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    cost_usd: float | None
    is_copied_context: bool
    llm_call_count: int | None
    context_management: str  # compaction | pruning | injection | ""
    tool_calls: list[ParsedToolCall]
    observations: list[ParsedObservation]
    raw: dict[str, Any]  # the step exactly as it was in the file
    skill: str = ""  # the agent skill it ran within (`extra.skill.name`, as the OTLP parser writes it)
    span: tuple[int, int] | None = None  # (offset, size) of its JSON in the file, when known (atif.step_spans)


def read_all(steps: Iterable[ParsedStep]) -> Iterable[ParsedStep]:
    """The steps as a list; if reading them fails, steps that replay the failure where it happened."""
    read: list[ParsedStep] = []
    try:
        read.extend(steps)
    except Exception as exc:  # (a bug on one trial's data: the import reports it for that trial alone)
        return _replay(read, exc)
    return read


def _replay(steps: list[ParsedStep], exc: Exception) -> Iterator[ParsedStep]:
    yield from steps
    raise exc


@dataclass
class ParsedTrajectory:
    path: str  # pack-relative path of the file
    role: str  # main | continuation | subagent | user-agent | step
    schema_version: str
    session_id: str
    trajectory_id: str
    agent: dict[str, Any]
    final_metrics: dict[str, Any] | None
    header: dict[str, Any]  # every root key except steps
    steps: Iterable[ParsedStep]  # may be a lazy generator over a huge file
    problems: list[Problem]  # filled while `steps` is consumed
    step_name: str = ""  # multi-step tasks: steps/<name>/
    steps_in_file: bool = False  # every step has its span in the file
    streamed: bool = False  # `steps` reads the file as it goes (too big to hold in memory)
    withheld: bool = False  # a redaction withheld values of its header or steps (redaction.withhold_redacted)
    # (JSON path, ref) of each observation's subagent_trajectory_ref, filled while `steps` is consumed
    subagent_refs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class ParsedCriterion:
    name: str
    score: float | None
    weight: float | None = None
    reasoning: str = ""
    evidence_refs: list[Any] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedArtifact:
    source: str
    destination: str = ""
    kind: str = "file"
    status: str = ""
    service: str = ""
    path: str = ""  # pack-relative path of the stored file, when it is in the pack
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedEvent:
    """A runtime event: `benchmark.*`, `tool.*`, `action.*`, `permission.*`, `context.*`..."""

    type: str
    event_id: str
    timestamp: datetime | None
    sequence: int | None
    correlation: dict[str, str]  # sessionId, threadId, turnId, taskId, runId, stepId, toolCallId…
    payload: dict[str, Any]
    refs: dict[str, Any]
    raw: dict[str, Any]
    file: str = ""
    line: int | None = None


@dataclass
class ParsedPermission:
    action_id: str
    tool_call_id: str = ""
    step_id: str = ""
    action_type: str = ""
    tool_name: str = ""
    scope: dict[str, Any] = field(default_factory=dict)
    prompt: str = ""
    decision: str = "pending"  # approve | deny | edit | pending
    decided_by: str = ""
    reason: str = ""
    side_effect_after_denial: bool = False
    requested_at: datetime | None = None
    resolved_at: datetime | None = None
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedContextRecord:
    """An Agent Context fact. `data` never holds a redacted raw value."""

    kind: str  # envelope | item | selection | budget | assembly | injection | compaction | missing | redaction | event
    record_id: str
    context_id: str = ""
    status: str = ""  # selected | omitted | compacted | missing | redacted | ""
    reason: str = ""
    redaction_state: str = ""
    correlation: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedTrial:
    key: str  # natural key, unique across imports: re-importing the same trial is a no-op
    source_format: str  # harbor | lime | agentv | openchrome | agentqc | ... (each parser names its own)
    name: str
    dataset: DatasetRef | None = None
    task: TaskRef | None = None
    configuration: ConfigurationRef | None = None
    job_key: str = ""
    attempt: int | None = None
    status: str = ""  # passed | failed | errored | timeout | skipped | running | unknown
    reward: float | None = None  # the headline key, conventionally "reward"
    rewards: dict[str, Any] = field(default_factory=dict)
    exception_type: str = ""
    exception_message: str = ""
    exception_traceback: str = ""
    failure_category: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {started_at, finished_at, seconds}
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    benchmark: dict[str, Any] = field(default_factory=dict)
    runtime_correlation: dict[str, Any] = field(default_factory=dict)
    refs: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)  # result.json, config.json, lock.json… parsed
    texts: dict[str, str] = field(default_factory=dict)  # trial.log, exception.txt, test-stdout.txt… (path -> text)
    trajectories: list[ParsedTrajectory] = field(default_factory=list)
    criteria: list[ParsedCriterion] = field(default_factory=list)
    artifacts: list[ParsedArtifact] = field(default_factory=list)
    # (a lazy generator for a big Inspect sample's approvals and sandbox calls: read as they are written)
    events: Iterable[ParsedEvent] = field(default_factory=list)
    permissions: Iterable[ParsedPermission] = field(default_factory=list)
    context_records: list[ParsedContextRecord] = field(default_factory=list)
    ctrf_tests: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # pack-relative paths that belong to this trial
    files_sha256: str = ""  # set by the import (trials.imports.service.files_sha256), not by a parser
    present: set[str] = field(default_factory=set)  # evidence parts seen: trajectory, reward_details, manifest…
    problems: list[Problem] = field(default_factory=list)
    # What a Benchviewer export's manifest says the trial was (benchviewer_export.restore), and the
    # QC items that cited it there: written back as triage items, not kept as a document.
    exported: dict[str, Any] = field(default_factory=dict)
    qc_items: list[dict[str, Any]] = field(default_factory=list)
    # What its format says of it, so the writer names no format: its files hold it alone (a Harbor
    # folder, a Lime pack; an AgentV file holds many), their digest telling a re-import from other
    # bytes; it is evidence of a trial stored apart (a Lime pack), joined to that trial by name.
    files_are_its_own: bool = False
    joins_stored_trial: bool = False
    # It is trajectory files alone, with no trial folder: a trial imported with their folder later replaces it.
    trajectory_files_alone: bool = False
    # The items a redaction in its files withholds (item id -> its entry, redaction.collect_redactions), as
    # found: its values are withheld from every field here by one stage (redaction.withhold_redacted).
    redactions: dict[str, dict[str, Any]] = field(default_factory=dict)
    carries_context: bool = False  # context files or events beside it: an item marked redacted in place may be anywhere
    # A live OTLP trial's spans as received (otlp.Span's fields), kept until its trace ends: withheld as the rest.
    received_spans: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class FormatTraits:
    """What a format's trials and jobs carry, declared by its module and read through one registry
    (formats.detect.traits_of), so pages, the writer and comparisons ask this and never its name."""

    source_format: str
    lime_evidence: bool = False  # its trials are Lime evidence: the completeness checks are theirs
    task_checks: bool = False  # its jobs may hold a checker's verdicts on their tasks (`harbor check`)
    job_config_whole: bool = False  # a job's config is kept as written, every field
    recording_texts: bool = False  # its terminal recordings are also read as text in the log tabs
    envelope_results: bool = False  # its job's `results` rows: those not trials shown; mocks never headline
    leaderboard_rule: str = ""  # its leaderboard's own rule where it differs from ours (unscored left out)
    comparison_report: str = ""  # the report a comparison adds for it (comparisons.statistics.format_reports)
    # its trials' pass / partial / fail comes from their headline reward alone: a dataset's pass threshold
    # decides it again (never a verdict the format gave otherwise: AgentV's assertions, a QC verdict)
    status_by_reward: bool = False


@dataclass
class ParsedJob:
    key: str
    name: str
    source_format: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    config: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # claimEligibility, summary.json, experiment…
    started_as_written: str = ""  # a start with no time zone: shown as written, never read as UTC
    # Keys the same job was stored under before its id was known (a Harbor job by its name): adopted, not doubled.
    earlier_keys: tuple[str, ...] = ()
    # The id its trials name it by (a Harbor trial's `config.job_id`): those stored before it join it.
    trials_name_it_as: str = ""


@dataclass
class ParsedDocument:
    """A file that is evidence but not a trial: QC manifests, verdicts, schemas, task.toml…"""

    kind: str
    path: str
    title: str = ""
    data: Any = None
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class ParsedPack:
    kind: str  # the detected format
    jobs: list[ParsedJob] = field(default_factory=list)
    trials: Iterable[ParsedTrial] = field(default_factory=list)  # may be lazy
    documents: list[ParsedDocument] = field(default_factory=list)
    events: list[ParsedEvent] = field(default_factory=list)  # not tied to a trial of this pack
    context_records: list[ParsedContextRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    trial_count: int | None = None  # when known up front, for progress
    redactions: dict[str, dict[str, Any]] = field(default_factory=dict)  # for its events and records, as a trial's

    def iter_trials(self) -> Iterator[ParsedTrial]:
        yield from self.trials
