"""Harbor job and trial directories (formats-harbor.md §2).

What sits beside a trial in its folder (evidence packs, runtime and context events) is read
by harbor_sidecars.py; its verifier and artifacts folders by harbor_verifier.py; trajectory files
without a trial folder by harbor_trajectories.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from trials.ingest.folders import files_under
from trials.ingest.formats import benchviewer_export
from trials.ingest.formats.atif import (
    embedded_subagents,
    read_trajectory,
)
from trials.ingest.formats.harbor_checks import flag_checked_task, read_check_report
from trials.ingest.formats.harbor_jobstats import apply_stats, named_only_trial, stats_trials
from trials.ingest.formats.harbor_sidecars import read_log_text, read_sidecars
from trials.ingest.formats.harbor_trajectories import flag_missing_continuations, is_trajectory_file, trajectory_role
from trials.ingest.formats.harbor_trial import apply_result, naive_problem, trial_status
from trials.ingest.formats.harbor_verifier import read_artifacts, read_verifier
from trials.ingest.jsonio import load_json
from trials.ingest.records import (
    FormatTraits,
    PackError,
    ParsedJob,
    ParsedPack,
    ParsedTrial,
    Problem,
)
from trials.ingest.values import as_dict, as_list, parse_iso

TRAITS = FormatTraits("harbor", task_checks=True, job_config_whole=True, status_by_reward=True)
TEXT_FILES = ("trial.log", "exception.txt", "job.log")


def read_json_dict(path: Path, rel: str, problems: list[Problem] | None = None) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = load_json(path, rel, problems)
    return data if isinstance(data, dict) else None


def is_trial_result(data: Any) -> bool:
    return isinstance(data, dict) and "trial_name" in data and ("task_name" in data or "config" in data)


def is_job_result(data: Any) -> bool:
    return isinstance(data, dict) and ("n_total_trials" in data or "stats" in data) and "trial_name" not in data


def is_job_config(data: Any) -> bool:
    """A Harbor job's config.json: what it ran (agents, datasets or tasks), by name or not (`harbor check`)."""
    if not isinstance(data, dict) or "trial_name" in data:
        return False
    if "job_name" in data:
        return "agents" in data or "datasets" in data or "jobs_dir" in data
    agents = data.get("agents")
    return isinstance(agents, list) and bool(agents) and ("tasks" in data or "datasets" in data)


def is_trial_lock(data: Any) -> bool:
    """A Harbor trial's lock.json: the task digest and agent it was pinned to."""
    return (
        isinstance(data, dict)
        and "schema_version" in data
        and isinstance(data.get("task"), dict)
        and "digest" in data["task"]
        and "agent" in data
    )


def is_ctrf_report(data: Any) -> bool:
    """A CTRF test report (a verifier's ctrf.json): results.tool, results.summary, results.tests."""
    results = data.get("results") if isinstance(data, dict) else None
    return isinstance(results, dict) and isinstance(results.get("tests"), list) and "summary" in results


def is_trial_dir(path: Path) -> bool:
    if (path / "agent").is_dir() or (path / "verifier").is_dir():
        return True
    for name in ("result.json", "config.json"):
        try:
            data = read_json_dict(path / name, name)
        except PackError:
            return (path / "result.json").is_file()
        if data is not None and "trial_name" in data:
            return True
    return False


def is_job_dir(path: Path) -> bool:
    """A job's config.json, or a job's result.json (a summary copied beside its trials), with trials under it."""
    if is_trial_dir(path):
        return False
    if not (path / "config.json").is_file() and not is_job_result(read_json_or_none(path / "result.json")):
        return False
    return bool(trial_dirs(path)) or bool(_named_trials(path))


def _named_trials(job_dir: Path) -> set[str]:
    result = read_json_or_none(job_dir / "result.json")
    return set(stats_trials(result)) if is_job_result(result) else set()


def trial_dirs(job_dir: Path) -> list[Path]:
    """Its trial folders, with those the job's stats name that have no result.json of their own."""
    named = _named_trials(job_dir)
    return sorted(
        child for child in job_dir.iterdir() if child.is_dir() and (child.name in named or is_trial_dir(child))
    )


