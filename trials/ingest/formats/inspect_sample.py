"""One Inspect sample (an `EvalSample` × epoch) as a trial. Pure: no Django.

Scores become reward keys with Inspect's own `value_to_float` (C = 1, P = 0.5, I = N = 0,
numbers and booleans as numbers, "yes"/"true" = 1, "no"/"false" = 0); the first scorer's
value is the headline reward. An `error` makes the trial errored; a `limit` is kept as the
trial's failure category (`message_limit`, `token_limit`, …), and a time or working limit
makes it a timeout, so a limit is never read as a plain failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import ijson

from trials.ingest.formats import inspect_events
from trials.ingest.records import (
    ConfigurationRef,
    DatasetRef,
    ParsedCriterion,
    ParsedTrajectory,
    ParsedTrial,
    Problem,
    TaskRef,
    status_from_reward,
)
from trials.ingest.values import as_dict, as_list, parse_iso, seconds_between, to_float, to_str

SHARED_LOG_SAMPLE_BYTES = 1 << 20
_SKIPPED = ("events", "messages")  # read lane by lane, or not at all (the events hold every message)
_TIMEOUTS = ("time", "working")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?:\(|:)")


@dataclass(frozen=True)
class Member:
    """Where a sample is: the log's pack-relative path and the member (or `samples[i]`) in it."""

    rel: str
    name: str
    size: int | None = None  # bytes of the sample's JSON, when known

    @property
    def path(self) -> str:
        return f"{self.rel}#{self.name}"


@dataclass(frozen=True)
class EvalContext:
    """What every sample of one eval shares: its job, dataset (the task) and configuration."""

    rel: str
    job_key: str
    task: str
    model: str
    solver: str
    version: str
    dataset: DatasetRef
    configuration: ConfigurationRef
    task_file: str

    @classmethod
    def of(cls, header: dict[str, Any], rel: str) -> EvalContext:
        evaluation = as_dict(header.get("eval"))
        task = to_str(evaluation.get("task_registry_name") or evaluation.get("task")) or "inspect"
        model = to_str(evaluation.get("model"))
        solver = _solver(evaluation, as_dict(header.get("plan")))
        eval_id = to_str(evaluation.get("eval_id")) or ":".join(
            to_str(evaluation.get(k)) for k in ("run_id", "task_id", "created")
        )
        profiles = {
            k: evaluation[k]
            for k in ("model_generate_config", "model_args", "task_args", "solver_args")
            if evaluation.get(k)
        }
        return cls(
            rel=rel,
            job_key=f"inspect:{eval_id}",
            task=task,
            model=model,
            solver=solver,
            version=to_str(as_dict(evaluation.get("packages")).get("inspect_ai")),
            dataset=DatasetRef(
                task,
                to_str(evaluation.get("task_version", "")),
                to_str(as_dict(evaluation.get("dataset")).get("location")),
            ),
            configuration=ConfigurationRef(
                key=f"inspect:{model}|{solver}", agent_name=solver, model_name=model, profiles=profiles
            ),
            task_file=to_str(evaluation.get("task_file")),
        )


def _solver(evaluation: dict[str, Any], plan: dict[str, Any]) -> str:
    """The eval's solver or agent (newer logs name it), else its plan's solvers in order."""
    if evaluation.get("solver"):
        return to_str(evaluation["solver"])
    names = [to_str(as_dict(step).get("solver")) for step in as_list(plan.get("steps"))]
    return " → ".join(n for n in names if n) or "inspect"


def top_level(stream: IO[bytes], skip: tuple[str, ...] = _SKIPPED) -> dict[str, Any]:
    """A big document's top-level keys with ijson, all but `skip` (whose values are scanned, not built)."""
    found: dict[str, Any] = {}
    key: str | None = None
    builder: ijson.ObjectBuilder | None = None
    for prefix, event, value in ijson.parse(stream, use_float=True):
        if prefix == "":
            if builder is not None and key is not None and event in ("map_key", "end_map"):
                found[key] = builder.value
                builder = None
            if event == "map_key":
                key = value
                builder = None if value in skip else ijson.ObjectBuilder()
            continue
        if builder is not None:
            builder.event(event, value)
    return found


# ---------------------------------------------------------------- scores


