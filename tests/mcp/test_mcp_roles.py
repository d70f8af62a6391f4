"""The MCP tools keep the API's rights per role: over `/mcp/` with each role's token, every role lists
and reads; only those who may file a QC item file one, only those who may share make a link."""

from __future__ import annotations

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from core import roles
from tests.builders import REFERENCE, import_path, make_user
from trials.models import QCItem, Trial

NOT_LOGGED_IN = REFERENCE / "public-runs-2" / "harbor-check-claude-code-notloggedin" / "2026-09-30__08-59-24"
ROLES = (roles.VIEWER, roles.RUNNER, roles.REVIEWER, roles.TRIAGER, roles.APPROVER)


def test_each_role_may_call_the_tools_its_rights_allow(live_server, transactional_db):
    import_path(NOT_LOGGED_IN)
    trial = Trial.objects.get()
    users = {role: make_user(f"u-{role}", role) for role in ROLES}
    keys = {role: Token.objects.create(user=user).key for role, user in users.items()}

    async def calls(key: str) -> dict[str, bool]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Token {key}"}, timeout=60)
        async with Client(streamable_http_client(f"{live_server.url}/mcp/", http_client=http)) as client:
            assert len((await client.list_tools()).tools) == 12
            found = await client.call_tool("find_trials", {"q": f"id = {trial.pk}"})
            filed = await client.call_tool("file_qc_item", {"trial_id": trial.pk, "severity": "P2", "note": "x"})
            shared = await client.call_tool("share_link", {"trial_id": trial.pk})
            return {
                "read": not found.is_error and found.structured_content["count"] == 1,
                "file": not filed.is_error,
                "share": not shared.is_error,
            }

    for role, user in users.items():
        answered = anyio.run(calls, keys[role])
        expected = {
            "read": True,
            "file": roles.has_right(user, roles.FILE_QC),
            "share": roles.has_right(user, roles.SHARE),
        }
        assert answered == expected, role
    filers = [users[r] for r in ROLES if roles.has_right(users[r], roles.FILE_QC)]
    assert QCItem.objects.count() == len(filers) == 2  # the triager's and the approver's, nobody else's


def test_no_token_is_a_401_naming_the_scheme(client, db):
    response = client.post("/mcp/", b"{}", content_type="application/json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
