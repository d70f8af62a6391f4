"""A redacted context value never reaches an agent: no MCP tool's answer holds it, whatever it reads."""

from __future__ import annotations

import json

import anyio
import httpx2
from django.core.management import call_command
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from tests.builders import demo_jobs, make_user
from trials import search
from trials.demo import SECRET
from trials.models import Trial


def test_no_tool_answers_a_redacted_value(live_server, transactional_db, tmp_path):
    call_command("import_packs", str(demo_jobs(tmp_path)), "--no-progress")
    search.index_pending()
    trial = Trial.objects.filter(context_records__redaction_state="masked").first()
    assert trial is not None
    key = Token.objects.create(user=make_user("ada", "approver")).key
    words = SECRET.rsplit("-", 1)[0]  # part of it: a search answer names its own query

    async def main() -> list[str]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Token {key}"}, timeout=60)
        async with Client(streamable_http_client(f"{live_server.url}/mcp/", http_client=http)) as client:
            answers = []
            for name, arguments in (
                ("find_trials", {"q": f"id = {trial.pk}"}),
                ("find_trials", {"q": f'message ~ "{words}" or cause ~ "{words}"'}),
                ("trial_summary", {"trial_id": trial.pk}),
                ("trial_steps", {"trial_id": trial.pk}),
                ("search_steps", {"query": words}),
                ("list_clusters", {}),
                ("triage_queue", {}),
            ):
                answers.append((await client.call_tool(name, arguments)).model_dump_json())
            for number in range(1, trial.step_count + 1):
                answers.append(
                    (await client.call_tool("trial_step", {"trial_id": trial.pk, "number": number})).model_dump_json()
                )
            return answers

    answers = anyio.run(main)
    assert len(answers) >= 7 + trial.step_count
    for answer in answers:
        assert SECRET not in answer and SECRET not in repr(json.loads(answer))
