"""Live trials: what a runner's commands write (start, events and steps, reward, completion), decided
here and written by the importer's writer for running trials (trials/imports/appends.py).

A live trial is stored like an imported one, through the importer's stages (parse, redact,
write, index, sign): a Trial keyed as its Lime evidence pack would be (`lime:<trialId>`, so a
pack imported later joins it; its row `rows.trial_row` of what `lime.parse_evidence_pack` read
of the spine), RuntimeEvent rows, and one main Trajectory whose Step rows point into a segment
blob per POST of steps (a POST writes its own steps only). On completion the segments are
compacted into its ATIF file, stored as if imported; a trial with events and no steps gets a
trajectory derived from its events (derive.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from trials import search
from trials.imports import appends, rescrub
from trials.ingest.context_kinds import collect_redactions, record_kind
from trials.ingest.formats import lime
from trials.ingest.formats.atif_checks import validate_step
from trials.ingest.records import (
    ParsedCriterion,
    ParsedJob,
    ParsedPermission,
    ParsedStep,
    ParsedTrajectory,
    ParsedTrial,
    status_from_reward,
)
from trials.ingest.values import as_dict, parse_iso, to_float
from trials.live.trajectories import (
    DERIVED_PATH,
    TRAJECTORY_PATH,
    compact,
    derive_from_events,
    index_steps,
    live_trajectory,
    new_steps,
    sent_trajectories,
    spool,
)
from trials.models import RuntimeEvent, Trajectory, Trial
from trials.thresholds import LIVE_FORMAT, at_threshold
from trials.triage import signatures

PROFILE = "lime-profile-0.4.0"
FINISHED = (lime.TRIAL_COMPLETED, lime.TRIAL_FAILED)


class SpineError(ValueError):
    """The request lacks what the command needs (the message names the JSON path)."""


def now_iso() -> str:
    return timezone.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------- start


def start_trial(data: dict[str, Any], started_by: Any = None) -> tuple[Trial, bool]:
    """The trial the spine's `benchmark.trialId` names, created running on first call (by the account
    `started_by`, the only one that writes into it: Trial.writable_by); (trial, created)."""
    bench = as_dict(data.get("benchmark"))
    trial_id = str(bench.get("trialId") or "").strip()
    if not trial_id:
        raise SpineError("benchmark.trialId is required (the trial's id in the runner)")
    key = f"lime:{trial_id}"[:500]
    if (existing := Trial.objects.filter(key=key).first()) is not None:
        return existing, False
    parsed = lime.parse_evidence_pack(
        {
            "benchmark": bench,
            "runtimeCorrelation": data.get("runtimeCorrelation") or {},
            "refs": data.get("refs") or {},
        },
        "start_benchmark_trial",
    )
    agent = as_dict(data.get("agent"))
    if parsed.configuration is not None and agent:
        parsed.configuration.agent_name = str(agent.get("name") or "")
        parsed.configuration.agent_version = str(agent.get("version") or "")
        parsed.configuration.model_name = str(agent.get("model_name") or agent.get("modelName") or "")
    job_ref = str(bench.get("harborJobRef") or bench.get("configurationId") or "unassigned")
    now = timezone.now()
    job_name = job_ref.rstrip("/").rpartition("/")[2][:300] or job_ref
    job = ParsedJob(f"live:{job_ref}"[:300], job_name, LIVE_FORMAT, started_at=now)
    parsed.key, parsed.source_format, parsed.name = key, LIVE_FORMAT, trial_id
    parsed.attempt = lime.to_attempt(data.get("attempt", bench.get("attempt")))
    parsed.status, parsed.started_at, parsed.documents = Trial.Status.RUNNING, now, {}
    parsed.provenance = {"live": {k: data[k] for k in ("timeoutSec", "sandbox", "agent") if k in data}}
    try:
        with transaction.atomic():
            trial = appends.start_trial(parsed, job, started_by, now)
            started = _command_event(
                trial,
                "benchmark.trial.started",
                "started",
                {
                    "attempt": trial.attempt,
                    "timeoutSec": data.get("timeoutSec"),
                    "sandbox": data.get("sandbox"),
                    "agent": agent or None,
                },
            )
            add_items(trial, [started], [])
    except IntegrityError:  # another request started the same trial first
        return Trial.objects.get(key=key), False
    return trial, True


def _command_event(trial: Trial, kind: str, name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A benchmark.* event in the seed's envelope, with an id a repeated command repeats."""
    correlation = trial.runtime_correlation or {}
    return {
        "type": kind,
        "eventId": f"evt_benchviewer_{name}_{trial.pk}",
        "schemaVersion": PROFILE,
        "runtimeId": correlation.get("runtimeId") or "benchviewer",
        "sessionId": trial.session_id or f"benchviewer-trial-{trial.pk}",
        **{k: correlation[k] for k in ("threadId", "turnId", "taskId", "runId") if correlation.get(k)},
        "timestamp": now_iso(),
        "benchmark": trial.benchmark,
        "refs": trial.refs,
        "payload": {k: v for k, v in payload.items() if v is not None},
    }


