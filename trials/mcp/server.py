"""The MCP server's tools (the official `mcp` SDK's `MCPServer`): what a reviewer, a triager and an
approver do, for their coding agent.

Each tool answers through the REST API's own view (`through_api.call`), as the user the connection
speaks for (`CALLER`), so the API's rights and redaction hold; each answer is paged and bounded
(`through_api.answer`). The transports: `stdio.main` (`manage.py mcp`) and `http.McpEndpoint` (`/mcp/`).
"""

from __future__ import annotations

import contextvars
from typing import Any

from asgiref.sync import sync_to_async
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from trials.mcp.through_api import answer, call

CALLER: contextvars.ContextVar[Any] = contextvars.ContextVar("benchviewer_mcp_caller")
TRIAL_FIELDS = (
    "id",
    "name",
    "status",
    "reward",
    "attempt",
    "task",
    "job",
    "configuration",
    "dataset",
    "failure_category",
    "exception_type",
    "cluster",
    "is_flagged",
    "safety_flags",
    "step_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "duration_sec",
    "url",
)
SUMMARY_FIELDS = (
    *TRIAL_FIELDS,
    "exception_message",
    "failure_class",
    "failure_class_why",
    "failure_class_override",
    "cached_tokens",
    "refs",
    "started_at",
    "finished_at",
    "is_complete",
    "missing",
    "trajectories",
)

INSTRUCTIONS = """Benchviewer holds AI-agent benchmark trials. Start with find_trials (a `q` query such as
status = "failed" and model ~ "opus" and calls.bash > 50), then trial_summary, trial_steps (a window of
50 steps) and trial_step (one in full); list_clusters and cluster for failures that share a cause;
compare for two configurations. Answers are paged: ask for the next page rather than more at once."""

server: MCPServer = MCPServer(name="benchviewer", instructions=INSTRUCTIONS)


def _caller() -> Any:
    user = CALLER.get(None)
    if user is None or not user.is_authenticated:
        raise ToolError("not signed in: the MCP connection names no user")
    return user


async def _api(method: str, path: str, params: dict[str, Any] | None = None, body: Any = None) -> Any:
    """The API's answer, in the thread Django's database connection lives in."""
    user = _caller()
    return await sync_to_async(call, thread_sensitive=True)(user, method, path, params, body)


def _page(data: dict[str, Any], page: int, pick: tuple[str, ...] | None = None) -> dict[str, Any]:
    rows = data.get("results", [])
    if pick:
        rows = [{k: row.get(k) for k in pick if k in row} for row in rows]
    return {
        "count": data.get("count"),
        "page": page,
        "next_page": page + 1 if data.get("next") else None,
        "results": rows,
    }


def _paged_params(page: int) -> dict[str, Any]:
    return {"page": max(1, page)}


@server.tool()
async def find_trials(q: str = "", filters: dict[str, str] | None = None, page: int = 1) -> dict[str, Any]:
    """Trials matching a query `q` of the trials query language (fields: status, reward, class, cause, flag,
    flagged, model, agent, task, job, dataset, configuration, steps, tool_calls, calls.<tool>, tokens, cost,
    duration, started; and / or / not, = != > >= < <=, ~ contains, in (...); e.g. `status = "failed" and
    calls.bash > 50 and cause ~ "timeout"`) and/or the list's filters (job, task, configuration, status,
    role, flag...). A page of 50 (their main fields: trial_summary for more)."""
    params = {**(filters or {}), "q": q, **_paged_params(page)}
    return answer(_page(await _api("GET", "/api/trials/", params), page, TRIAL_FIELDS))


@server.tool()
async def trial_summary(trial_id: int) -> dict[str, Any]:
    """One trial: outcome, reward, failure class and cause, cluster, tokens, cost, duration, refs, trajectories."""
    data = await _api("GET", f"/api/trials/{trial_id}/")
    return answer({k: data.get(k) for k in SUMMARY_FIELDS if k in data})


@server.tool()
async def trial_steps(trial_id: int, page: int = 1, trajectory: str = "") -> dict[str, Any]:
    """A window of the trial's steps (50 a page; texts cut: read one step in full with trial_step).
    `trajectory`: another trajectory of the trial (ids in trial_summary's trajectories)."""
    return answer(await _api("GET", f"/api/trials/{trial_id}/steps/", {"page": max(1, page), "t": trajectory}))


@server.tool()
async def trial_step(trial_id: int, number: int, trajectory: str = "") -> dict[str, Any]:
    """One step in full (number from 1): its message, reasoning, tool calls and their results."""
    data = await _api("GET", f"/api/trials/{trial_id}/steps/{number}/", {"t": trajectory})
    return answer(data)


@server.tool()
async def search_steps(
    query: str, job: str = "", configuration: str = "", task: str = "", tool: str = "", page: int = 1
) -> dict[str, Any]:
    """Steps matching words, across trials (newest first): each hit with its trial, task and a snippet."""
    params = {"q": query, "job": job, "configuration": configuration, "task": task, "tool": tool, "page": page}
    return answer(await _api("GET", "/api/search/", params))


@server.tool()
async def list_clusters(filters: dict[str, str] | None = None, page: int = 1) -> dict:
    """Failure clusters (failed or flagged trials sharing a cause), the biggest first; `filters` as the
    trial list's (configuration, job, task...)."""
    params = {**(filters or {}), **_paged_params(page)}
    return answer(_page(await _api("GET", "/api/qc/clusters/", params), page))


