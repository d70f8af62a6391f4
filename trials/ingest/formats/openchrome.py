"""OpenChrome benchmark result envelopes and the headline-gates file (seed 003).

An envelope is one axis run: environment + competitors + results[]. Real-world task
completion entries carry `runs[]` (one trial each); a per-library row with a `status`
(passed, failed, skipped: the foundation axis, competitor smoke runs) is a trial of its
own; other axes' rows stay in the job, and its page shows them.
`success` is a boolean outcome: it becomes reward 1.0/0.0 but is never a score.
"""

from __future__ import annotations

from typing import Any

from trials.ingest.formats.lime import parse_time
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    FormatTraits,
    ParsedDocument,
    ParsedJob,
    ParsedPack,
    ParsedTrial,
    Problem,
    TaskRef,
    status_from_reward,
)
from trials.ingest.values import as_dict, clean_category, to_float, to_int, to_str

# Run keys that become columns; every other run key goes to provenance.
TRAITS = FormatTraits("openchrome", envelope_results=True, comparison_report="openchrome")
_RUN_COLUMNS = {"library", "taskId", "success", "failureCategory", "usd", "wallTimeMs"}
# Entry-level facts every run of that entry inherits (how it was measured).
_ENTRY_PROVENANCE = ("suite", "issue", "measurementMode", "claimScope", "stressMode", "claimEligibility")


def is_envelope(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("results"), list)
        and ("axis" in data or ("environment" in data and "competitors" in data))
    )


def is_headline_gates(data: Any) -> bool:
    return isinstance(data, dict) and ("global_required_fields" in data or "issue_gates" in data)


def _job_id(data: dict[str, Any], path: str) -> str:
    env = as_dict(data.get("environment"))
    parts = [to_str(data.get("axis")), to_str(env.get("capturedAt")), to_str(env.get("gitSha"))]
    return ":".join(p for p in parts if p) or path


def _configuration(library: str, data: dict[str, Any], mode: Any) -> ConfigurationRef:
    env = as_dict(data.get("environment"))
    llm = as_dict(env.get("llm"))
    competitor = next(
        (c for c in data.get("competitors") or [] if isinstance(c, dict) and c.get("name") == library), {}
    )
    return ConfigurationRef(
        key=library,
        agent_name=library,
        agent_version=to_str(competitor.get("version")),
        model_name=to_str(llm.get("model")),
        profiles={"mode": mode, "llm": llm, "competitor": competitor},
    )


# A per-library row of other axes (foundation, competitor smoke): library + status, no runs[].
_ROW_STATUSES = {"passed": "passed", "failed": "failed", "skipped": "skipped", "error": "errored", "errored": "errored"}


def is_status_row(row: Any) -> bool:
    return isinstance(row, dict) and bool(row.get("library")) and to_str(row.get("status")).lower() in _ROW_STATUSES


def _row_trial(
    row: dict[str, Any], data: dict[str, Any], job_key: str, job_id: str, index: int, status: str = ""
) -> ParsedTrial:
    """A per-library row as a trial: passed 1, failed 0, skipped unscored; its reason is kept."""
    library = to_str(row.get("library"))
    status = status or _ROW_STATUSES[to_str(row.get("status")).lower()]
    task = to_str(row.get("taskId") or row.get("taskContract") or row.get("task") or data.get("axis"))
    reward = {"passed": 1.0, "failed": 0.0}.get(status)
    wall_ms = to_float(row.get("durationMs") if row.get("durationMs") is not None else row.get("wallTimeMs"))
    reason = to_str(row.get("failure") or row.get("error") or row.get("skipReason"))
    return ParsedTrial(
        key=f"openchrome:{job_id}:{library}:{task}:row{index}",
        source_format="openchrome",
        name=f"{library} {task}",
        dataset=DatasetRef(to_str(data.get("axis"))),
        task=TaskRef(task) if task else None,
        configuration=_configuration(library, data, row.get("mode")),
        job_key=job_key,
        status=status,
        reward=reward,
        rewards={"passed": int(status == "passed")} if reward is not None else {},
        exception_message=reason if status in ("failed", "errored") else "",
        failure_category=clean_category(row.get("skipCategory") if status == "skipped" else row.get("failureCategory")),
        phases={"total": {"seconds": wall_ms / 1000}} if wall_ms is not None else {},
        provenance=_mock({k: v for k, v in row.items() if k not in ("library", "status")}, row, data),
        documents={"row": row},
    )


