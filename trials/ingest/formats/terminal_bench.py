"""Terminal-Bench 1 run output (`tb run`, the public leaderboard's
`results/<dataset>@<version>/<date>_<agent>_<model>/<run_id>/`).

Three layouts: a run folder (results.json, run_metadata.json, tb.lock and per-trial folders
`<task>/<task>.1-of-1.<run_id>/`), a run folder with only the run files, and flat
`<run_id>_results.json` files in a submission folder. A run is a job named by its run id;
each `results[]` row is a trial, with or without a folder of evidence. `is_resolved` true or
false is reward 1 or 0; null is unscored (status "unknown"), never a failure. The shapes are
terminal_bench's own models (`terminal_bench/harness/models.py`: BenchmarkResults, TrialResults,
RunMetadata); this module does not import them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import ijson

from trials.ingest.archives import DEFAULT_LIMITS
from trials.ingest.formats.atif import STREAM_THRESHOLD
from trials.ingest.formats.inspect_sample import top_level
from trials.ingest.formats.terminal_bench_folder import KEYSTROKES_MARK as KEYSTROKES_MARK
from trials.ingest.formats.terminal_bench_folder import RECORDING_KIND as RECORDING_KIND
from trials.ingest.formats.terminal_bench_folder import read_trial_dir, safe_json
from trials.ingest.jsonio import load_json, open_json
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    FormatTraits,
    PackError,
    ParsedJob,
    ParsedPack,
    ParsedTrial,
    Problem,
    TaskRef,
)
from trials.ingest.values import as_dict, as_list, parse_iso, seconds_between, to_str

FORMAT = "terminal-bench"
RESULTS_SUFFIX = "_results.json"
# Its published accuracy is resolved / all trials: an unscored one (`is_resolved: null`) counts as 0.
TRAITS = FormatTraits(
    FORMAT,
    recording_texts=True,
    leaderboard_rule="unscored counts as 0 (Terminal-Bench's accuracy)",
    status_by_reward=True,  # (is_resolved is reward 1 / 0)
)
# A row's own columns; every other key of the row is kept in provenance.
_ROW_COLUMNS = {
    "id",
    "trial_name",
    "task_id",
    "instruction",
    "is_resolved",
    "failure_mode",
    "parser_results",
    "total_input_tokens",
    "total_output_tokens",
    "trial_started_at",
    "trial_ended_at",
}
_PHASES = (("agent_execution", "agent"), ("verifier", "test"))  # Harbor's phase names, TB1's prefixes
NO_FAILURE = ("", "unset", "none")
MAX_RUN_ROWS = DEFAULT_LIMITS.max_run_rows  # results[] rows read as trials (IMPORT_MAX_RUN_ROWS); the rest stay stored
_RUN_KEYS = ("n_resolved", "n_unresolved", "accuracy", "resolved_ids", "unresolved_ids", "pass_at_k")


def is_run_results(data: Any) -> bool:
    """A run's results.json (BenchmarkResults): results[] rows plus the run's counts (some keys may be missing)."""
    if not (isinstance(data, dict) and isinstance(data.get("results"), list)):
        return False
    if ("n_resolved" in data or "accuracy" in data) and "resolved_ids" in data:
        return True
    rows = data["results"]
    return any(k in data for k in _RUN_KEYS) and bool(rows) and all(is_trial_row(row) for row in rows[:5])


def is_trial_row(data: Any) -> bool:
    """A trial folder's results.json (TrialResults): one row."""
    return isinstance(data, dict) and "trial_name" in data and "task_id" in data and "is_resolved" in data


def is_run_metadata(data: Any) -> bool:
    return isinstance(data, dict) and "run_id" in data and ("dataset_name" in data or "agent_name" in data)


def _json_or_none(path: Path) -> Any:
    try:
        return load_json(path, path.name) if path.is_file() else None
    except PackError:
        return None


def is_run_dir(path: Path) -> bool:
    if is_run_metadata(_json_or_none(path / "run_metadata.json")):
        return True
    results = path / "results.json"
    if results.is_file() and results.stat().st_size > STREAM_THRESHOLD:
        return sniff_big_results(results)  # (never parsed whole to be recognised)
    return is_run_results(_json_or_none(results))


