"""Where a QC item's evidence refs point on the trial page: "step 6" and "tool_call call_8" link to their step.

A few queries per item whatever the number of refs: the trial's trajectories, the steps
and the tool calls the refs name.
"""

from __future__ import annotations

from trials.models import Step, ToolCall, Trajectory, Trial, step_url
from trials.models.qc import QCItemCitation
from trials.reading.steps import main_trajectory
from trials.triage.prefill import names_of_paths, trajectory_names

TAB_OF_KIND = {"artifact": "artifacts", "criterion": "verifier"}


def evidence_links(trial: Trial, refs: list[dict[str, str]], item_step: str = "") -> dict[str, object]:
    """Each ref with its `url` (None when the trial no longer has what it names); `step_url` for the item's step."""
    trajectories = list(trial.trajectories.order_by("position", "pk"))
    main = main_trajectory(trial, trajectories)
    by_name = {name: pk for pk, name in trajectory_names(trial).items()}
    step_refs = {r["ref"] for r in refs if r.get("kind") == "step"} | ({item_step} if item_step else set())
    wanted: dict[tuple[int, str], str] = {}  # (trajectory pk, step_id) -> the ref naming it
    for step_ref in step_refs:
        step_id, _, name = step_ref.partition("@")
        if name in by_name:
            wanted[(by_name[name], step_id)] = step_ref
    steps = Step.objects.filter(trial=trial, step_id__in={step_id for _, step_id in wanted}).values_list(
        "trajectory_id", "step_id", "index"
    )
    step_urls = {
        wanted[(t, s)]: _step_url(trial, index + 1, t, main.pk if main else None)
        for t, s, index in steps
        if (t, s) in wanted
    }
    call_ids = {r["ref"] for r in refs if r.get("kind") == "tool_call"}
    calls = (
        ToolCall.objects.filter(trial=trial, tool_call_id__in=call_ids)
        .order_by("pk")
        .values_list("tool_call_id", "step__trajectory_id", "step__index")
    )
    call_urls: dict[str, str] = {}
    for call_id, trajectory_pk, index in calls:
        call_urls.setdefault(call_id, _step_url(trial, index + 1, trajectory_pk, main.pk if main else None))
    linked = []
    for ref in refs:
        kind, value = ref.get("kind", ""), ref.get("ref", "")
        url = None
        if kind == "step":
            url = step_urls.get(value)
        elif kind == "tool_call":
            url = call_urls.get(value)
        elif kind == "trial":
            url = trial.get_absolute_url()
        elif kind in TAB_OF_KIND:
            url = f"{trial.get_absolute_url()}?tab={TAB_OF_KIND[kind]}"
        linked.append({"kind": kind, "ref": value, "url": url})
    return {"refs": linked, "step_url": step_urls.get(item_step)}


def _step_url(trial: Trial, number: int, trajectory_pk: int, main_pk: int | None) -> str:
    return step_url(trial.pk, number, None if trajectory_pk == main_pk else trajectory_pk)


def citation_links(citations: list[QCItemCitation]) -> list[dict[str, object]]:
    """Each trial a cluster's item cites, with its page and each evidence ref's link (its step's
    permalink, its verifier tab): three queries for them all, whatever their number."""
    trial_ids = [c.trial_id for c in citations]
    paths: dict[int, dict[int, str]] = {pk: {} for pk in trial_ids}
    main: dict[int, int] = {}
    rows = Trajectory.objects.filter(trial__in=trial_ids).order_by("trial_id", "position", "pk")
    for trial_id, pk, path, role in rows.values_list("trial_id", "pk", "path", "role"):
        paths[trial_id][pk] = path
        if role in ("main", "step"):
            main.setdefault(trial_id, pk)
    by_name = {t: {name: pk for pk, name in names_of_paths(p).items()} for t, p in paths.items()}
    for trial_id, of_trial in paths.items():
        if of_trial:
            main.setdefault(trial_id, next(iter(of_trial)))
    step_ids = {r["ref"].partition("@")[0] for c in citations for r in c.evidence_refs if r.get("kind") == "step"}
    index = {
        (t, trajectory, step_id): i
        for t, trajectory, step_id, i in Step.objects.filter(trial__in=trial_ids, step_id__in=step_ids).values_list(
            "trial_id", "trajectory_id", "step_id", "index"
        )
    }
    linked = []
    for citation in citations:
        trial = citation.trial
        refs = []
        for ref in citation.evidence_refs:
            kind, value = ref.get("kind", ""), ref.get("ref", "")
            url = None
            if kind == "trial":
                url = trial.get_absolute_url()
            elif kind == "step":
                step_id, _, name = value.partition("@")
                trajectory = by_name[trial.pk].get(name)
                number = index.get((trial.pk, trajectory, step_id)) if trajectory else None
                if trajectory is not None and number is not None:
                    url = _step_url(trial, number + 1, trajectory, main.get(trial.pk))
            elif kind in TAB_OF_KIND:
                url = f"{trial.get_absolute_url()}?tab={TAB_OF_KIND[kind]}"
            refs.append({"kind": kind, "ref": value, "url": url})
        linked.append({"trial": trial, "url": trial.get_absolute_url(), "refs": refs})
    return linked
