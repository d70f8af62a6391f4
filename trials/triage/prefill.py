"""What the feedback form offers before anything is filed: the pre-filled category, the
evidence a trial can cite (steps, tool calls, criteria, artifacts, events) and similar failure modes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from trials.ingest.formats import lime
from trials.models import Artifact, RewardCriterion, Step, ToolCall, Trajectory, Trial, taxonomy
from trials.models.qc import FailureMode

MAX_EVIDENCE_CHOICES = 2000  # per kind; a trial with more still files, it just offers the first ones


@dataclass
class Prefill:
    category: str
    code: str
    source: str  # where the guess came from, shown next to the form
    verifier_errors: list[str]


def _failure_event_category(trial: Trial) -> tuple[str, str]:
    """failureCategory from the pack's benchmark events (trial.failed first, then the others).

    Only imported ones: those triage wrote (no pack) repeat a triager's call, not the pack's.
    """
    types = (lime.TRIAL_FAILED, lime.TRIAL_COMPLETED, lime.REWARD_RECORDED)
    events = trial.events.filter(pack__isnull=False, type__in=types).values_list("type", "payload")
    by_type = {etype: payload or {} for etype, payload in events}
    for etype in (lime.TRIAL_FAILED, lime.REWARD_RECORDED, lime.TRIAL_COMPLETED):
        value = str(by_type.get(etype, {}).get("failureCategory") or "")
        if value.lower() not in taxonomy.NOT_A_FAILURE:
            return value, etype
    return "", ""


def verifier_errors(trial: Trial) -> list[str]:
    """Errors the verifier wrote in reward-details (criteria with an `error`)."""
    errors = []
    for name, raw in trial.criteria.values_list("name", "raw"):
        error = (raw or {}).get("error") if isinstance(raw, dict) else None
        if error:
            errors.append(f"{name}: {error}")
    return errors


def prefill(trial: Trial) -> Prefill:
    """Category and code as the pack already says them (seed 000: failureCategory first)."""
    errors = verifier_errors(trial)
    value, etype = _failure_event_category(trial)
    if value:
        return Prefill(taxonomy.category_for(value), taxonomy.normalise_code(value), f"{etype} failureCategory", errors)
    if trial.failure_category and trial.failure_category.lower() not in taxonomy.NOT_A_FAILURE:
        value = trial.failure_category
        return Prefill(taxonomy.category_for(value), taxonomy.normalise_code(value), "trial failure category", errors)
    if trial.exception_type:
        category = taxonomy.category_from_exception(trial.exception_type)
        code = "timeout" if "timeout" in trial.exception_type.lower() else ""
        return Prefill(category, code, f"exception {trial.exception_type}", errors)
    if errors:
        return Prefill(taxonomy.Category.VERIFIER, "", "verifier errors", errors)
    return Prefill("", "", "", errors)


def queue_category(trial_values: dict[str, Any]) -> str:
    """The cheap pre-fill for list pages: from the trial row only (no event query); "" where the source names
    none (the queue shows the automatic failure class there instead)."""
    return (
        taxonomy.category_for(trial_values.get("failure_category"))
        or taxonomy.category_from_exception(trial_values.get("exception_type"))
        or ""
    )


def trajectory_names(trial: Trial) -> dict[int, str]:
    """Trajectory pk -> its name in a step ref (see names_of_paths)."""
    return names_of_paths(dict(trial.trajectories.order_by("position").values_list("pk", "path")))


def trajectory_names_of(trial_pks: list[int]) -> dict[int, dict[int, str]]:
    """{trial pk: trajectory_names(trial)} for many trials in one query (filing a cluster)."""
    paths: dict[int, dict[int, str]] = {pk: {} for pk in trial_pks}
    rows = Trajectory.objects.filter(trial__in=trial_pks).order_by("trial_id", "position")
    for trial_id, pk, path in rows.values_list("trial_id", "pk", "path"):
        paths[trial_id][pk] = path
    return {trial_id: names_of_paths(of_trial) for trial_id, of_trial in paths.items()}


def names_of_paths(paths: dict[int, str]) -> dict[int, str]:
    """Trajectory pk -> its name in a step ref, from one trial's {pk: path} in position order:
    "" for the trial's first trajectory; for the others (continuations, subagents, multi-step
    parts, whose step ids repeat the first's) the shortest end of its path that no other
    trajectory of the trial ends with."""
    names = {}
    for i, (pk, path) in enumerate(paths.items()):
        parts = path.split("/")
        name = path
        for n in range(1, len(parts)):
            name = "/".join(parts[-n:])
            if not any(o == name or o.endswith("/" + name) for opk, o in paths.items() if opk != pk):
                break
        names[pk] = "" if i == 0 else name[-250:]  # (a ref fits QCItem.step_id)
    return names


def step_ref(step_id: str, trajectory_name: str) -> str:
    """How an item cites a step: its step_id, with its file's name past the trial's first trajectory."""
    return f"{step_id}@{trajectory_name}" if trajectory_name else step_id


def step_choices(trial: Trial) -> list[tuple[str, str]]:
    names = trajectory_names(trial)
    seen: dict[str, str] = {}
    rows = (
        Step.objects.filter(trial=trial)
        .order_by("trajectory__position", "index")
        .values_list("trajectory_id", "step_id", "source")
    )
    for trajectory_id, step_id, source in rows[:MAX_EVIDENCE_CHOICES]:
        name = names[trajectory_id]
        seen.setdefault(step_ref(step_id, name), f"step {step_id} ({source})" + (f" in {name}" if name else ""))
    return list(seen.items())


def evidence_choices(trial: Trial) -> list[tuple[str, list[tuple[str, str]]]]:
    """Grouped choices "kind:ref" for the evidence multi-select: only refs this trial has."""
    limit = MAX_EVIDENCE_CHOICES
    tool_calls = (
        ToolCall.objects.filter(trial=trial)
        .exclude(tool_call_id="")
        .order_by("pk")
        .values_list("tool_call_id", "function_name", "step__step_id")[:limit]
    )
    artifacts = Artifact.objects.filter(trial=trial).order_by("pk").values_list("destination", "source")[:limit]
    criteria = RewardCriterion.objects.filter(trial=trial).order_by("pk").values_list("name", "score")[:limit]
    groups = [
        ("Trial", [(f"trial:{trial.key}", f"the whole trial ({trial.name})")]),
        ("Steps", [(f"step:{sid}", label) for sid, label in step_choices(trial)]),
        (
            "Tool calls",
            list(dict.fromkeys((f"tool_call:{cid}", f"{cid} · {fn} (step {sid})") for cid, fn, sid in tool_calls)),
        ),
        ("Artifacts", list(dict.fromkeys((f"artifact:{dest or src}", dest or src) for dest, src in artifacts))),
        (
            "Reward criteria",
            list(dict.fromkeys((f"criterion:{name}", f"{name} = {score}") for name, score in criteria)),
        ),
    ]
    return [(label, options) for label, options in groups if options]


def parse_ref(value: str) -> dict[str, str]:
    kind, _, ref = value.partition(":")
    return {"kind": kind, "ref": ref}


def ref_text(ref: dict[str, str], trial: Trial) -> str:
    """An evidence ref as one string for the Lime evidence pack."""
    if ref.get("kind") == "trial":
        return f"trial:{ref['ref']}"
    return f"trial:{trial.key}#{ref.get('kind')}:{ref.get('ref')}"


def similar_failure_modes(name: str, code: str = "") -> QuerySet:
    """Existing failure modes a new one would duplicate: same name (any case) or same code."""
    query = Q()
    if name.strip():
        query |= Q(name__iexact=name.strip())
    if code:
        query |= Q(code=code)
    if not query:
        return FailureMode.objects.none()
    modes = FailureMode.objects.filter(query).select_related("scenario")
    return modes