def is_trial_dir(path: Path) -> bool:
    return (path / "commands.txt").is_file() and is_trial_row(_json_or_none(path / "results.json"))


# ---------------------------------------------------------------- the run


def sniff_big_results(path: Path) -> bool:
    """A results.json past STREAM_THRESHOLD: streamed row by row rather than parsed whole."""
    if path.stat().st_size <= STREAM_THRESHOLD:
        return False
    with open_json(path) as f:
        head = f.read(65536)
    return b'"results"' in head and b'"is_resolved"' in head and b'"task_id"' in head


def _read_results(path: Path, rel: str, problems: list[Problem]) -> tuple[dict[str, Any], Iterable[Any], int]:
    """A run's results.json as (its keys but `results`, its rows, how many): whole when small, else streamed."""
    if not path.is_file():
        return {}, [], 0
    if path.stat().st_size <= STREAM_THRESHOLD:
        data = as_dict(safe_json(path, rel, problems))
        whole = as_list(data.get("results"))
        return {k: v for k, v in data.items() if k != "results"}, whole, len(whole)
    try:
        with open_json(path) as f:
            header = top_level(f, skip=("results",))
        with open_json(path) as f:
            count = sum(1 for prefix, event, _ in ijson.parse(f) if prefix == "results.item" and event in _ROW_STARTS)
    except ijson.JSONError as exc:
        problems.append(Problem(rel, f"not valid JSON: {exc}", kept="the raw bytes"))
        return {}, [], 0

    def rows() -> Iterator[Any]:
        try:
            with open_json(path) as f:
                yield from ijson.items(f, "results.item", use_float=True)
        except ijson.JSONError as exc:
            problems.append(Problem(rel, f"not valid JSON past a row: {exc}", "$.results", kept="the rows before it"))

    return header, rows(), count


_ROW_STARTS = ("start_map", "start_array", "string", "number", "null", "boolean")


def _capped(rows: Iterable[Any], count: int, max_rows: int, rel: str, problems: list[Problem]) -> Iterator[Any]:
    """The first `max_rows` rows; past them a problem saying how many were left as the stored file's only."""
    if count > max_rows:
        message = f"{count} results[] rows, over the limit of {max_rows} (IMPORT_MAX_RUN_ROWS)"
        kept = f"the first {max_rows} rows as trials; the other {count - max_rows} only in the stored file"
        problems.append(Problem(rel, message, f"$.results[{max_rows}]", kept=kept))
    for index, row in enumerate(rows):
        if index >= max_rows:
            return
        yield row


# A leaderboard submission folder: `<date>_<agent>_<model>` (the model may hold `@`, `:` or `_`).
_SUBMISSION = re.compile(r"(?P<date>\d{8})_(?P<agent>[^_]+)_(?P<model>.+)")


def _is_dataset_folder(name: str) -> bool:
    return "@" in name and not _SUBMISSION.fullmatch(name)


def _submission(rel: str) -> str:
    """The submission folder of a run folder at `rel`: the run folder's parent (`<submission>/<run_id>/`),
    or the run folder itself when its run files sit at the submission's root (`<dataset>@<v>/<submission>/`)."""
    parts = [p for p in rel.split("/") if p]
    own, parent = (parts[-1] if parts else ""), (parts[-2] if len(parts) >= 2 else "")
    for name in (parent, own):
        if _SUBMISSION.fullmatch(name):
            return name
    if parent and not _is_dataset_folder(parent):
        return parent
    return own if parent else ""


def _named_by_submission(submission: str) -> tuple[str, str]:
    """(agent, model) as a `<date>_<agent>_<model>` folder names them; empty when it is named otherwise."""
    match = _SUBMISSION.fullmatch(submission)
    return (match["agent"], match["model"]) if match else ("", "")


def _dataset_from_path(rel: str) -> DatasetRef | None:
    """`results/<dataset>@<version>/…` names the dataset when the run's files do not."""
    for part in rel.split("/"):
        if _is_dataset_folder(part):
            name, _, version = part.partition("@")
            return DatasetRef(name, version=version)
    return None