# ---------------------------------------------------------------- events and steps


@dataclass
class Accepted:
    events: int = 0  # new ones stored
    steps: int = 0
    duplicates: int = 0  # sent before (same eventId / step_id): kept as they were
    errors: list[dict[str, str]] = field(default_factory=list)  # {"path": "events[3]", "error": ...}

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "steps": self.steps, "duplicates": self.duplicates, "errors": self.errors}


class Refused(ValueError):
    """The POST is refused whole, nothing of it stored: `status` is the HTTP status it answers."""

    def __init__(self, status: int, errors: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{e['path']}: {e['error']}" for e in errors))
        self.status, self.errors = status, errors


def event_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return f"an event must be a JSON object, not {type(item).__name__}"
    if not isinstance(item.get("type"), str) or not item["type"]:
        return "type is required (a string such as tool.started)"
    if not isinstance(item.get("eventId"), str) or not item["eventId"]:
        return "eventId is required (a string): events are kept once by it"
    if item.get("sequence") is not None and not isinstance(item.get("sequence"), int):
        return f"sequence must be a whole number, not {item.get('sequence')!r}"
    return ""


def redaction_problem(item: dict[str, Any]) -> str:
    """What is wrong with a redaction event that names no item (it could withhold nothing), or ""."""
    payload = as_dict(item.get("payload"))
    if "redaction" not in item["type"] and record_kind(payload) != "redaction":
        return ""
    if any(target.strip() for target in collect_redactions(item)):  # (wherever in it the record is)
        return ""
    return "a redaction must name the item it redacts (payload.item_id, target_ref or item_refs); none is named"


def step_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return f"a step must be a JSON object, not {type(item).__name__}"
    step_id = item.get("step_id")
    if not isinstance(step_id, int) or isinstance(step_id, bool) or step_id < 1:
        return f"step_id must be a whole number from 1 (its place in the trajectory), not {step_id!r}"
    if item.get("source") not in ("system", "user", "agent"):
        return f"source must be system, user or agent, not {item.get('source')!r}"
    errors = [p for p in validate_step(item, step_id - 1, "step") if p.severity == "error"]
    return (
        f"{errors[0].json_path.removeprefix(f'steps[{step_id - 1}]').lstrip('.')}: {errors[0].message}"
        if errors
        else ""
    )


def add_items(
    trial: Trial, events: list[Any], steps: list[Any], where: str = "events[{}]", trajectory: Trajectory | None = None
) -> Accepted:
    """Store the new events and steps of a live trial; a bad item is named in `errors`, the good ones kept.

    The importer's stages, in its order: the new events and steps parsed (lime.parse_event,
    atif.parse_step) into one record of the trial (`_parsed_post`), withheld by every redaction the
    trial declares with these events and written (imports/appends.py `add_post`: the importer's
    redaction stage, then the steps' bodies a segment of their own, so a POST writes its own steps
    only), indexed (search.py); a redaction among the events scrubs again what the trial holds
    already (imports/rescrub.py).
    Idempotent: an event already stored (same eventId) or a step (same step_id) is skipped.
    Order comes from `sequence` and `step_id`, not from the order of arrival.
    `where`: how an event's place is named ("events[{}]", or "line {}" for a JSON-lines body).
    `trajectory`: where the steps go, the main one (`live_trajectory`) unless a subagent's is given.
    Raises Refused, storing nothing: a redaction that names no item (400), steps for a finished trial (409).
    """
    accepted = Accepted()
    good_events, refused = [], []
    for index, item in enumerate(events):
        place = where.format(index + 1 if where.startswith("line") else index)  # (lines count from 1)
        if problem := event_problem(item):
            accepted.errors.append({"path": place, "error": problem})
        elif problem := redaction_problem(item):
            refused.append({"path": place, "error": problem})
        else:
            good_events.append(item)
    if refused:  # (its steps may carry the item: none is stored until the redaction says which)
        raise Refused(400, refused)
    good_steps = []
    for index, item in enumerate(steps):
        if problem := step_problem(item):
            accepted.errors.append({"path": f"steps[{index}]", "error": problem})
        else:
            good_steps.append(item)
    with transaction.atomic():
        # one writer per trial at a time (NO KEY: rows pointing at the trial are inserted meanwhile)
        locked = Trial.objects.select_for_update(no_key=True).get(pk=trial.pk)
        if steps and locked.status != Trial.Status.RUNNING and (late := _late_steps(trial, trajectory, steps)):
            error = f"trial {trial.pk} is {locked.status}: a step comes before its completion, not after"
            raise Refused(409, [{"path": f"steps[{index}]", "error": error} for index in late])
        before = trial.redactions()
        new_events = _new_events(trial, good_events)
        target = (trajectory or live_trajectory(trial)) if good_steps else None
        post = _parsed_post(trial, new_events, target, new_steps(target, good_steps) if target else [], before)
        written = appends.add_post(trial, post, target, spool())
        accepted.events = len(new_events)
        accepted.duplicates += len(good_events) - len(new_events)
        if target is not None:
            index_steps(trial, target, written)
            accepted.steps = len(written)
            accepted.duplicates += len(good_steps) - len(written)
        if _adds_to(before, post.redactions):  # a redaction arrived: what the trial holds already is scrubbed by it
            rescrub_live(trial)
        appends.seen(trial, timezone.now())
        # (an event sent again changes nothing: the first completion of a trial is its completion)
        _apply_benchmark_events(trial, [e.raw for e in post.events if e.type.startswith("benchmark.")])
    return accepted


def _parsed_post(
    trial: Trial,
    events: list[dict[str, Any]],
    target: Trajectory | None,
    steps: list[ParsedStep],
    before: dict[str, dict[str, Any]],
) -> ParsedTrial:
    """What the POST adds, as the importer's record of a trial: its new events parsed, the new steps as
    its one trajectory (the row's: its header was written when it was made), the trial's redactions."""
    parsed = [lime.parse_event(obj, "events") for obj in events]
    lanes = [] if target is None else [ParsedTrajectory(target.path, target.role, "", "", "", {}, None, {}, steps, [])]
    return ParsedTrial(trial.key, trial.source_format, trial.name, events=parsed, trajectories=lanes, redactions=before)


def _late_steps(trial: Trial, trajectory: Trajectory | None, steps: list[Any]) -> list[int]:
    """The places of the steps a finished trial does not hold already (a retry of one it holds is no news)."""
    numbers = [item.get("step_id") if isinstance(item, dict) else None for item in steps]
    wanted = [n - 1 for n in numbers if isinstance(n, int) and n > 0]
    main = trial.steps.filter(trajectory__path=TRAJECTORY_PATH)
    held_in = trial.steps.filter(trajectory=trajectory) if trajectory else main
    held = set(held_in.filter(index__in=wanted).values_list("index", flat=True))
    return [place for place, n in enumerate(numbers) if not (isinstance(n, int) and n - 1 in held)]


def _adds_to(before: dict[str, dict[str, Any]], named: dict[str, dict[str, Any]]) -> bool:
    """Does `named` redact an item, or a field of one, that `before` did not?"""
    return any(
        key not in before or set(map(str, entry["fields"])) - set(map(str, before[key]["fields"]))
        for key, entry in named.items()
    )


def _new_events(trial: Trial, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events not stored before (by eventId; the first of repeats in one POST)."""
    if not items:
        return []
    unique = {item["eventId"][:200]: item for item in reversed(items)}
    known = set(RuntimeEvent.objects.filter(trial=trial, event_id__in=list(unique)).values_list("event_id", flat=True))
    return _first_completion_only(trial, [item for key, item in unique.items() if key not in known])


def _first_completion_only(trial: Trial, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events less a completion that repeats one: the runner's own `benchmark.trial.completed`,
    then `complete_benchmark_trial` (whatever their eventIds), leave one (the first is the completion)."""
    done = trial.events.filter(type__in=FINISHED).exists()
    kept = []
    for item in items:
        if item["type"] in FINISHED:
            if done:
                continue
            done = True
        kept.append(item)
    return kept


def rescrub_live(trial: Trial) -> None:
    """A redaction that arrived after what it covers: the importer's re-scrub (imports/rescrub.py), then what
    the live path made of the stored steps again from the scrubbed ones: ATIF file, index, cluster."""
    trial.refresh_from_db()
    rescrub.scrub_trial(trial, spool())
    made = (sent_trajectories(trial) | trial.trajectories.filter(path=DERIVED_PATH)).exclude(blob=None)
    for trajectory in made if trial.source_format == LIVE_FORMAT else []:
        compact(trajectory)  # (the file made from the unscrubbed steps goes)
    search.index_trial(trial)
    if trial.status != Trial.Status.RUNNING:
        signatures.sign_trials([trial.pk])


# ---------------------------------------------------------------- reward and completion


def reward_event(trial: Trial, data: dict[str, Any]) -> dict[str, Any]:
    """benchmark.reward.recorded from the command's body; raises SpineError on a reward that is not one."""
    reward = data.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float, dict)):
        raise SpineError('reward must be a number or an object of reward keys ({"reward": 1, ...})')
    if isinstance(reward, dict) and not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in reward.values()
    ):
        raise SpineError("reward: every reward key needs a number")
    keys = ("rewardDetails", "criteria", "verifierStatus", "failureCategory", "drift", "oracleSanity")
    payload = {"reward": reward, **{k: data[k] for k in keys if k in data}}
    return _command_event(trial, lime.REWARD_RECORDED, "reward", payload)