def parse_job_dir(job_dir: Path, rel: str, dirs: list[Path] | None = None) -> ParsedPack:
    problems: list[Problem] = []
    dirs = trial_dirs(job_dir) if dirs is None else dirs
    job_id = next(filter(None, map(trial_job_id, dirs[:3])), "")
    job, versions = _parsed_job(job_dir, rel, problems, job_id)

    named = stats_trials(job.result)

    def trials() -> Iterator[ParsedTrial]:
        seen = set()
        for trial_dir in dirs:
            trial = parse_trial_dir(
                trial_dir, f"{rel}/{trial_dir.name}", job_key=job.key, job_name=job.name, dataset_versions=versions
            )
            seen |= {trial.name, trial_dir.name}
            if "result" not in trial.present and trial_dir.name in named:
                apply_stats(trial, named[trial_dir.name])
                trial.status = trial_status(trial)
            yield flag_checked_task(trial, job)
        for name, stats in named.items():  # no folder at all: the job's stats are all there is
            if name not in seen:
                trial = named_only_trial(name, stats, job.key, job.name)
                trial.status = trial_status(trial)
                yield flag_checked_task(trial, job)

    count = len(dirs) + len(set(named) - {d.name for d in dirs})
    return ParsedPack(kind="harbor-job", jobs=[job], trials=trials(), problems=problems, trial_count=count)


def _parsed_job(
    job_dir: Path, rel: str, problems: list[Problem], trials_job_id: str = ""
) -> tuple[ParsedJob, dict[str, str]]:
    """The job of a job folder, and its datasets' versions by name.

    Its key is its id: from its result.json, or else the `config.job_id` its trials name (a job
    copied trial by trial, its result.json last), so it is one job whichever arrives first; by
    its name only when neither says (and a later import that knows the id adopts that job)."""
    config = _safe_dict(job_dir / "config.json", f"{rel}/config.json", problems)
    result = _safe_dict(job_dir / "result.json", f"{rel}/result.json", problems)
    lock = _safe_dict(job_dir / "lock.json", f"{rel}/lock.json", problems)
    name = str(config.get("job_name") or job_dir.name)
    job_key = f"harbor:{result.get('id') or trials_job_id or name}"
    started_at = _naive_flagged(result.get("started_at"), f"{rel}/result.json", problems, "started_at")
    extra: dict[str, Any] = {"lock": lock} if lock else {}
    if check_report := read_check_report(job_dir, rel, problems):
        extra["check_report"] = check_report
    job = ParsedJob(
        key=job_key,
        name=name,
        source_format="harbor",
        started_at=started_at,
        finished_at=_naive_flagged(result.get("finished_at"), f"{rel}/result.json", problems, "finished_at"),
        config=config,
        result=result,
        extra=extra,
        started_as_written="" if started_at else str(result.get("started_at") or "")[:40],
        earlier_keys=(f"harbor:{name}",) if job_key != f"harbor:{name}" else (),
        trials_name_it_as=job_key.removeprefix("harbor:"),
    )
    versions = {
        str(d.get("name")): str(d.get("version") or d.get("ref") or "")
        for d in as_list(config.get("datasets"))
        if isinstance(d, dict) and d.get("name")
    }
    return job, versions


def parse_single_trial(trial_dir: Path, rel: str) -> ParsedPack:
    """A trial folder on its own; inside a job's folder (a job being written, followed by
    `import_packs --watch`), it joins that job: the trial's files only, the job's row from its folder."""
    parent = trial_dir.parent
    if parent != trial_dir and is_job_config(read_json_or_none(parent / "config.json")):
        job, versions = _parsed_job(parent, parent.name, [], trial_job_id(trial_dir))
        trial = parse_trial_dir(trial_dir, rel, job_key=job.key, job_name=job.name, dataset_versions=versions)
        return ParsedPack(kind="harbor-trial", jobs=[job], trials=[trial], trial_count=1)
    trial = parse_trial_dir(trial_dir, rel, job_key="", job_name="")
    exported = benchviewer_export.exported_job(trial)  # (an export's: the job it was in)
    return ParsedPack(kind="harbor-trial", jobs=[exported] if exported else [], trials=[trial], trial_count=1)