@server.tool()
async def cluster(cluster_id: int) -> dict[str, Any]:
    """One failure cluster: its signature, class, trials, facets and the configurations it hits."""
    return answer(await _api("GET", f"/api/qc/clusters/{cluster_id}/"))


@server.tool()
async def triage_queue(filters: dict[str, str] | None = None, page: int = 1) -> dict:
    """Untriaged failures (failed, unscored, or flagged whatever the reward): filters cluster, category, job,
    configuration, task, assignee ("me", "none"), flag, sort."""
    params = {**(filters or {}), **_paged_params(page)}
    return answer(_page(await _api("GET", "/api/qc/queue/", params), page))


@server.tool()
async def compare(baseline: int, candidate: int, by_job: bool = False, page: int = 1) -> dict[str, Any]:
    """Two configurations (or two jobs, by_job): the decision and its reasons, the headline numbers and
    the per-task deltas (a page of 50 tasks, the largest changes first)."""
    keys = ("baseline_job", "candidate_job") if by_job else ("baseline", "candidate")
    data = await _api("GET", "/api/comparisons/", dict(zip(keys, (baseline, candidate), strict=True)))
    if data.get("status") != "done":
        return answer({"status": data.get("status"), "detail": "computing: ask again in a few seconds"})
    result = data.get("comparison", {})
    tasks = sorted(data.get("tasks", []), key=lambda r: -abs(r.get("delta") or 0.0))
    start = (max(1, page) - 1) * 50
    return answer(
        {
            "baseline": data.get("baseline"),
            "candidate": data.get("candidate"),
            "decision": result.get("decision"),
            "decisionReason": result.get("decisionReason"),
            "missingConditions": result.get("missingConditions"),
            "guard": result.get("guard"),
            "headline": data.get("headline"),
            "comparison": {k: v for k, v in result.items() if not isinstance(v, (list, dict))},
            "tasks_count": len(tasks),
            "tasks": [
                {k: row.get(k) for k in ("task", "delta", "baseline", "candidate", "headlineReasons") if k in row}
                for row in tasks[start : start + 50]
            ],
            "next_page": page + 1 if start + 50 < len(tasks) else None,
        }
    )


@server.tool()
async def file_qc_item(
    severity: str,
    note: str,
    trial_id: int | None = None,
    cluster_id: int | None = None,
    kind: str = "release-blocker",
    category: str = "",
    code: str = "",
    step_id: str = "",
    evidence_refs: list[str] | None = None,
) -> dict[str, Any]:
    """File a QC item from a trial or from a whole cluster (a triager's right: a viewer's agent files nothing).
    severity: P0 (worst) to P3; kind: release-blocker, failure-mode, replay-fixture, verifier-criterion;
    category, code and evidence_refs: the taxonomy's and the trial's (default: what its feedback form pre-fills)."""
    if (trial_id is None) == (cluster_id is None):
        raise ToolError("name one of trial_id or cluster_id")
    if not category or not evidence_refs:  # the form's own pre-fill, from the trial (the cluster's first)
        first = trial_id
        if first is None:
            found = await _api("GET", f"/api/qc/clusters/{cluster_id}/")
            first = (found.get("trials") or [None])[0]
        if first is not None:
            guess = await _api("GET", f"/api/trials/{first}/feedback/")
            if not category:
                category, code = guess.get("category") or "", code or guess.get("code") or ""
            offered = guess.get("evidenceRefs") or []
            chosen = [ref for ref in offered if ref.startswith("trial:")] or offered
            evidence_refs = evidence_refs or chosen[:1]
    path = f"/api/trials/{trial_id}/feedback/" if trial_id is not None else f"/api/qc/clusters/{cluster_id}/feedback/"
    body: dict[str, Any] = {"kind": kind, "severity": severity, "note": note, "category": category, "code": code}
    body |= {"step_id": step_id} if step_id else {}
    body |= {"evidence_refs": evidence_refs} if evidence_refs else {}
    return answer(await _api("POST", path, body=body))


@server.tool()
async def share_link(
    trial_id: int | None = None, baseline: int | None = None, candidate: int | None = None, qc_item: int | None = None
) -> dict[str, Any]:
    """A link for people without an account, to a trial, a comparison (baseline and candidate) or a QC item;
    it expires in 7 days."""
    body: dict[str, Any] = {}
    if trial_id is not None:
        body["trial"] = trial_id
    if baseline is not None or candidate is not None:
        body["comparison"] = {"baseline": baseline, "candidate": candidate}
    if qc_item is not None:
        body["qc_item"] = qc_item
    if len(body) != 1:
        raise ToolError("name one of: trial_id, baseline and candidate, qc_item")
    return answer(await _api("POST", "/api/shares/", body=body))


@server.tool()
async def digest(
    trial_id: int | None = None,
    cluster_id: int | None = None,
    baseline: int | None = None,
    candidate: int | None = None,
) -> str:
    """A Markdown digest to read whole: a trial (outcome, cause, figures, the steps around its failure), a
    failure cluster (cause, facets, trials) or a comparison of baseline and candidate (decision first)."""
    if trial_id is not None and cluster_id is None and baseline is None:
        return await _api("GET", f"/trials/{trial_id}.md")
    if cluster_id is not None and trial_id is None and baseline is None:
        return await _api("GET", f"/qc/clusters/{cluster_id}.md")
    if baseline is not None and candidate is not None and trial_id is None and cluster_id is None:
        return await _api("GET", "/comparisons/digest.md", {"baseline": baseline, "candidate": candidate})
    raise ToolError("name one of: trial_id, cluster_id, baseline and candidate")