def completion_event(trial: Trial, data: dict[str, Any]) -> dict[str, Any]:
    status = data.get("status")
    if status not in ("completed", "failed"):
        raise SpineError(f"status must be completed or failed, not {status!r}")
    payload = {k: data[k] for k in ("failureCategory", "reason") if k in data}
    return _command_event(trial, f"benchmark.trial.{status}", "completed", {"status": status, **payload})


def _apply_benchmark_events(trial: Trial, events: list[dict[str, Any]]) -> None:
    """What benchmark.reward.recorded and benchmark.trial.completed / .failed say about the trial."""
    for event in sorted(events, key=lambda e: e["type"] != lime.REWARD_RECORDED):  # reward first
        payload = as_dict(event.get("payload"))
        trial.refresh_from_db()
        if event["type"] == lime.REWARD_RECORDED:
            _record_reward(trial, payload)
        elif event["type"] in FINISHED:
            _finish(trial, event, payload)
    if events and trial.status != Trial.Status.RUNNING:  # its failure cluster and flags, as an import's
        signatures.sign_trials([trial.pk])


def _record_reward(trial: Trial, payload: dict[str, Any]) -> None:
    reward = payload.get("reward")
    rewards = reward if isinstance(reward, dict) else {"reward": reward}
    value = rewards.get("reward", next(iter(rewards.values()), None)) if rewards else None
    trial.rewards = rewards
    trial.reward = to_float(value)
    category = lime.clean_category(payload.get("failureCategory"))
    if category:
        trial.failure_category = category
    trial.provenance = {**trial.provenance, "reward": {k: v for k, v in payload.items() if k != "reward"}}
    if trial.status != Trial.Status.RUNNING:
        trial.status = at_threshold(trial.dataset, status_from_reward(trial.reward), trial.reward)
    criteria = payload.get("criteria")
    appends.record_reward(trial, [_criterion(c) for c in criteria] if isinstance(criteria, list) else None)