def _named_by_its_tasks(results: dict[str, Any]) -> DatasetRef:
    """A run that names no dataset (a flat `<run_id>_results.json` with no run_metadata beside it): its
    task ids, so that the import names it by the one stored versioned dataset holding them all
    (`DatasetRef.task_ids`), and its trials pair with the runs that named it."""
    ids = {to_str(t) for key in ("resolved_ids", "unresolved_ids") for t in as_list(results.get(key))} - {""}
    return DatasetRef("terminal-bench", task_ids=tuple(sorted(ids)))


def _run_parts(
    results: dict[str, Any],
    metadata: dict[str, Any],
    lock: dict[str, Any],
    run_id: str,
    rel: str,
    submission: str,
    n_rows: int = 0,
) -> tuple[ParsedJob, DatasetRef, ConfigurationRef]:
    """The run's job, dataset and configuration; `results` is results.json's keys but its rows (`n_rows` of them)."""
    lock_agent, lock_dataset = as_dict(lock.get("agent")), as_dict(lock.get("dataset"))
    dataset_name = to_str(metadata.get("dataset_name") or lock_dataset.get("name"))
    dataset = (
        DatasetRef(dataset_name, version=to_str(metadata.get("dataset_version") or lock_dataset.get("version")))
        if dataset_name
        else _dataset_from_path(rel) or _named_by_its_tasks(results)
    )
    named_agent, named_model = _named_by_submission(submission)
    agent = to_str(metadata.get("agent_name") or lock_agent.get("name")) or named_agent
    model = to_str(metadata.get("model_name") or lock_agent.get("model_name")) or named_model
    # One rule for every layout: the submission folder names the configuration when there is one.
    key = submission or "__".join(x for x in (agent, model) if x) or "unknown"
    configuration = ConfigurationRef(
        key=key,
        agent_name=agent or submission,
        agent_version=to_str(as_dict(lock.get("harness")).get("version")),
        model_name=model,
        profiles={"submission": submission} if submission else {},
    )
    job = ParsedJob(
        key=f"tb1:{to_str(metadata.get('uuid') or results.get('id')) or run_id}",
        name=run_id,
        source_format=FORMAT,
        started_at=parse_iso(metadata.get("start_time")),
        finished_at=parse_iso(metadata.get("end_time")),
        config={"run_metadata": metadata, "tb_lock": lock} if lock else {"run_metadata": metadata},
        result={k: v for k, v in results.items() if k != "results"} | {"n_trials": n_rows},
        extra={"submission": submission} if submission else {},
    )
    return job, dataset, configuration


def parse_run_dir(run_dir: Path, rel: str, max_rows: int = MAX_RUN_ROWS) -> ParsedPack:
    """A run folder: its results.json rows, each joined to its trial folder when there is one."""
    problems: list[Problem] = []
    results, rows, count = _read_results(run_dir / "results.json", f"{rel}/results.json", problems)
    metadata = safe_json(run_dir / "run_metadata.json", f"{rel}/run_metadata.json", problems)
    lock = safe_json(run_dir / "tb.lock", f"{rel}/tb.lock", problems)
    run_id = to_str(as_dict(metadata).get("run_id")) or run_dir.name
    submission = _submission(rel)
    if not results and not count and not metadata:
        raise PackError(problems[0] if problems else Problem(rel, "a Terminal-Bench run folder with no run files"))
    job, dataset, configuration = _run_parts(results, as_dict(metadata), as_dict(lock), run_id, rel, submission, count)
    folders = {d.name: d for d in run_dir.glob("*/*") if d.is_dir()}
    if not count and metadata:  # (run_metadata alone: the run's trials were never written)
        problems.append(
            Problem(f"{rel}/results.json", "no results.json rows: the run has no trials", kept="the run as a job")
        )

    def trials() -> Iterator[ParsedTrial]:
        for index, row in enumerate(_capped(rows, count, max_rows, f"{rel}/results.json", problems)):
            trial = _row_trial(row, index, f"{rel}/results.json", job, dataset, configuration, problems)
            if trial is None:
                continue
            folder = folders.get(trial.name)
            if folder is not None:
                read_trial_dir(trial, folder, f"{rel}/{folder.parent.name}/{folder.name}")
            else:
                trial.provenance["evidence"] = "a results.json row only: no trial folder in this pack"
            yield trial

    return ParsedPack(kind=FORMAT, jobs=[job], trials=trials(), problems=problems, trial_count=min(count, max_rows))


