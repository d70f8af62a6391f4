"""The MCP server through the SDK's own client: over stdio (`manage.py mcp`, a subprocess on the test's
SQLite file) and over streamable HTTP (`/mcp/` of a live server, the API's token), every tool listed and
called on the shared real runs; and the role matrix of the tools."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import httpx2
import orjson
import pytest
from django.db import connection
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from tests.builders import REFERENCE, REPO, import_path, make_user
from trials import search

DROID = REFERENCE / "public-runs-2" / "tb1-droid-5x2"
SONNET_1 = DROID / "20250923_droid_claude-4-sonnet" / "tb_rc2_sonnet_1"
OPUS_1 = DROID / "20250923_droid_claude-4-1-opus" / "tb_rc2_opus_1"
NOT_LOGGED_IN = REFERENCE / "public-runs-2" / "harbor-check-claude-code-notloggedin" / "2026-09-30__08-59-24"
TOOLS = {
    "find_trials", "trial_summary", "trial_steps", "trial_step", "search_steps", "list_clusters", "cluster",
    "triage_queue", "compare", "file_qc_item", "share_link",
}  # fmt: skip


def _rows(run: Path) -> list[dict]:
    return orjson.loads((run / "results.json").read_bytes())["results"]


def _task_delta(base: Path, cand: Path) -> float:
    """The mean over paired tasks of the candidate's minus the baseline's reward (one attempt a task)."""
    score = lambda run: {r["task_id"]: float(r["is_resolved"]) for r in _rows(run) if r["is_resolved"] is not None}  # noqa: E731
    b, c = score(base), score(cand)
    paired = sorted(set(b) & set(c))
    return sum(c[t] - b[t] for t in paired) / len(paired)


def _data(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


async def _walk(client) -> None:
    """What an agent asks: why did claude-code fail on the Harbor job, then opus against sonnet."""
    listed = {tool.name for tool in (await client.list_tools()).tools}
    assert TOOLS <= listed
    found = _data(await client.call_tool("find_trials", {"q": 'status = "errored" and agent ~ "claude-code"'}))
    assert found["count"] == 1  # the shared README: the job's one trial errored
    [trial] = found["results"]
    summary = _data(await client.call_tool("trial_summary", {"trial_id": trial["id"]}))
    assert summary["status"] == "errored" and summary["reward"] == 0.0 and summary["cluster"]
    window = _data(await client.call_tool("trial_steps", {"trial_id": trial["id"]}))
    assert "Not logged in" in json.dumps(window)
    step = _data(await client.call_tool("trial_step", {"trial_id": trial["id"], "number": 2}))
    assert "Not logged in · Please run /login" in json.dumps(step, ensure_ascii=False)
    hits = _data(await client.call_tool("search_steps", {"query": "login"}))
    assert f'"trial": {trial["id"]}' in json.dumps(hits) or f"/trials/{trial['id']}/" in json.dumps(hits), hits
    clusters = _data(await client.call_tool("list_clusters", {}))
    cluster_id = summary["cluster"]
    assert cluster_id in [c["id"] for c in clusters["results"]]
    one = _data(await client.call_tool("cluster", {"cluster_id": cluster_id}))
    assert trial["id"] in one["trials"] and one["failure_class"] != "capability"  # a credential failure
    queue = _data(await client.call_tool("triage_queue", {}))
    assert queue["count"] >= 1
    opus = _data(await client.call_tool("find_trials", {"q": 'job ~ "opus_1"'}))
    assert opus["count"] == len(_rows(OPUS_1))
    base = opus_job = None
    for name, q in (("sonnet", 'job ~ "sonnet_1"'), ("opus", 'job ~ "opus_1"')):
        row = _data(await client.call_tool("find_trials", {"q": q}))["results"][0]
        if name == "sonnet":
            base = row["job"]["id"]  # (one agent, so one configuration: the runs are compared as jobs)
        else:
            opus_job = row["job"]["id"]
    compared = _data(await client.call_tool("compare", {"baseline": base, "candidate": opus_job, "by_job": True}))
    assert compared["decision"] and compared["decisionReason"]
    assert compared["comparison"]["meanRewardDelta"] == pytest.approx(_task_delta(SONNET_1, OPUS_1))
    assert compared["tasks_count"] == 80 and len(compared["tasks"]) == 50 and compared["next_page"] == 2
    filed = _data(
        await client.call_tool("file_qc_item", {"trial_id": trial["id"], "severity": "P1", "note": "not logged in"})
    )
    assert filed["id"]
    shared = _data(await client.call_tool("share_link", {"trial_id": trial["id"]}))
    assert "/s/" in shared["url"]


@pytest.fixture
def runs(transactional_db):
    for path in (NOT_LOGGED_IN, SONNET_1, OPUS_1):
        import_path(path)
    search.index_pending()  # what the import's indexing task does after it
    return make_user("ada", "approver")


@pytest.mark.sqlite_only("the stdio server is a subprocess reading the test's SQLite file")
def test_every_tool_over_stdio_answers_on_the_shared_runs(runs, isolated_storage):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "IMPORTS_IN_THREAD": "0"}
    env |= {"DATA_DIR": str(isolated_storage)}  # its blobs are the test's (tmp_path/blobs)
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--user", "ada"], env=env, cwd=str(REPO)
    )

    async def main():
        async with Client(params) as client:
            await _walk(client)

    anyio.run(main)


def _http(live_server, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Token {key}"}, timeout=60)
    return Client(streamable_http_client(f"{live_server.url}/mcp/", http_client=http))


def test_every_tool_over_http_answers_on_the_shared_runs(runs, live_server):
    key = Token.objects.create(user=runs).key

    async def main():
        async with _http(live_server, key) as client:
            await _walk(client)

    anyio.run(main)
