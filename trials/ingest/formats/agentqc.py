"""Agent QC inputs (limecloud/agentqc, Lime app): benchmark experiments, scenario
manifests, evidence packs, plans and verdicts.

Only the benchmark experiment holds trials; the rest are evidence documents whose
counts a reviewer needs at a glance (scenarios, failure modes, blockers, waivers).
"""

from __future__ import annotations

from typing import Any

from trials.ingest.documents import is_json_schema
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    FormatTraits,
    ParsedDocument,
    ParsedJob,
    ParsedPack,
    ParsedTrial,
    TaskRef,
)
from trials.ingest.values import as_dict, clean_category, pick, to_float, to_int, to_str

# Agent QC trial status -> Benchviewer status; the original stays in provenance.
TRAITS = FormatTraits("agentqc", lime_evidence=True)  # (its records carry the Lime evidence facts)
_STATUS = {
    "passed": "passed",
    "failed": "failed",
    "exhausted": "failed",  # retries used up without a pass
    "skipped": "skipped",
    "blocked": "unknown",  # never ran to a verdict
    "needs-review": "unknown",
}

# Trial keys that become columns; everything else lands in provenance.
_TRIAL_COLUMNS = {
    "trial_id",
    "task_id",
    "configuration_id",
    "status",
    "reward",
    "duration_ms",
    "attempt",
    "failure_category",
    "runtime_correlation",
    "cost",
}


# ---------------------------------------------------------------- detection


def is_experiment(data: Any) -> bool:
    return isinstance(data, dict) and all(
        isinstance(data.get(k), expected)
        for k, expected in (("dataset", dict), ("configurations", list), ("trials", list))
    )


def is_scenario_manifest(data: Any) -> bool:
    return isinstance(data, dict) and "manifestVersion" in data and isinstance(data.get("scenarios"), list)


def is_evidence(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and "runId" in data
        and (isinstance(data.get("scenarioResults"), list) or isinstance(data.get("verdict"), dict))
    )


def is_plan(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("cases"), list)
        and ("required_gates" in data or "risk_level" in data or "target_project" in data)
    )


def is_verdict(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("pass"), bool) and "status" in data


# ---------------------------------------------------------------- experiment


def _by_id(entries: Any) -> dict[str, dict[str, Any]]:
    return {to_str(e.get("id")): e for e in entries or [] if isinstance(e, dict)}


def _dataset(data: dict[str, Any]) -> DatasetRef:
    dataset = data["dataset"]
    harbor = as_dict(dataset.get("harbor"))
    return DatasetRef(
        name=to_str(dataset.get("id")),
        version=to_str(dataset.get("version")),
        ref=to_str(harbor.get("registry_ref") or dataset.get("source")),
    )


def _configuration(config_id: str, config: dict[str, Any] | None) -> ConfigurationRef:
    config = config or {}
    harbor_run = as_dict(config.get("harbor_run"))
    return ConfigurationRef(
        key=config_id,
        role=to_str(config.get("role")),
        agent_name=to_str(harbor_run.get("agent") or config.get("agent_profile")),
        agent_version=to_str(config.get("runtime_version")),
        model_name=to_str(harbor_run.get("model") or config.get("model_profile")),
        profiles={k: v for k, v in config.items() if k not in ("id", "role")},
    )


def _task(task_id: str, task: dict[str, Any] | None) -> TaskRef:
    task = task or {}
    harbor_task = as_dict(task.get("harbor_task"))
    return TaskRef(
        name=task_id, source=to_str(harbor_task.get("task_toml_ref") or harbor_task.get("task_dir")), definition=task
    )


