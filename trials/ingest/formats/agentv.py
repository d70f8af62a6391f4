"""AgentV results: flat JSONL rows and run folders (summary.json + index.jsonl).

Rows are snake_case; older rows use camelCase aliases, normalised here exactly as
AgentV's own boundary does (packages/core/src/evaluation/result-row-schema.ts). An
AgentV `score` is 0..1 and stays a score; it is also the trial's headline reward.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trials.ingest.formats.agentv_messages import OUTPUT_MARK, aliases, normalize_message, output_trajectory
from trials.ingest.formats.harbor_sidecars import read_log_text
from trials.ingest.jsonio import load_json, load_jsonl
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    FormatTraits,
    PackError,
    ParsedCriterion,
    ParsedJob,
    ParsedPack,
    ParsedTrial,
    Problem,
    TaskRef,
    status_from_reward,
)
from trials.ingest.values import (
    as_dict,
    as_list,
    comparable_times,
    parse_time,
    pick,
    to_count,
    to_float,
    to_int,
    to_str,
)

TRAITS = FormatTraits("agentv", comparison_report="agentv")  # (`agentv compare`)
_ROW_ALIASES = {
    "answerPath": "answer_path",
    "resultDir": "result_dir",
    "conversationId": "conversation_id",
    "costUsd": "cost_usd",
    "durationMs": "duration_ms",
    "endTime": "end_time",
    "evalPath": "eval_path",
    "metricsPath": "metrics_path",
    "executionStatus": "execution_status",
    "failureReasonCode": "failure_reason_code",
    "failureStage": "failure_stage",
    "filesPath": "files_path",
    "gradersPath": "graders_path",
    "gradingPath": "grading_path",
    "inputPath": "input_path",
    "outputPath": "output_path",
    "rawProviderLogPath": "raw_provider_log_path",
    "responsePath": "response_path",
    "startTime": "start_time",
    "summaryPath": "summary_path",
    "targetsPath": "targets_path",
    "taskDir": "task_dir",
    "testId": "test_id",
    "timingPath": "timing_path",
    "tokenUsage": "token_usage",
    "tracePath": "trace_path",
    "transcriptPath": "transcript_path",
    "transcriptRawPath": "transcript_raw_path",
    "workspacePath": "workspace_path",
    # seen in other camelCase producers of the same rows
    "sampleIndex": "sample_index",
    "retryIndex": "retry_index",
    "runId": "run_id",
    "targetErrorKind": "target_error_kind",
    "projectionIdentity": "projection_identity",
    "artifactPointers": "artifact_pointers",
}
_TRACE_ALIASES = {
    "costUsd": "cost_usd",
    "durationMs": "duration_ms",
    "errorCount": "error_count",
    "eventCount": "event_count",
    "llmCallCount": "llm_call_count",
    "tokenUsage": "token_usage",
    "toolCalls": "tool_calls",
    "toolDurations": "tool_durations",
    "toolNames": "tool_names",
    "toolCallsByName": "tool_calls_by_name",
}
# Row fields that describe where a case came from; copied into provenance.
_PROVENANCE_KEYS = (
    "eval_path",
    "experiment",
    "tags",
    "provenance",
    "projection_identity",
    "suite",
    "dataset",
    "variant",
    "category",
    "execution_status",
    "target_error_kind",
    "failure_stage",
    "failure_reason_code",
    "conversation_id",
    "timestamp",
    "sample_index",
    "retry_index",
)

_UNSAFE_KEY_CHARS = re.compile(r"\s+")

# ---------------------------------------------------------------- normalisation


def normalize_row(obj: dict[str, Any]) -> dict[str, Any]:
    row = aliases(obj, _ROW_ALIASES)
    if isinstance(row.get("trace"), dict):
        trace = aliases(row["trace"], _TRACE_ALIASES)
        if isinstance(trace.get("messages"), list):
            trace["messages"] = [normalize_message(m) for m in trace["messages"]]
        row["trace"] = trace
    if isinstance(row.get("output"), list):
        row["output"] = [normalize_message(m) for m in row["output"]]
    return row


def is_result_row(obj: Any) -> bool:
    if not isinstance(obj, dict) or not (obj.get("test_id") or obj.get("testId")):
        return False
    return to_float(obj.get("score")) is not None or pick(obj, "execution_status", "executionStatus") is not None


# ---------------------------------------------------------------- one row


def _criteria(row: dict[str, Any]) -> list[ParsedCriterion]:
    criteria = []
    for entry in as_list(row.get("assertions")):
        if isinstance(entry, dict):
            passed = entry.get("passed")
            evidence = entry.get("evidence")
            criteria.append(
                ParsedCriterion(
                    name=to_str(pick(entry, "text", "name")),
                    score=None if passed is None else float(bool(passed)),
                    reasoning=to_str(evidence) if isinstance(evidence, str) else "",
                    evidence_refs=[] if evidence is None else [evidence],
                    raw=entry,
                )
            )
    # Rows before 2026-03 listed hits/misses instead of assertions.
    for key, score in (("hits", 1.0), ("misses", 0.0)):
        for entry in as_list(row.get(key)):
            criteria.append(ParsedCriterion(name=to_str(entry), score=score, raw={"list": key, "text": entry}))
    return criteria


def _status(row: dict[str, Any], score: float | None, criteria: list[ParsedCriterion]) -> str:
    """AgentV's own verdict where it gives one (`execution_status`: an execution error, a quality
    failure); passed when every assertion/hit passed; else its score decides, by the rule every format
    scoring by reward follows (AgentV documents no pass threshold): partial between 0 and 1."""
    verdict = row.get("execution_status")
    if verdict == "execution_error":
        return "errored"
    if verdict == "quality_failure":
        return "failed"
    if criteria and all(c.score == 1.0 for c in criteria):
        return "passed"
    return "failed" if score is None else status_from_reward(score)


def _rewards(row: dict[str, Any], score: float | None) -> dict[str, Any]:
    rewards: dict[str, Any] = {} if score is None else {"score": score}
    for grader in row.get("scores") or []:
        if isinstance(grader, dict) and grader.get("name") is not None:
            rewards.setdefault(to_str(grader["name"]), to_float(grader.get("score")))
    return rewards


def _provenance(row: dict[str, Any]) -> dict[str, Any]:
    metadata = as_dict(row.get("metadata"))
    provenance = dict(metadata)  # source_commit, test_patch, … pass through untouched
    for key in _PROVENANCE_KEYS:
        if key in row:
            if key in provenance and provenance[key] != row[key]:
                provenance[f"metadata.{key}"] = provenance[key]
            provenance[key] = row[key]
    return provenance


def _tokens(row: dict[str, Any], trace: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    usage = trace.get("token_usage") or row.get("token_usage") or {}
    if not isinstance(usage, dict):
        return None, None, None
    return (
        to_count(pick(usage, "input", "input_tokens", "prompt_tokens")),
        to_count(pick(usage, "output", "output_tokens", "completion_tokens")),
        to_count(pick(usage, "cached", "cache_read", "cached_tokens", "cache_read_tokens")),
    )


def _key_part(value: Any) -> str:
    return _UNSAFE_KEY_CHARS.sub("_", to_str(value))


def _trial(obj: dict[str, Any], line: int, path: str, job_key: str, run: str, problems: list[Problem]) -> ParsedTrial:
    row = normalize_row(obj)
    trace = as_dict(row.get("trace"))
    score = to_float(row.get("score"))
    test_id = to_str(row.get("test_id"))
    target = to_str(row.get("target"))
    criteria = _criteria(row)
    duration_ms = to_float(pick(row, "duration_ms") or trace.get("duration_ms"))
    input_tokens, output_tokens, cached_tokens = _tokens(row, trace)
    key = ":".join(
        _key_part(p)
        for p in (
            "agentv",
            run,
            test_id,
            target,
            to_int(row.get("sample_index")) or 0,
            to_int(row.get("retry_index")) or 0,
        )
    )
    where = f"line {line}"
    error = row.get("error")
    return ParsedTrial(
        key=key,
        source_format="agentv",
        name=test_id,
        dataset=DatasetRef(to_str(pick(row, "suite", "dataset", "eval_path")) or "agentv"),
        task=TaskRef(test_id, source=to_str(row.get("eval_path"))),
        configuration=ConfigurationRef(
            key=target, model_name=target, profiles={"variant": row["variant"]} if "variant" in row else {}
        ),
        job_key=job_key,
        status=_status(row, score, criteria),
        reward=score,
        rewards=_rewards(row, score),
        exception_message=error if isinstance(error, str) else "",
        failure_category=to_str(pick(row, "failure_reason_code", "target_error_kind")),
        started_at=parse_time(row.get("start_time"), path, f"{where}.start_time", problems),
        finished_at=parse_time(row.get("end_time"), path, f"{where}.end_time", problems),
        phases={"total": {"seconds": duration_ms / 1000}} if duration_ms is not None else {},
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
        cost_usd=to_float(pick(trace, "cost_usd") if "cost_usd" in trace else row.get("cost_usd")),
        refs={k: v for k, v in row.items() if k.endswith(("_path", "_dir")) or k == "artifact_pointers"},
        provenance=_provenance(row),
        documents={"row": obj},
        criteria=criteria,
        trajectories=output_trajectory(obj, row, path, line, problems),
        files=[path],
    )


def is_output_trajectory(path: str) -> bool:
    return OUTPUT_MARK in path


# ---------------------------------------------------------------- a file of rows


def _run_id(rows: list[dict[str, Any]], path: str, summary: dict[str, Any] | None) -> str:
    """The run's own id when it has one, else path@first-timestamp (stable on re-import)."""
    if summary and summary.get("run_id"):
        return to_str(summary["run_id"])
    for row in rows:
        identity = row.get("projection_identity")
        dims = identity.get("dimensions") if isinstance(identity, dict) else None
        run = row.get("run_id") or (dims.get("run_id") if isinstance(dims, dict) else None)
        if run:
            return to_str(run)
    first = next((to_str(r["timestamp"]) for r in rows if r.get("timestamp")), "")
    return f"{path}@{first}" if first else path