def _criterion(item: Any) -> ParsedCriterion:
    """One of a reward's criteria: an object with its name and score, or a name alone."""
    if isinstance(item, dict):
        return ParsedCriterion(str(item.get("name"))[:300], to_float(item.get("score")), raw=item)
    return ParsedCriterion(str(item)[:300], None, raw={"name": item})


def _finish(trial: Trial, event: dict[str, Any], payload: dict[str, Any]) -> None:
    now = timezone.now()
    category = lime.clean_category(payload.get("failureCategory"))
    if event["type"] == lime.TRIAL_FAILED:
        trial.status = Trial.Status.TIMEOUT if category == "timeout" else Trial.Status.FAILED
        trial.failure_category = category or trial.failure_category or "unknown"
        trial.exception_message = str(payload.get("reason") or "")
    else:  # (its dataset's pass threshold decides it, as it does an imported trial's)
        trial.status = at_threshold(trial.dataset, status_from_reward(trial.reward), trial.reward)
        if trial.status == Trial.Status.UNKNOWN:
            trial.status = Trial.Status.PASSED if trial.reward is None else trial.status
    trial.finished_at = parse_iso(event.get("timestamp")) or now
    if trial.started_at:
        trial.duration_sec = (trial.finished_at - trial.started_at).total_seconds()
    totals = trial.steps.aggregate(
        p=Sum("prompt_tokens"), c=Sum("completion_tokens"), k=Sum("cached_tokens"), cost=Sum("cost_usd")
    )
    trial.input_tokens, trial.output_tokens, trial.cached_tokens = totals["p"], totals["c"], totals["k"]
    trial.cost_usd = totals["cost"] if totals["cost"] is not None else trial.cost_usd
    appends.finish(trial, _permissions(trial), now)
    sent = sent_trajectories(trial).filter(step_count__gt=0)
    for trajectory in sent:
        compact(trajectory)
    if not sent and not trial.trajectories.exists() and derive_from_events(trial) is not None:
        search.unindex(trial)  # (indexed, maybe, while it had no steps)
    search.index_trial(trial)


def _permissions(trial: Trial) -> list[ParsedPermission]:
    """The permission decisions its action and permission events record, as an import reads them."""
    kinds = Q(type__startswith="action.") | Q(type__startswith="permission.") | Q(type__startswith="tool.")
    rows = trial.events.filter(kinds).order_by("sequence", "timestamp", "pk").values_list("raw", flat=True)
    events = [lime.parse_event(raw, "events") for raw in rows if isinstance(raw, dict)]
    return list(lime.permissions_from_events(events))
