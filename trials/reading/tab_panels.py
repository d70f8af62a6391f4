"""What each tab of the trial page shows: one function a tab, from the request and the trial."""

from collections.abc import Callable
from typing import Any

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest

from trials.ingest.formats import agentv
from trials.models import Trajectory, Trial
from trials.reading import artifacts, steps, tabs, text, transcript

EVENTS_PAGE = 50
TABS = [
    ("trajectory", "Trajectory"),
    ("context", "Context"),
    ("permissions", "Permissions"),
    ("verifier", "Verifier"),
    ("artifacts", "Artifacts"),
    ("logs", "Logs"),
    ("agent-logs", "Agent logs"),
    ("exception", "Exception"),
    ("config", "Config"),
    ("events", "Events"),
]
# The transcript's type filters, in the order the toolbar shows them.
HIDEABLE = ("messages", "reasoning", "tools", "permissions", "context", "runtime", "system", "copied")


def _trajectory_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    trajectory = steps.pick_trajectory(trial, trajectories, request.GET.get("t"))
    hide = [h for h in request.GET.get("hide", "").split(",") if h in HIDEABLE]
    query = request.GET.get("q", "").strip()
    context: dict[str, Any] = {
        "trajectory": trajectory,
        "hide": hide,
        "hideable": HIDEABLE,
        "q": query,
        "focus": number,
    }
    if trajectory is None:
        return context
    context["from_result_row"] = agentv.is_output_trajectory(trajectory.path)  # AgentV output messages
    if number is not None:
        if number < 1 or number > max(trajectory.step_count, 1):
            raise Http404("no such step")
        start = steps.window_start(number)
    else:
        page = steps.requested_page(request.GET.get("page"))
        start = min((page - 1) * steps.STEP_WINDOW, steps.window_start(max(trajectory.step_count, 1)))
    main = steps.main_trajectory(trial, trajectories)
    window = steps.step_window(trial, trajectory, start, trajectories)
    context |= {
        "window": window,
        "records_after": transcript.interleave(trial, window),
        "timeline": transcript.timeline(trial, trajectories),
        "is_main": trajectory == main,
        "main_pk": main.pk if main else None,
        "referenced_from": steps.referenced_from(trial, trajectory, trajectories),
        "segments": steps.continuation_neighbours(trajectory, trajectories),
    }
    if query:
        offset = steps.requested_offset(request.GET.get("offset"))
        inside = request.GET.get("inside") == "1"
        found = steps.search_steps(trial, query, offset, inside_words=inside)
        if len(trajectories) > 1:  # say which file each match is in: "step 3" alone is ambiguous
            names = {t.pk: " ".join(filter(None, (t.role, t.step_name))) for t in trajectories}
            for match in found.matches:
                match["in"] = names.get(match["trajectory"], "")
        context |= {
            "matches": found.matches,
            "more_matches": found.more,
            "word_starts_only": found.word_starts_only,
            "inside": inside,
            "offset": offset,
            "next_offset": offset + len(found.matches),
        }
    return context


def _context_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    sections = tabs.context_sections(trial)
    return {"context_sections": sections, "context_total": sum(s["count"] for s in sections)}


def _permissions_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    return {"permissions": trial.permissions.order_by("requested_at", "pk")}


def _verifier_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    texts = trial.texts or {}
    verifier_texts = [(k, text.scrub(v)) for k, v in sorted(texts.items()) if k.startswith("verifier/")]
    tests = trial.ctrf_tests or []
    return {
        "criteria": trial.criteria.order_by("pk"),
        "verifier_texts": verifier_texts,
        "ctrf_tests": tests,
        "ctrf_passed": sum(1 for t in tests if t.get("status") == "passed"),
        "reward_details": (trial.documents or {}).get("reward_details"),
    }


def _artifacts_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    rows = artifacts.artifact_rows(trial, list(trial.artifacts.select_related("blob").order_by("pk")))
    return {"artifacts": rows, "has_recording": any(row.kind == "asciicast" for row in rows)}


def _logs_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    return {"logs": tabs.log_texts(trial)}


def _agent_logs_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    no_logs = "No agent logs (agent/*.txt, agent/command-N/) in this pack."
    return {"logs": tabs.agent_log_texts(trial), "no_logs": no_logs}


def _exception_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    return {"exception_text": text.scrub(trial.exception_traceback or (trial.texts or {}).get("exception.txt", ""))}


def _config_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    return {"config_documents": tabs.config_documents(trial)}


def _events_panel(
    request: HttpRequest, trial: Trial, trajectories: list[Trajectory], number: int | None
) -> dict[str, Any]:
    page = Paginator(trial.events.order_by("sequence", "timestamp", "pk"), EVENTS_PAGE).get_page(
        request.GET.get("page")
    )
    return {"events": page}


Panel = Callable[[HttpRequest, Trial, list[Trajectory], int | None], dict[str, Any]]
PANELS: dict[str, Panel] = {
    "trajectory": _trajectory_panel,
    "context": _context_panel,
    "permissions": _permissions_panel,
    "verifier": _verifier_panel,
    "artifacts": _artifacts_panel,
    "logs": _logs_panel,
    "agent-logs": _agent_logs_panel,
    "exception": _exception_panel,
    "config": _config_panel,
    "events": _events_panel,
}