def trial_job_id(trial_dir: Path) -> str:
    """The id of the job a trial folder's result.json says it ran in (`config.job_id`), or blank."""
    result = read_json_or_none(trial_dir / "result.json")
    return str(as_dict(as_dict(result).get("config")).get("job_id") or "")


def parse_job_result_file(data: dict[str, Any], rel: str) -> ParsedPack:
    """A job's result.json on its own (beside trials imported as files): the job, which its trials join."""
    folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
    problems: list[Problem] = []
    name = folder.rsplit("/", 1)[-1] or str(data.get("id") or rel)
    job = ParsedJob(
        key=f"harbor:{data.get('id') or name}",
        name=name,
        source_format="harbor",
        trials_name_it_as=str(data.get("id") or name),
        started_at=_naive_flagged(data.get("started_at"), rel, problems, "started_at"),
        finished_at=_naive_flagged(data.get("finished_at"), rel, problems, "finished_at"),
        result=data,
        started_as_written="" if parse_iso(data.get("started_at")) else str(data.get("started_at") or "")[:40],
    )
    return ParsedPack(kind="harbor-job-result", jobs=[job], problems=problems)


def read_json_or_none(path: Path) -> Any:
    try:
        return read_json_dict(path, path.name)
    except PackError:
        return None


def _safe_dict(path: Path, rel: str, problems: list[Problem]) -> dict[str, Any]:
    try:
        return read_json_dict(path, rel, problems) or {}
    except PackError as exc:
        problems.append(exc.problem)
        return {}


def _naive_flagged(value: Any, rel: str, problems: list[Problem], json_path: str) -> datetime | None:
    parsed = parse_iso(value)
    if parsed is not None and parsed.tzinfo is None:
        problems.append(naive_problem(value, rel, json_path))
        return None  # never silently assume UTC
    return parsed


def _rel_files(trial_dir: Path, rel: str, listing: list[Path]) -> list[str]:
    return sorted(f"{rel}/{p.relative_to(trial_dir).as_posix()}" for p in listing)


def parse_trial_dir(
    trial_dir: Path, rel: str, *, job_key: str, job_name: str, dataset_versions: dict[str, str] | None = None
) -> ParsedTrial:
    problems: list[Problem] = []
    listing = files_under(trial_dir)  # (walked once, for every reader below)
    result = _safe_dict(trial_dir / "result.json", f"{rel}/result.json", problems)
    config = _safe_dict(trial_dir / "config.json", f"{rel}/config.json", problems)
    lock = _safe_dict(trial_dir / "lock.json", f"{rel}/lock.json", problems)
    name = str(result.get("trial_name") or config.get("trial_name") or trial_dir.name)
    trial = ParsedTrial(
        key=f"harbor:{result['id']}" if result.get("id") else f"harbor:{job_key}:{name}",
        source_format="harbor",
        files_are_its_own=True,
        name=name,
        job_key=job_key,
        files=_rel_files(trial_dir, rel, listing),
        problems=problems,
    )
    trial.documents = {k: v for k, v in (("result", result), ("config", config), ("lock", lock)) if v}
    job_id = as_dict(result.get("config")).get("job_id") or config.get("job_id")
    if not job_key and job_id:  # a trial on its own names its job: it joins the job when that is imported
        trial.job_key = f"harbor:{job_id}"
    if result:
        trial.present.add("result")
    apply_result(trial, result, config, job_name, rel)
    if trial.dataset and not trial.dataset.version:
        trial.dataset.version = (dataset_versions or {}).get(trial.dataset.name, "")
    _read_texts(trial, trial_dir, rel)
    _read_trajectories(trial, trial_dir, rel)
    read_verifier(trial, trial_dir / "verifier", f"{rel}/verifier")
    read_artifacts(trial, trial_dir / "artifacts", f"{rel}/artifacts")
    for step_dir in sorted((trial_dir / "steps").glob("*")) if (trial_dir / "steps").is_dir() else []:
        step_rel = f"{rel}/steps/{step_dir.name}"
        _read_trajectories(trial, step_dir, step_rel, step_name=step_dir.name)
        read_verifier(trial, step_dir / "verifier", f"{step_rel}/verifier", step_name=step_dir.name)
        read_artifacts(trial, step_dir / "artifacts", f"{step_rel}/artifacts")
    read_sidecars(trial, trial_dir, rel, listing)  # (and what they redact: withheld by the import's redaction stage)
    flag_missing_continuations(trial)
    trial.status = trial_status(trial)
    if trial.exported:  # a Benchviewer export: the trial it was, not a new one made of its files
        benchviewer_export.restore(trial)
    return trial