def parse_results_path(path: Path, rel: str, max_rows: int = MAX_RUN_ROWS) -> ParsedPack:
    """A big results file (`sniff_big_results`), streamed: the same trials as `parse_results_file`."""
    problems: list[Problem] = []
    header, rows, count = _read_results(path, rel, problems)
    return _results_pack(header, rows, count, path, rel, max_rows, problems)


def parse_results_file(data: dict[str, Any], path: Path, rel: str, max_rows: int = MAX_RUN_ROWS) -> ParsedPack:
    """A flat `<run_id>_results.json` in a submission folder (or a run's results.json on its own)."""
    rows = as_list(data.get("results"))
    header = {k: v for k, v in data.items() if k != "results"}
    return _results_pack(header, rows, len(rows), path, rel, max_rows, [])


def _results_pack(
    header: dict[str, Any],
    rows: Iterable[Any],
    count: int,
    path: Path,
    rel: str,
    max_rows: int,
    problems: list[Problem],
) -> ParsedPack:
    name = path.name
    run_id = name[: -len(RESULTS_SUFFIX)] if name.endswith(RESULTS_SUFFIX) else path.parent.name
    beside = path.with_name(f"{run_id}_run_metadata.json")
    metadata = as_dict(safe_json(beside, f"{rel.rpartition('/')[0]}/{beside.name}".lstrip("/"), problems))
    folder = rel.rpartition("/")[0]
    if name.endswith(RESULTS_SUFFIX):  # (flat files lie in their submission folder)
        holder = folder.rpartition("/")[2]
        submission = "" if _is_dataset_folder(holder) else holder
    else:
        submission = _submission(folder)
    job, dataset, configuration = _run_parts(header, metadata, {}, run_id, rel, submission, count)

    def trials() -> Iterator[ParsedTrial]:
        for index, row in enumerate(_capped(rows, count, max_rows, rel, problems)):
            trial = _row_trial(row, index, rel, job, dataset, configuration, problems)
            if trial is not None:
                trial.provenance["evidence"] = "a results.json row only: no trial folder in this pack"
                yield trial

    return ParsedPack(kind=FORMAT, jobs=[job], trials=trials(), problems=problems, trial_count=min(count, max_rows))


def parse(data: Any, path: Path, rel: str, max_rows: int = MAX_RUN_ROWS) -> ParsedPack | None:
    """A TB1 JSON file on its own: a run's results (flat or not), its run_metadata.json, or one trial's row."""
    if is_run_results(data):
        return parse_results_file(data, path, rel, max_rows)
    if is_run_metadata(data):
        job, _, _ = _run_parts({}, data, {}, to_str(data["run_id"]), rel, _submission(rel.rpartition("/")[0]))
        return ParsedPack(kind=FORMAT, jobs=[job], trial_count=0)
    if is_trial_row(data):
        problems: list[Problem] = []
        job, dataset, configuration = _run_parts({}, {}, {}, "", rel, "")
        trial = _row_trial(data, 0, rel, job, dataset, configuration, problems)
        if trial is None:
            raise PackError(problems[-1])
        trial.job_key = ""  # (a row alone does not say which run it is from)
        trial.provenance["evidence"] = "a trial's results.json alone: no trial folder in this pack"
        return ParsedPack(kind=FORMAT, trials=[trial], problems=problems, trial_count=1)
    return None