def value_to_float(value: Any) -> float | None:
    """inspect_ai.scorer.value_to_float: None only where Inspect warns and guesses 0."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if value == "C":
        return 1.0
    if value == "P":
        return 0.5
    if value in ("I", "N"):
        return 0.0
    if isinstance(value, str):
        lowered = value.lower()
        if lowered in ("yes", "true"):
            return 1.0
        if lowered in ("no", "false"):
            return 0.0
        return to_float(lowered)  # (finite numbers only, as Inspect's is_finite_number)
    return None


def _rewards(scores: dict[str, Any], where: Member, problems: list[Problem]) -> tuple[dict[str, Any], float | None]:
    rewards: dict[str, Any] = {}
    headline: float | None = None
    for number, (name, score) in enumerate(scores.items()):
        value = as_dict(score).get("value")
        values = value.items() if isinstance(value, dict) else [("", value)]
        for key, one in values:
            reward = value_to_float(one)
            if reward is None:
                message = f"score value {one!r} is not a number Inspect can read: counted as 0, as Inspect does"
                problems.append(
                    Problem(
                        where.rel,
                        message,
                        f"{where.name}#scores.{name}.value",
                        severity="warning",
                        kept="the value, in the sample's scores",
                    )
                )
                reward = 0.0
            rewards[f"{name}.{key}" if key else name] = reward
            if number == 0 and not key:
                headline = reward
    return rewards, headline


def _criteria(scores: dict[str, Any], rewards: dict[str, Any]) -> list[ParsedCriterion]:
    return [
        ParsedCriterion(
            name=name,
            score=rewards.get(name),
            reasoning=to_str(as_dict(score).get("explanation")),
            raw={k: v for k, v in as_dict(score).items() if k != "metadata"},
        )
        for name, score in scores.items()
    ]


# ---------------------------------------------------------------- the trial


def _status(sample: dict[str, Any], reward: float | None) -> str:
    if sample.get("error"):
        return "errored"
    limit = to_str(as_dict(sample.get("limit")).get("type"))
    if limit in _TIMEOUTS:
        return "timeout"
    status = status_from_reward(reward)
    # (a run a message, token or other limit stopped is errored-like, not a plain failure; a pass stays one)
    return "errored" if limit and status != "passed" else status


def _usage(sample: dict[str, Any]) -> tuple[int | None, int | None, int | None, float | None]:
    totals: dict[str, float] = {}
    for usage in as_dict(sample.get("model_usage")).values():
        for key in ("input_tokens", "output_tokens", "input_tokens_cache_read", "total_cost"):
            value = as_dict(usage).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value

    def count(key: str) -> int | None:
        return int(totals[key]) if key in totals else None

    return count("input_tokens"), count("output_tokens"), count("input_tokens_cache_read"), totals.get("total_cost")


def sample_trial(
    sample: dict[str, Any],
    events: Callable[[], Iterator[Any]],
    where: Member,
    context: EvalContext,
    streamed: bool,
) -> ParsedTrial:
    """The trial of one sample that matches EvalSample (inspect.py has checked its fields' types)."""
    problems: list[Problem] = []
    resolve = inspect_events.resolver(as_dict(sample.get("attachments")))
    sample_id, epoch = to_str(sample["id"]), sample["epoch"]
    scores = as_dict(sample.get("scores"))
    rewards, reward = _rewards(scores, where, problems)
    error, limit = as_dict(sample.get("error")), as_dict(sample.get("limit"))
    found = inspect_events.survey(events(), where.path)
    problems += found.problems
    input_tokens, output_tokens, cached_tokens, cost = _usage(sample)
    started = parse_iso(sample.get("started_at") or found.first)
    finished = parse_iso(sample.get("completed_at") or found.last)
    phases = {
        name: {"seconds": sample[key]}
        for name, key in (("total", "total_time"), ("working", "working_time"))
        if isinstance(sample.get(key), (int, float))
    }
    if "total" not in phases and (seconds := seconds_between(started, finished)) is not None:
        phases["total"] = {"seconds": seconds}
    message = to_str(error.get("message"))
    limit_kind = to_str(limit.get("type"))
    trial = ParsedTrial(
        key=f"{context.job_key}:{sample_id}:{epoch}",
        source_format="inspect",
        name=f"{sample_id}_epoch_{epoch}",
        dataset=context.dataset,
        task=TaskRef(sample_id, source=context.task_file, definition={"target": sample.get("target")}),
        configuration=context.configuration,
        job_key=context.job_key,
        attempt=epoch,
        status=_status(sample, reward),
        reward=reward,
        rewards=rewards,
        exception_type=(m.group(1) if (m := _EXCEPTION.match(message)) else "EvalError") if error else "",
        exception_message=message or to_str(limit.get("reason")) or (f"{limit_kind} limit reached" if limit else ""),
        exception_traceback=to_str(error.get("traceback")),
        failure_category=f"{limit_kind}_limit" if limit_kind else "",
        started_at=started,
        finished_at=finished,
        phases=phases,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
        cost_usd=cost,
        benchmark={
            "framework": "inspect_ai",
            "task": context.task,
            "sample_id": sample["id"],
            "epoch": epoch,
            # the same identity under the names the joinability checks read (trials/ingest/completeness.py)
            "datasetId": context.dataset.name,
            "taskId": sample_id,
            "trialId": f"{sample_id}_epoch_{epoch}",
            "harborJobRef": context.job_key,
        },
        # the sample holds its steps and its scores (with each scorer's explanation)
        refs={"trajectoryRef": where.path, **({"rewardDetailsRef": where.path} if scores else {})},
        provenance={
            "log": where.rel,
            "member": where.name,
            "inspect_version": context.version,
            "sample_uuid": to_str(sample.get("uuid")),
            "limit": limit_kind,  # (the failure classes read it: trials/models/failure_classes.py)
        },
        documents={"sample": {k: v for k, v in sample.items() if k not in (*_SKIPPED, "attachments", "events_data")}},
        criteria=_criteria(scores, rewards),
        # (writer.TrialBatch sizes a batch by the files named here: a small sample of a big log still joins one)
        files=[] if where.size is not None and where.size <= SHARED_LOG_SAMPLE_BYTES else [where.rel],
        present={"trajectory", "reward"} if scores else {"trajectory"},
        problems=problems,
    )
    trial.trajectories = _trajectories(sample, events, where, context, found, resolve, streamed)
    # (its documents' are found by the import's redaction stage, which withholds them all)
    trial.redactions = found.redactions
    # (a streamed sample's are read again from its log as they are written, like its steps)
    sandbox_calls = inspect_events.sandbox_calls(events(), where.path)
    trial.events = sandbox_calls if streamed else list(sandbox_calls)
    approvals = inspect_events.approvals(events(), resolve)
    trial.permissions = approvals if streamed else list(approvals)
    return trial


def _trajectories(
    sample: dict[str, Any],
    events: Callable[[], Iterator[Any]],
    where: Member,
    context: EvalContext,
    found: inspect_events.Survey,
    resolve: Callable[[Any], Any],
    streamed: bool,
) -> list[ParsedTrajectory]:
    """One trajectory per lane: the main agent first, then its subagents and the scoring calls."""
    first = inspect_events.input_steps(sample.get("input"), resolve)
    pool = as_list(as_dict(sample.get("events_data")).get("messages"))  # (log v3: `model` events' input_refs)
    trajectories = []
    for lane in found.lanes.values():
        if lane.lane_id != inspect_events.MAIN and not lane.steps:
            continue
        main = lane.lane_id == inspect_events.MAIN
        steps = inspect_events.lane_steps(events(), lane.lane_id, first if main else [], found.lanes, resolve, pool)
        trajectories.append(
            ParsedTrajectory(
                path=where.path if main else f"{where.path}@{lane.lane_id}",
                role="main" if main else "subagent",
                schema_version="",
                session_id=to_str(sample.get("uuid")),
                trajectory_id=lane.lane_id,
                agent={
                    "name": context.solver if main else lane.name,
                    "model_name": context.model,
                    **({"span_type": lane.span_type, "parent": lane.parent} if not main else {}),
                },
                final_metrics=None,
                header={"inspect": {"lane": lane.lane_id, "name": lane.name}},
                steps=steps if streamed else list(steps),
                problems=[],
                streamed=streamed,
            )
        )
    return trajectories