def parse_rows(rows: list[tuple[int, dict[str, Any]]], path: str, summary: dict[str, Any] | None = None) -> ParsedPack:
    problems: list[Problem] = []
    good: list[tuple[int, dict[str, Any]]] = []
    for line, obj in rows:
        if is_result_row(obj):
            good.append((line, obj))
        else:
            problems.append(
                Problem(
                    path,
                    "not an AgentV result row (needs test_id and a numeric score)",
                    line=line,
                    kept="in the stored file",
                )
            )
    normalized = [normalize_row(obj) for _, obj in good]
    run = _run_id(normalized, path, summary)
    job_key = "agentv:" + run
    timestamps = [parse_time(r.get("timestamp"), path, "timestamp") for r in normalized]
    known = [t for t in timestamps if t is not None]
    metadata = (summary or {}).get("metadata") or {}
    job = ParsedJob(
        key=job_key,
        name=to_str(pick(metadata, "experiment", "eval_file")) or run,
        source_format="agentv",
        started_at=parse_time(metadata.get("timestamp"), path, "summary.metadata.timestamp", problems)
        or (min(known) if comparable_times(*known) else None),
        finished_at=max(known) if comparable_times(*known) else None,
        extra={"summary": summary} if summary else {},
    )
    trials: list[ParsedTrial] = []
    seen: dict[str, int] = {}
    for line, obj in _attempt_rows(good):
        trial = _trial(obj, line, path, job_key, run, problems)
        explicit = to_int(normalize_row(obj).get("attempt"))
        if explicit is not None:  # (AgentV's `trials[]` of a repeated test, or a row naming its attempt)
            trial.key, trial.attempt = f"{trial.key}:attempt{explicit}", explicit
        key = trial.key
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:  # the same test run again with no attempt named: the next attempt
            trial.key, trial.attempt = f"{key}#{seen[key]}", seen[key]
        elif trial.attempt is None:
            trial.attempt = 1
        trials.append(trial)
    return ParsedPack(kind="agentv", jobs=[job], trials=trials, problems=problems, trial_count=len(trials))