def _read_texts(trial: ParsedTrial, trial_dir: Path, rel: str) -> None:
    candidates = [trial_dir / name for name in TEXT_FILES]
    candidates += sorted((trial_dir / "verifier").glob("*.txt")) if (trial_dir / "verifier").is_dir() else []
    candidates += sorted((trial_dir / "agent").glob("*.txt")) if (trial_dir / "agent").is_dir() else []
    candidates += _command_files(trial_dir / "agent")
    for path in candidates:
        if path.is_file():
            key = path.relative_to(trial_dir).as_posix()
            trial.texts[key] = read_log_text(path, f"{rel}/{key}")
    if "exception.txt" in trial.texts and not trial.exception_traceback:
        trial.exception_traceback = trial.texts["exception.txt"]


AGENT_COMMANDS_KEPT = 200  # agent/command-N/ folders read (each file up to TEXT_LIMIT): the rest stay in the pack


def _command_files(agent_dir: Path) -> list[Path]:
    """The files of agent/command-0/, command-1/, … (what each command the agent ran printed), in number order."""
    if not agent_dir.is_dir():
        return []
    folders = [p for p in agent_dir.glob("command-*") if p.is_dir() and p.name.removeprefix("command-").isdigit()]
    folders.sort(key=lambda p: int(p.name.removeprefix("command-")))
    return [f for folder in folders[:AGENT_COMMANDS_KEPT] for f in sorted(folder.iterdir()) if f.is_file()]


def _read_trajectories(trial: ParsedTrial, base: Path, rel: str, step_name: str = "") -> None:
    found = []
    for folder, role_override in (("agent", ""), ("user-agent", "user-agent")):
        directory = base / folder
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("trajectory*.json")):
            order, role = trajectory_role(path.name)
            found.append(
                (
                    0 if folder == "agent" else 1,
                    order,
                    path.name,
                    path,
                    f"{rel}/{folder}/{path.name}",
                    role_override or (role if not step_name or role != "main" else "step"),
                )
            )
        # Other ATIF files in the folder (a subagent_trajectory_ref may name any path, as
        # `subagents/helper.json`): subagents, after the files Harbor names.
        for path in sorted(directory.rglob("*.json")):
            local = path.relative_to(directory).as_posix()
            if not path.name.startswith("trajectory") and is_trajectory_file(path):
                rank = 0 if folder == "agent" else 1
                found.append((rank, 2000, local, path, f"{rel}/{folder}/{local}", role_override or "subagent"))
    for *_order, path, path_rel, role in sorted(found, key=lambda x: x[:3]):
        try:
            trajectory = read_trajectory(path, path_rel, role=role, step_name=step_name)
            trial.trajectories += [trajectory, *embedded_subagents(trajectory)]
            trial.present.add("trajectory")
            if role in ("main", "step"):
                trial.refs.setdefault("trajectoryRef", path_rel)
                if trajectory.session_id:
                    trial.runtime_correlation.setdefault("sessionId", trajectory.session_id)
        except PackError as exc:
            trial.problems.append(exc.problem)
