"""docs/agents.md's configuration, as written: its JSON connects the SDK's client over HTTP and over
stdio, and its Codex entry runs the same command as the JSON's."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib

import anyio
import httpx2
import pytest
from django.db import connection
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from tests.builders import REPO, make_user

DOC = (REPO / "docs" / "agents.md").read_text()
TOOLS = {"find_trials", "trial_summary", "trial_steps", "trial_step", "search_steps", "list_clusters", "cluster"}


def _block(language: str) -> str:
    [found] = re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.S)
    return found


def _servers() -> dict:
    return json.loads(_block("json"))["mcpServers"]


def test_the_codex_entry_runs_the_json_entrys_command():
    codex = tomllib.loads(_block("toml"))["mcp_servers"]["benchviewer-local"]
    local = _servers()["benchviewer-local"]
    assert (codex["command"], codex["args"]) == (local["command"], local["args"])


def test_the_documented_http_entry_connects_with_a_token(live_server, transactional_db):
    entry = _servers()["benchviewer"]
    key = Token.objects.create(user=make_user("vera", "viewer")).key
    url = entry["url"].replace("http://127.0.0.1:8000", live_server.url)
    headers = {k: v.replace("YOUR_TOKEN", key) for k, v in entry["headers"].items()}

    async def main():
        async with Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert entry["type"] == "http" and TOOLS <= anyio.run(main)


@pytest.mark.sqlite_only("the stdio server is a subprocess reading the test's SQLite file")
def test_the_documented_stdio_entry_connects_as_the_user(transactional_db, isolated_storage):
    entry = _servers()["benchviewer-local"]
    make_user("vera", "viewer")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "DATA_DIR": str(isolated_storage)}
    command = entry["command"] if (REPO / entry["command"]).exists() else sys.executable  # (CI's venv may differ)
    args = [a.replace("YOUR_USER", "vera") for a in entry["args"]]
    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(REPO))

    async def main():
        async with Client(params) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            found = await client.call_tool("find_trials", {"q": 'status = "failed"'})
            return listed, found

    listed, found = anyio.run(main)
    assert TOOLS <= listed and not found.is_error and found.structured_content["count"] == 0