def parse_trial_folder(trial_dir: Path, rel: str) -> ParsedPack:
    """A trial folder on its own: its row and evidence. Its run id (`<task>.1-of-1.<run_id>`) is kept as
    benchmark.runId; it joins no job, as the run's own job is keyed by the run's uuid, which it does not hold."""
    problems: list[Problem] = []
    row = as_dict(safe_json(trial_dir / "results.json", f"{rel}/results.json", problems))
    run_id = to_str(row.get("trial_name")).rpartition(".")[2] or trial_dir.name
    job, dataset, configuration = _run_parts({}, {}, {}, run_id, rel, "")
    trial = _row_trial(row, 0, f"{rel}/results.json", job, dataset, configuration, problems)
    if trial is None:
        raise PackError(problems[-1])
    trial.job_key = ""
    read_trial_dir(trial, trial_dir, rel)
    return ParsedPack(kind=FORMAT, trials=[trial], problems=problems, trial_count=1)


# ---------------------------------------------------------------- one row


def _row_trial(
    row: Any,
    index: int,
    rel: str,
    job: ParsedJob,
    dataset: DatasetRef,
    configuration: ConfigurationRef,
    problems: list[Problem],
) -> ParsedTrial | None:
    where = f"$.results[{index}]"
    if not isinstance(row, dict):
        problems.append(Problem(rel, "a results[] row is not an object", where, kept="the other rows"))
        return None
    task_id = to_str(row.get("task_id"))
    if not task_id:
        message = f"row {index + 1} ({to_str(row.get('trial_name')) or 'no trial_name'}) has no task_id"
        problems.append(Problem(rel, message, f"{where}.task_id", kept="the other rows; this row only in the file"))
        return None
    resolved = row.get("is_resolved")
    reward = None if resolved is None else float(bool(resolved))
    failure_mode = to_str(row.get("failure_mode"))
    name = to_str(row.get("trial_name")) or f"{task_id}.{index + 1}"
    tokens = _count(row.get("total_input_tokens")), _count(row.get("total_output_tokens"))
    if tokens == (0, 0):  # tb writes 0 and 0 for an agent that reports no usage: not counted, not none used
        tokens = None, None
    trial = ParsedTrial(
        key=f"tb1:{row['id']}" if row.get("id") else f"{job.key}:{name}",
        source_format=FORMAT,
        name=name,
        dataset=replace(dataset),  # (a copy each: a trial's refs are its own)
        task=TaskRef(task_id, definition={"instruction": row["instruction"]} if row.get("instruction") else {}),
        configuration=configuration,
        job_key=job.key,
        attempt=_attempt(name),
        status="unknown" if reward is None else ("passed" if resolved else "failed"),
        reward=reward,
        rewards={"reward": reward} if reward is not None else {},  # (is_resolved as written: in documents.result)
        failure_category="" if failure_mode.lower() in NO_FAILURE else failure_mode,
        started_at=parse_iso(row.get("trial_started_at")),
        finished_at=parse_iso(row.get("trial_ended_at")),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        # (the run is the job: `harborJobRef` is the name the joinability checks read for it)
        benchmark={
            "datasetId": dataset.name,
            "taskId": task_id,
            "trialId": name,
            "runId": job.name,
            "harborJobRef": job.key,
        },
        refs={"rewardDetailsRef": f"{rel}#{where}"} if row.get("parser_results") else {},  # (its tests' outcomes)
        provenance={"failure_mode": failure_mode or "unset"}
        | {k: v for k, v in row.items() if k not in _ROW_COLUMNS and v is not None},
        documents={"result": row},
        ctrf_tests=[{"name": to_str(k), "status": to_str(v)} for k, v in as_dict(row.get("parser_results")).items()],
    )
    if reward is not None:
        trial.present.add("reward")
    for phase, prefix in _PHASES:
        start, end = row.get(f"{prefix}_started_at"), row.get(f"{prefix}_ended_at")
        if start or end:
            trial.phases[phase] = {
                "started_at": start,
                "finished_at": end,
                "seconds": seconds_between(parse_iso(start), parse_iso(end)),
            }
    return trial


def _attempt(trial_name: str) -> int | None:
    """`<task>.<n>-of-<k>.<run_id>`: attempt n."""
    for part in trial_name.split("."):
        n, sep, _ = part.partition("-of-")
        if sep and n.isdigit():
            return int(n)
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
