"""A Harbor job's `check_report.json`: `harbor check`'s task-quality verdicts (pure, no Django).

Harbor's quality checker answers one QualityCheckResult per task: `checks` maps a rubric
criterion to `{outcome: pass | fail | not_applicable, explanation}`, with an
`estimated_cost_usd`. A job-level report holds one per task, keyed by task name (or as a
list of `{task, checks}`); a report of one task is a bare QualityCheckResult. Read into
`{task name: {criterion: {outcome, explanation}}}`; anything else in the file is kept as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trials.ingest.jsonio import load_json
from trials.ingest.records import PackError, ParsedJob, ParsedTrial, Problem
from trials.ingest.values import as_dict, to_str

FILE = "check_report.json"
ONE_TASK = ""  # the key of a report of one task that does not name it


def read_check_report(job_dir: Path, rel: str, problems: list[Problem]) -> dict[str, Any]:
    """The job's report as `{"tasks": {name: {criterion: {...}}}, "raw": …}`, or {} when there is none."""
    path = job_dir / FILE
    if not path.is_file():
        return {}
    try:
        data = load_json(path, f"{rel}/{FILE}", problems)
    except PackError as exc:
        problems.append(exc.problem)
        return {}
    tasks = task_checks(data)
    if not tasks:
        problems.append(
            Problem(
                f"{rel}/{FILE}",
                "no task checks found (expected checks per task)",
                severity="warning",
                kept="the file as written, in the job",
            )
        )
    return {"tasks": tasks, "path": f"{rel}/{FILE}", "raw": data}


def task_checks(data: Any) -> dict[str, dict[str, dict[str, str]]]:
    if isinstance(data, dict) and isinstance(data.get("checks"), dict):
        return {to_str(data.get("task") or data.get("task_name")): _checks(data["checks"])}
    entries: list[tuple[str, Any]] = []
    if isinstance(data, dict):
        container = data.get("tasks") or data.get("results") or data
        if isinstance(container, dict):
            entries = list(container.items())
        elif isinstance(container, list):
            entries = [(to_str(as_dict(e).get("task") or as_dict(e).get("task_name")), e) for e in container]
    elif isinstance(data, list):
        entries = [(to_str(as_dict(e).get("task") or as_dict(e).get("task_name")), e) for e in data]
    found = {}
    for name, entry in entries:
        checks = as_dict(entry).get("checks")
        if isinstance(checks, dict):
            found[name] = _checks(checks)
    return found


def _checks(checks: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        to_str(name): {
            "outcome": to_str(as_dict(c).get("outcome")),
            "explanation": to_str(as_dict(c).get("explanation")),
        }
        for name, c in checks.items()
    }


def checks_for_task(report: dict[str, Any], task_name: str) -> dict[str, dict[str, str]]:
    """A task's checks: by its name, its name without the dataset (`org/name` → `name`), or the one task."""
    tasks = as_dict(report.get("tasks"))
    short = task_name.rpartition("/")[2]
    for key in (task_name, short):
        if key in tasks:
            return tasks[key]
    by_short = {k.rpartition("/")[2]: v for k, v in tasks.items()}
    if short in by_short:
        return by_short[short]
    return tasks[ONE_TASK] if list(tasks) == [ONE_TASK] else {}


def flag_checked_task(trial: ParsedTrial, job: ParsedJob) -> ParsedTrial:
    """A trial of a task `harbor check` failed: the failure classes read it as the task's fault."""
    report = job.extra.get("check_report")
    if report and trial.task and any(c["outcome"] == "fail" for c in checks_for_task(report, trial.task.name).values()):
        trial.provenance["task_flagged"] = True
    return trial