def _attempt_rows(rows: list[tuple[int, dict[str, Any]]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each row, or for a test repeated (`trials: [{attempt, score, …}]`) one row an attempt: each its own trial."""
    for line, obj in rows:
        attempts = [
            a for a in as_list(obj.get("trials")) if isinstance(a, dict) and to_float(a.get("score")) is not None
        ]
        if not attempts:
            yield line, obj
            continue
        base = {k: v for k, v in obj.items() if k not in ("trials", "score", "scores", "assertions", "error")}
        for number, attempt in enumerate(attempts, start=1):
            yield line, base | attempt | {"attempt": number}  # (1-based, in the order AgentV ran them)


def parse_run_folder(folder: Path, rel: str) -> ParsedPack:
    """A run bundle: summary.json first, then index.jsonl (root or .internal/)."""
    summary = None
    problems: list[Problem] = []
    summary_path = folder / "summary.json"
    if summary_path.is_file():
        try:
            summary = load_json(summary_path, f"{rel}/summary.json", problems)
        except PackError as exc:
            problems.append(exc.problem)
    index = next((p for p in (folder / "index.jsonl", folder / ".internal" / "index.jsonl") if p.is_file()), None)
    if index is None:
        raise PackError(Problem(rel, "AgentV run folder has no index.jsonl"))
    index_rel = f"{rel}/{index.relative_to(folder).as_posix()}"
    rows, read_problems = load_jsonl(index, index_rel)
    pack = parse_rows(rows, index_rel, summary if isinstance(summary, dict) else None)
    pack.problems[:0] = problems + read_problems
    for trial in pack.trials:
        _read_sample_files(trial, folder, rel)
    return pack


SAMPLE_LOGS = ("stderr", "stdout")  # a sample's process output, beside its row (`<name>_path`)


def _inside(folder: Path, relative: Any) -> Path | None:
    """A path a row names, relative to the run folder, when it stays inside it."""
    if not isinstance(relative, str) or not relative or Path(relative).is_absolute() or ".." in Path(relative).parts:
        return None
    path = folder / relative
    return path if path.is_file() and not path.is_symlink() else None


def _read_sample_files(trial: ParsedTrial, folder: Path, rel: str) -> None:
    """stderr.txt and stdout.txt of a sample as its logs; an errored sample's reason from its stderr
    (or target-execution.json) when the row itself says none."""
    row = normalize_row(as_dict(trial.documents.get("row")))
    sample_dir = to_str(row.get("result_dir"))
    sample = f"{sample_dir}/sample-{to_int(row.get('sample_index')) or 0}" if sample_dir else ""
    for name in SAMPLE_LOGS:
        path = _inside(folder, row.get(f"{name}_path")) or (_inside(folder, f"{sample}/{name}.txt") if sample else None)
        if path is not None:
            local = path.relative_to(folder).as_posix()
            trial.texts[f"{name}.txt"] = read_log_text(path, f"{rel}/{local}")
            trial.files.append(f"{rel}/{local}")
    execution_path = _inside(folder, row.get("target_execution_path")) or (
        _inside(folder, f"{sample}/target-execution.json") if sample else None
    )
    execution: dict[str, Any] = {}
    if execution_path is not None:
        local = execution_path.relative_to(folder).as_posix()
        try:
            execution = as_dict(load_json(execution_path, f"{rel}/{local}", trial.problems))
            trial.documents["target_execution"] = execution
            trial.files.append(f"{rel}/{local}")
        except PackError as exc:
            trial.problems.append(exc.problem)
    if trial.status != "errored":
        return
    stderr = trial.texts.get("stderr.txt", "")
    error = to_str(pick(execution, "error", "error_message", "message"))
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
    trial.exception_type = trial.exception_type or to_str(
        pick(execution, "error_kind", "errorKind") or row.get("target_error_kind") or "execution_error"
    )
    trial.exception_message = trial.exception_message or error or last[:1000]
    trial.exception_traceback = trial.exception_traceback or stderr
