"""A Harbor trial's result.json (with its config.json): task, dataset, configuration, rewards, times,
phases, exception and token totals, and the status they make. Split from harbor.py, which reads the folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trials.ingest.records import (
    PASS_REWARD,
    ConfigurationRef,
    DatasetRef,
    ParsedTrial,
    Problem,
    TaskRef,
    status_from_reward,
)
from trials.ingest.values import as_dict, as_list, parse_iso, seconds_between

PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")


def naive_problem(value: Any, rel: str, json_path: str, kept: str = "the value as written") -> Problem:
    message = f"naive timestamp {value!r}: local time of an unknown zone"
    return Problem(rel, message, json_path=json_path, severity="warning", kept=kept)


def apply_result(trial: ParsedTrial, result: dict, config: dict, job_name: str, rel: str) -> None:
    task_config = as_dict(config.get("task"))
    task_name = str(result.get("task_name") or task_config.get("name") or "")
    if not task_name:
        task_path = str(task_config.get("path") or "")
        task_name = Path(task_path).name if task_path else trial.name.split("__")[0]
    dataset_name = str(result.get("source") or task_config.get("source") or "adhoc")
    trial.dataset = DatasetRef(name=dataset_name)
    task_id = as_dict(result.get("task_id"))
    trial.task = TaskRef(
        name=task_name,
        checksum=str(result.get("task_checksum") or ""),
        source=str(task_id.get("path") or task_id.get("git_url") or task_id.get("name") or ""),
        definition={"task_id": task_id} if task_id else {},
    )
    agent_info = as_dict(result.get("agent_info"))
    agent_config = as_dict(config.get("agent"))
    model_info = as_dict(agent_info.get("model_info"))
    import_path = str(agent_config.get("import_path") or "")  # a custom harness's agent: `module.path:Class`
    agent_name = str(agent_info.get("name") or agent_config.get("name") or _class_name(import_path))
    model_name = str(model_info.get("name") or agent_config.get("model_name") or "")
    environment_path = str(as_dict(config.get("environment")).get("import_path") or "")
    profiles = {"provider": model_info.get("provider")} if model_info.get("provider") else {}
    profiles |= {"agent_import_path": import_path} if import_path else {}
    profiles |= {"environment_import_path": environment_path} if environment_path else {}
    trial.configuration = ConfigurationRef(
        key="__".join(x for x in (agent_name, model_name) if x) or "unknown",
        agent_name=agent_name,
        agent_version=str(agent_info.get("version") or ""),
        model_name=model_name,
        profiles=profiles,
    )
    rewards = as_dict(as_dict(result.get("verifier_result")).get("rewards"))
    if rewards:
        trial.rewards = dict(rewards)
        trial.present.add("reward")
    trial.started_at = parse_iso(result.get("started_at"))
    trial.finished_at = parse_iso(result.get("finished_at"))
    for key, value in (("started_at", trial.started_at), ("finished_at", trial.finished_at)):
        # (the row keeps no time, the duration is still known; a job's trials share its job's warning)
        if value is not None and value.tzinfo is None and not trial.job_key:
            kept = "the value as written, and the trial's duration"
            trial.problems.append(naive_problem(result[key], f"{rel}/result.json", key, kept=kept))
    for phase in PHASES:
        timing = result.get(phase)
        if isinstance(timing, dict):
            start, end = parse_iso(timing.get("started_at")), parse_iso(timing.get("finished_at"))
            seconds = seconds_between(start, end)
            trial.phases[phase] = {
                "started_at": timing.get("started_at"),
                "finished_at": timing.get("finished_at"),
                "seconds": seconds,
            }
    step_results = [as_dict(s) for s in as_list(result.get("step_results"))]
    exception = as_dict(result.get("exception_info"))
    step_exceptions = [as_dict(s.get("exception_info")) for s in step_results if as_dict(s.get("exception_info"))]
    exception = exception or (step_exceptions[0] if step_exceptions else {})
    trial.exception_type = str(exception.get("exception_type") or "")
    trial.exception_message = str(exception.get("exception_message") or "")
    trial.exception_traceback = str(exception.get("exception_traceback") or "")
    agent_result = as_dict(result.get("agent_result"))
    step_agent_results = [as_dict(s.get("agent_result")) for s in step_results]
    totals = [agent_result] if agent_result else step_agent_results
    trial.input_tokens = _sum(totals, "n_input_tokens")
    trial.cached_tokens = _sum(totals, "n_cache_tokens")
    trial.output_tokens = _sum(totals, "n_output_tokens")
    trial.cost_usd = _sum(totals, "cost_usd")
    trial.benchmark = {
        "datasetId": dataset_name if result.get("source") else "",
        "taskId": task_name,
        "trialId": trial.name,
        "harborJobRef": job_name,
    }
    trial.refs = {"harborTrialResultRef": f"{rel}/result.json"} if result else {}
    if trial.exception_type:
        trial.failure_category = failure_category_for_exception(trial.exception_type)


def _sum(items: list[dict], key: str) -> Any:
    values = [item.get(key) for item in items if isinstance(item.get(key), (int, float))]
    return sum(values) if values else None


def failure_category_for_exception(exception_type: str) -> str:
    """A first guess a triager can change: which layer raised the exception."""
    lowered = exception_type.lower()
    if "verifier" in lowered or "reward" in lowered:
        return "verifier"
    if "environment" in lowered or "docker" in lowered or "build" in lowered:
        return "environment"
    if "timeout" in lowered:
        return "timeout"
    return "runtime"


def _class_name(import_path: str) -> str:
    """`my_harness.agents:PlannerAgent` (or `my_harness.agents.PlannerAgent`) names the agent PlannerAgent."""
    return import_path.rpartition(":")[2].rpartition(".")[2] if import_path else ""


def trial_status(trial: ParsedTrial) -> str:
    reward = trial.rewards.get("reward") if trial.rewards else None
    if reward is None and trial.rewards:
        reward = next((v for v in trial.rewards.values() if isinstance(v, (int, float))), None)
    trial.reward = float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None
    if "timeout" in trial.exception_type.lower():
        return "timeout"
    if trial.exception_type and (trial.reward is None or trial.reward < PASS_REWARD):  # (its verifier ran anyway)
        return "errored"
    if trial.reward is None:
        return trial.status or "unknown"  # (a status a Benchviewer export's manifest named, read before)
    return status_from_reward(trial.reward)  # (reward.txt's 0.4190 is partial: a score, not a failure)