def _trial(
    data: dict[str, Any],
    job_key: str,
    index: int,
    trial: dict[str, Any],
    configs: dict[str, dict[str, Any]],
    tasks: dict[str, dict[str, Any]],
) -> ParsedTrial:
    trial_id = to_str(trial.get("trial_id")) or f"trial-{index}"
    config_id = to_str(trial.get("configuration_id"))
    task_id = to_str(trial.get("task_id"))
    reward = to_float(trial.get("reward"))
    duration_ms = to_float(trial.get("duration_ms"))
    cost = as_dict(trial.get("cost"))
    raw_status = to_str(trial.get("status"))
    refs = {k: v for k, v in trial.items() if k.endswith("_ref") or k.endswith("_refs")}
    provenance = {k: v for k, v in trial.items() if k not in _TRIAL_COLUMNS and k not in refs}
    provenance.update({"qc_status": raw_status, "total_tokens": cost.get("tokens")})
    dataset = _dataset(data)
    # The ids the joinability checks look for, under the names an evidence pack gives them.
    benchmark = {
        "datasetId": dataset.name,
        "taskId": task_id,
        "trialId": trial_id,
        "configurationId": config_id,
        "harborJobRef": to_str(trial.get("job_ref")),
    }
    return ParsedTrial(
        key=f"{job_key}:{trial_id}",
        source_format="agentqc",
        name=trial_id,
        dataset=dataset,
        benchmark={k: v for k, v in benchmark.items() if v},
        task=_task(task_id, tasks.get(task_id)) if task_id else None,
        configuration=_configuration(config_id, configs.get(config_id)) if config_id else None,
        job_key=job_key,
        attempt=to_int(trial.get("attempt")),
        status=_STATUS.get(raw_status, "unknown"),
        reward=reward,
        rewards={"reward": reward} if reward is not None else {},
        failure_category=clean_category(trial.get("failure_category")),
        phases={"total": {"seconds": duration_ms / 1000}} if duration_ms is not None else {},
        cost_usd=to_float(pick(cost, "cost_usd", "costUsd")),
        runtime_correlation=trial.get("runtime_correlation") or {},
        refs=refs,
        provenance=provenance,
        documents={"trial": trial},
    )


def parse_experiment(data: dict[str, Any], path: str) -> ParsedPack:
    exp_id = to_str(data.get("id")) or path
    job_key = "agentqc:" + exp_id
    job = ParsedJob(
        key=job_key, name=exp_id, source_format="agentqc", extra={k: v for k, v in data.items() if k != "trials"}
    )
    configs, tasks = _by_id(data.get("configurations")), _by_id(data.get("tasks"))
    trials = [_trial(data, job_key, i, t, configs, tasks) for i, t in enumerate(data["trials"]) if isinstance(t, dict)]
    return ParsedPack(kind="agentqc-experiment", jobs=[job], trials=trials, trial_count=len(trials))


# ---------------------------------------------------------------- documents


def _count(entries: Any) -> int:
    return len(entries) if isinstance(entries, list) else 0


def parse_scenario_manifest(data: dict[str, Any], path: str) -> ParsedDocument:
    scenarios = [s for s in data["scenarios"] if isinstance(s, dict)]
    return ParsedDocument(
        kind="agentqc-scenario-manifest",
        path=path,
        title=to_str(data.get("title")),
        data=data,
        counts={
            "scenarios": len(scenarios),
            "failure_modes": sum(_count(s.get("failureModes")) for s in scenarios),
            "lanes": _count(data.get("lanes")),
            "p0_scenarios": sum(1 for s in scenarios if s.get("risk") == "P0"),
        },
    )


def parse_evidence(data: dict[str, Any], path: str) -> ParsedDocument:
    verdict = as_dict(data.get("verdict"))
    results = [r for r in data.get("scenarioResults") or [] if isinstance(r, dict)]
    return ParsedDocument(
        kind="agentqc-evidence",
        path=path,
        title=f"{to_str(data.get('runId'))} {to_str(verdict.get('status'))}".strip(),
        data=data,
        counts={
            "scenario_results": len(results),
            "lane_results": _count(data.get("laneResults")),
            "failure_modes": sum(_count(r.get("failureModes")) for r in results),
            "blockers": _count(verdict.get("blockers")),
            "waivers": _count(verdict.get("waivers")),
        },
    )


def parse_plan(data: dict[str, Any], path: str) -> ParsedDocument:
    return ParsedDocument(
        kind="agentqc-plan",
        path=path,
        title=to_str(data.get("id")),
        data=data,
        counts={
            "cases": _count(data.get("cases")),
            "required_gates": _count(data.get("required_gates")),
            "risk_domains": _count(data.get("risk_domains")),
        },
    )


def parse_verdict(data: dict[str, Any], path: str) -> ParsedDocument:
    return ParsedDocument(
        kind="agentqc-verdict",
        path=path,
        title=f"{to_str(data.get('status'))} ({to_str(data.get('severity')) or 'no severity'})",
        data=data,
        counts={
            "evidence_refs": _count(data.get("evidence_refs")),
            "passed": int(data.get("pass") is True),
            "waivers": int(bool(data.get("waiver"))),
        },
    )


def parse(data: Any, path: str) -> ParsedPack | None:
    """Any Agent QC JSON file; None when it is not one (schemas included)."""
    if is_json_schema(data):
        return None
    if is_experiment(data):
        return parse_experiment(data, path)
    for check, parser in (
        (is_scenario_manifest, parse_scenario_manifest),
        (is_evidence, parse_evidence),
        (is_plan, parse_plan),
        (is_verdict, parse_verdict),
    ):
        if check(data):
            document = parser(data, path)
            return ParsedPack(kind=document.kind, documents=[document])
    return None