def is_mock(row: dict[str, Any], data: dict[str, Any]) -> bool:
    """A mock run (`live: false` on the row or in the envelope's `options`): it checks the harness,
    never the libraries, so it is never headline-eligible (seed 003)."""
    return row.get("live") is False or as_dict(data.get("options")).get("live") is False


def _mock(provenance: dict[str, Any], row: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The provenance with measurementMode "mock" where the run is one (`is_mock`), whatever mode it names."""
    return provenance | {"measurementMode": "mock", "live": False} if is_mock(row, data) else provenance


def auth_row_status(row: Any) -> str:
    """An auth-usability row (one per library: setup script LOC, profile attach, logged-in smoke): its
    local fixture smoke's status, else whether the logged-in smoke ran; "" when it is no such row."""
    if not isinstance(row, dict) or not row.get("library"):
        return ""
    smoke = to_str(row.get("localFixtureSmoke")).lower()
    if smoke in _ROW_STATUSES:
        return _ROW_STATUSES[smoke]
    logged_in = row.get("loggedInSmoked")
    return ("passed" if logged_in else "failed") if isinstance(logged_in, bool) else "unknown"


def is_time_sample(row: Any) -> bool:
    """A long-run reliability sample: a time offset and what was measured then (`tMs`, `rssBytes`), no library."""
    return isinstance(row, dict) and "tMs" in row and "library" not in row


def _series_trial(samples: list[dict[str, Any]], data: dict[str, Any], job_key: str, job_id: str) -> ParsedTrial:
    """A long-run reliability envelope as one trial: its results[] are time samples of one run (kept as
    its series), not tasks. Scored by its success drift's successes / attempts (or overallPassRate)."""
    competitors = [c for c in data.get("competitors") or [] if isinstance(c, dict) and c.get("name")]
    library = to_str(competitors[0]["name"]) if len(competitors) == 1 else to_str(data.get("axis"))
    bins = [b for b in data.get("successDrift") or [] if isinstance(b, dict)]
    attempts = sum(to_int(b.get("attempts")) or 0 for b in bins)
    successes = sum(to_int(b.get("successes")) or 0 for b in bins)
    reward = successes / attempts if attempts else to_float(data.get("overallPassRate"))
    stability = as_dict(data.get("stability"))
    task = f"{to_str(data.get('axis'))} long-run"
    offsets = [to_float(s.get("tMs")) for s in samples]
    duration = max((o for o in offsets if o is not None), default=None)
    status = status_from_reward(reward)
    keys = ("stability", "options", "overallPassRate", "zombieCount")
    return ParsedTrial(
        key=f"openchrome:{job_id}:{library}:series",
        source_format="openchrome",
        name=f"{library} {task}",
        dataset=DatasetRef(to_str(data.get("axis"))),
        task=TaskRef(task),
        configuration=_configuration(library, data, None),
        job_key=job_key,
        status=status,
        reward=reward,
        rewards={
            "successRate": reward,
            **({"suspectedLeak": int(bool(stability["suspectedLeak"]))} if "suspectedLeak" in stability else {}),
        }
        if reward is not None
        else {},
        phases={"total": {"seconds": duration / 1000}} if duration is not None else {},
        # the series itself is the trial's `timeSamples` document; its provenance says how many and over how long
        provenance=_mock({"timeSamples": len(samples)} | {k: data[k] for k in keys if k in data}, {}, data),
        documents={"timeSamples": samples, "successDrift": bins},
    )


def _flag(value: Any) -> int | None:
    return None if value is None else int(bool(value))


def _tokens(value: Any) -> tuple[int | None, int | None]:
    if isinstance(value, dict):
        return to_int(value.get("input")), to_int(value.get("output"))
    return None, None  # a bare number is a total: kept in provenance


def _run_trial(
    run: dict[str, Any], entry: dict[str, Any], data: dict[str, Any], job_key: str, job_id: str, index: int
) -> ParsedTrial:
    library = to_str(run.get("library"))
    task_id = to_str(run.get("taskId"))
    success = run.get("success")
    reward = None if success is None else float(bool(success))
    rewards = {
        name: _flag(run.get(name)) for name in ("success", "firstAttempt", "recovered") if run.get(name) is not None
    }
    tasks = {to_str(t.get("id")): t for t in entry.get("tasks") or [] if isinstance(t, dict)}
    wall_ms = to_float(run.get("wallTimeMs"))
    input_tokens, output_tokens = _tokens(run.get("tokens"))
    provenance = {k: entry[k] for k in _ENTRY_PROVENANCE if k in entry}
    provenance.update({k: v for k, v in run.items() if k not in _RUN_COLUMNS})
    provenance = _mock(provenance, run, data)
    status = "unknown" if success is None else ("passed" if success else "failed")
    return ParsedTrial(
        key=f"openchrome:{job_id}:{library}:{task_id}:{index}",
        source_format="openchrome",
        name=f"{library} {task_id}",
        dataset=DatasetRef(to_str(entry.get("suite") or data.get("axis")), ref=to_str(entry.get("issue"))),
        task=TaskRef(task_id, definition=tasks.get(task_id, {})) if task_id else None,
        configuration=_configuration(library, data, run.get("mode")),
        job_key=job_key,
        status=status,
        reward=reward,
        rewards=rewards,
        failure_category=clean_category(run.get("failureCategory")),
        phases={"total": {"seconds": wall_ms / 1000}} if wall_ms is not None else {},
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=to_float(run.get("usd")),
        provenance=provenance,
        documents={"run": run},
    )


def parse_envelope(data: dict[str, Any], path: str) -> ParsedPack:
    job_id = _job_id(data, path)
    job_key = "openchrome:" + job_id
    problems: list[Problem] = []
    env = as_dict(data.get("environment"))
    trials: list[ParsedTrial] = []
    entries: list[Any] = []
    rows_without_runs = 0
    row_trials: list[int] = []  # results[] indices made trials (per-library status rows)
    results = data["results"]
    samples = [r for r in results if is_time_sample(r)]
    if samples and len(samples) == len(results):
        # a long-run reliability envelope: one run sampled over time, one trial (its samples its series)
        trials.append(_series_trial(samples, data, job_key, job_id))
        results = []
    auth = to_str(data.get("axis")) == "auth-usability"
    for position, entry in enumerate(results):
        if auth and (status := auth_row_status(entry)):
            # auth-usability: one row per library (its setup cost and logged-in smoke), a trial each
            trials.append(_row_trial(entry, data, job_key, job_id, position, status))
            row_trials.append(position)
            entries.append(entry)
            continue
        if is_status_row(entry):
            trials.append(_row_trial(entry, data, job_key, job_id, position))
            row_trials.append(position)
            entries.append(entry)
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("runs"), list):
            rows_without_runs += 1  # other axes: the row itself is the evidence
            entries.append(entry)
            continue
        entries.append({k: v for k, v in entry.items() if k != "runs"} | {"run_count": len(entry["runs"])})
        for run in entry["runs"]:
            if isinstance(run, dict):
                trials.append(_run_trial(run, entry, data, job_key, job_id, len(trials)))
            else:
                problems.append(
                    Problem(path, "run row is not an object", "$.results[].runs[]", kept="in the job extra")
                )
                entries[-1].setdefault("unreadable_runs", []).append(run)
    job = ParsedJob(
        key=job_key,
        name=to_str(data.get("axis")) or path,
        source_format="openchrome",
        started_at=parse_time(env.get("capturedAt"), path, "$.environment.capturedAt", problems),
        extra={k: v for k, v in data.items() if k != "results"}
        | {"results": entries, "rows_without_runs": rows_without_runs, "row_trials": row_trials}
        | ({"time_samples": len(samples)} if samples and not results else {}),
    )
    return ParsedPack(kind="openchrome", jobs=[job], trials=trials, problems=problems, trial_count=len(trials))


def parse_headline_gates(data: dict[str, Any], path: str) -> ParsedDocument:
    def size(key: str) -> int:
        value = data.get(key)
        return len(value) if isinstance(value, list | dict) else 0

    return ParsedDocument(
        kind="openchrome-headline-gates",
        path=path,
        title=f"headline gates ({to_str(data.get('status')) or 'no status'})",
        data=data,
        counts={
            "required_fields": size("global_required_fields"),
            "issue_gates": size("issue_gates"),
            "eligible_evidence_tiers": size("eligible_evidence_tiers"),
        },
    )


def parse(data: Any, path: str) -> ParsedPack | None:
    if is_envelope(data):
        return parse_envelope(data, path)
    if is_headline_gates(data):
        document = parse_headline_gates(data, path)
        return ParsedPack(kind=document.kind, documents=[document])
    return None
