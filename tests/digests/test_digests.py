"""Markdown digests of a trial, a failure cluster and a comparison (issue 42, Must 3), through the Django test
client on the shared real runs: what the raw files say, bounded on a long trajectory, redacted like the pages,
hostile text kept in its fence, refused without a login, served for `Accept: text/markdown`; and the MCP
`digest` tool through the SDK's own client over `/mcp/`."""

from __future__ import annotations

import json
import re

import anyio
import httpx2
import orjson
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from markdown_it import MarkdownIt
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from tests.builders import REFERENCE, good_steps, import_path, long_trajectory, make_user, tool_step, write_trial
from trials.digests.trial import BEFORE, MAX_CHARS, WINDOW
from trials.models import Configuration, Job, Trial

pytestmark = pytest.mark.django_db

TB1 = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet" / "2025-08-07__20-46-16"
DROID = REFERENCE / "public-runs-2" / "tb1-droid-5x2"
SONNET_1 = DROID / "20250923_droid_claude-4-sonnet" / "tb_rc2_sonnet_1"
OPUS_1 = DROID / "20250923_droid_claude-4-1-opus" / "tb_rc2_opus_1"
NOT_LOGGED_IN = REFERENCE / "public-runs-2" / "harbor-check-claude-code-notloggedin" / "2026-09-30__08-59-24"
MARKDOWN = "text/markdown; charset=utf-8"


def _viewer(name: str = "vera") -> Client:
    client = Client()
    client.force_login(make_user(name, "viewer"))
    return client


def _md(response) -> str:
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == MARKDOWN
    return response.content.decode()


def _rows(run) -> list[dict]:
    return orjson.loads((run / "results.json").read_bytes())["results"]


# ---------------------------------------------------------------- a trial and a cluster of Terminal-Bench 1


def test_a_tb1_trials_digest_says_its_task_reward_and_failure_mode_as_results_json_does():
    import_path(TB1.parent)
    viewer = _viewer()
    # one row of each (is_resolved, failure_mode) the run holds
    rows = {(row["is_resolved"], row["failure_mode"]): row for row in _rows(TB1)}
    assert len(rows) >= 5
    for (resolved, mode), row in rows.items():
        trial = Trial.objects.get(task__name=row["task_id"])
        text = _md(viewer.get(f"/trials/{trial.pk}.md"))
        reward = {True: "1.000", False: "0.000", None: "—"}[resolved]
        assert f"- Task: {row['task_id']} · dataset: terminal-bench-core@0.1.1" in text
        assert f"· reward {reward}" in text, (row["task_id"], text[:800])
        if mode != "unset":  # the run's own word for how it ended
            assert mode in text.split("## Steps")[0], (row["task_id"], text[:800])
        assert f"http://testserver/trials/{trial.pk}/" in text
        assert len(text) <= MAX_CHARS
    # a trial with a folder: its step permalinks, absolute
    crack = Trial.objects.get(task__name="crack-7z-hash.hard")
    assert f"(http://testserver/trials/{crack.pk}/steps/1/)" in _md(viewer.get(f"/trials/{crack.pk}.md"))


def test_a_tb1_clusters_digest_names_its_trials_and_tasks():
    import_path(TB1.parent)
    failed = [row for row in _rows(TB1) if row["failure_mode"] == "parse_error"]
    trial = Trial.objects.get(task__name=failed[0]["task_id"])
    assert trial.cluster is not None
    text = _md(_viewer().get(f"/qc/clusters/{trial.cluster_id}.md"))
    members = Trial.objects.filter(cluster=trial.cluster)
    assert f"# Failure cluster {trial.cluster.label}" in text
    assert f"- Trials: {members.count():,} " in text and f"- Class: {trial.cluster.failure_class}" in text
    for member in members:
        assert f"[trial {member.pk}](http://testserver/trials/{member.pk}/)" in text
        assert f"| {member.task.name} | " in text
    assert "## Signature" in text and "## Tasks" in text and "## Configurations" in text


# ---------------------------------------------------------------- a comparison of two real runs


def test_a_comparisons_digest_puts_the_decision_first_and_the_flips_at_the_top_of_its_table():
    import_path(SONNET_1)
    import_path(OPUS_1)
    base, cand = (Job.objects.get(name=run.name) for run in (SONNET_1, OPUS_1))
    query = f"baseline_job={base.pk}&candidate_job={cand.pk}"
    text = _md(_viewer().get(f"/comparisons/digest.md?{query}"))
    score = lambda run: {r["task_id"]: r["is_resolved"] for r in _rows(run) if r["is_resolved"] is not None}  # noqa: E731
    b, c = score(SONNET_1), score(OPUS_1)
    paired = sorted(set(b) & set(c))
    delta = sum(float(c[t]) - float(b[t]) for t in paired) / len(paired)
    flipped = {t for t in paired if b[t] != c[t]}
    lines = text.splitlines()
    assert lines[0].startswith("# Comparison: ") and lines[2].startswith("**Decision: ")
    assert re.match(r"\*\*Decision: (promote|hold|revert)\*\*\. \S", lines[2])
    assert f"- Mean reward delta: {delta:+.3f} paired over {len(paired)} tasks" in text
    assert "- McNemar exact p: " in text
    pass_to_fail = sum(1 for t in flipped if b[t])
    assert f"pass → fail {pass_to_fail}, fail → pass {len(flipped) - pass_to_fail}" in text
    table = text.split("## Per-task deltas")[1].splitlines()[4:]  # (title, blank, header, rule)
    rows = [line for line in table if line.startswith("| ")]
    assert len(rows) == 50 and "50 of 80" in text
    first = [row.split(" | ")[0].removeprefix("| ").split(" (")[0] for row in rows[: len(flipped)]]
    assert set(first) == flipped
    # the comparison page answers the same for ?format=md
    other = _viewer("otto")
    assert _md(other.get(f"/comparisons/?{query}&format=md")) == text
    assert _md(other.get(f"/comparisons/?{query}", headers={"accept": "text/markdown"})) == text
    assert other.get(f"/comparisons/?{query}")["Content-Type"].startswith("text/html")


def _task_means(rows: list[dict]) -> dict[str, float]:
    """Each task's mean over its scored attempts (`is_resolved` null: unscored, left out)."""
    by_task: dict[str, list[float]] = {}
    for row in rows:
        if row["is_resolved"] is not None:
            by_task.setdefault(row["task_id"], []).append(float(row["is_resolved"]))
    return {task: sum(values) / len(values) for task, values in by_task.items()}


def test_a_comparisons_digest_says_which_mean_reward_delta_is_paired_and_which_is_not():
    # mini-swe-agent (1 run) against droid + opus (5 runs): the sides scored different tasks, so the two deltas differ
    mini_run, opus = TB1.parent, DROID / "20250923_droid_claude-4-1-opus"
    import_path(mini_run)
    import_path(opus)
    mini = _task_means(_rows(TB1))
    opus_means = _task_means([row for run in sorted(opus.iterdir()) for row in _rows(run)])
    paired = mini.keys() & opus_means.keys()
    paired_delta = sum(opus_means[t] - mini[t] for t in paired) / len(paired)
    unpaired = sum(opus_means.values()) / len(opus_means) - sum(mini.values()) / len(mini)
    assert (len(paired), f"{paired_delta:+.3f}", f"{unpaired:+.3f}") == (47, "+0.430", "+0.376")  # the brief's figures
    base, cand = (Configuration.objects.get(key=folder.name).pk for folder in (mini_run, opus))
    text = _md(_viewer().get(f"/comparisons/digest.md?baseline={base}&candidate={cand}"))
    line = next(line for line in text.splitlines() if line.startswith("- Mean reward delta: "))
    assert line.startswith("- Mean reward delta: +0.430 paired over 47 tasks (CI95 "), line
    assert line.endswith("; +0.376 unpaired (the two sides' own means)"), line
    row = next(line for line in text.splitlines() if line.startswith("| Mean reward"))
    assert f"over {len(mini)} tasks" in row and f"over {len(opus_means)} tasks" in row and "+0.376 unpaired" in row
    # Terminal-Bench's own score, an unscored trial as 0, paired over all 80 tasks (the issue's +0.45 a task)
    assert "; +0.450 paired over 80 tasks, SE 0.058" in text
    # TB1 carries no Lime evidence: the evidence check reads as on the page, not as passed
    assert "- not applicable: Evidence as complete as the baseline's \\(not applicable to terminal-bench" in text


# ---------------------------------------------------------------- bounds: a long trajectory


def test_a_long_trajectorys_digest_shows_a_bounded_window_of_its_last_steps(tmp_path):
    trial = long_trajectory(tmp_path, steps=3000, observation_bytes=6000)
    text = _md(_viewer().get(f"/trials/{trial.pk}.md"))
    headers = re.findall(r"^### Step (\d+) ", text, flags=re.M)
    assert 1 <= len(headers) <= WINDOW and headers[-1] == "3000"
    assert len(text) <= MAX_CHARS
    assert re.search(r"… \(\d+ more characters", text)  # a 6,000-byte result is cut, and says by how much
    assert "### Step 1 " not in text


def test_a_trials_digest_costs_the_same_queries_whatever_its_length(tmp_path):
    viewer, counts = _viewer(), []
    for steps in (60, 1200):
        trial = long_trajectory(tmp_path / str(steps), steps=steps, name=f"long-{steps}")
        with CaptureQueriesContext(connection) as queries:
            _md(viewer.get(f"/trials/{trial.pk}.md"))
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1], counts  # a window of steps is read, never the whole trajectory


def test_a_trials_digest_opens_on_the_first_call_of_its_clusters_failing_tool(tmp_path):
    steps = [tool_step(n, "deploy" if n == 30 else "bash", {"command": f"step {n}"}) for n in range(1, 61)]
    trial_dir = write_trial(tmp_path / "jobs", steps=steps)
    result = orjson.loads((trial_dir / "result.json").read_bytes())
    result["verifier_result"] = {"rewards": {"reward": 0.0}}
    (trial_dir / "result.json").write_bytes(orjson.dumps(result))
    failed = {"type": "tool.failed", "eventId": "e1", "sessionId": SESSION, "timestamp": "2026-11-03T14:07:27Z",
              "payload": {"toolName": "deploy", "error": "exit 1"}}  # fmt: skip
    (trial_dir / "events.jsonl").write_bytes(orjson.dumps(failed) + b"\n")
    import_path(trial_dir)
    trial = Trial.objects.get()
    assert trial.cluster is not None and trial.cluster.signature["tool"] == "deploy"
    text = _md(_viewer().get(f"/trials/{trial.pk}.md"))
    headers = [int(n) for n in re.findall(r"^### Step (\d+) ", text, flags=re.M)]
    assert headers == list(range(30 - BEFORE, 30 - BEFORE + WINDOW))  # BEFORE steps before it, the rest after
    assert "### Step 30 · agent · **the failing step** · " in text
    assert "(the first call of the failing tool deploy)" in text and "Call deploy:" in text


# ---------------------------------------------------------------- redaction, hostile text, sign-in, Accept

CANARY = "LEAKCANARY-DIGEST"
ITEM = {"item_id": "item-42", "content": CANARY}
TEXT = json.dumps(ITEM)
KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUv0123456789"  # secret-shaped: masked on every page
HOSTILE = "```\n# owned\n[click](javascript:alert(1)) ````` <script>x</script>"
SESSION = "sess-bad-input"  # (the session id tests.builders.atif gives the trial)


def _redacted_failing_trial(root, agent: str) -> Trial:
    """A failed Harbor trial carrying a redacted context item in a step, its call and its exception, a key
    shape in a message, and hostile Markdown in a step, a tool's name and its result."""
    steps = good_steps()
    steps[1]["message"] = f"using {TEXT} with {KEY}"
    steps[1]["tool_calls"][0]["arguments"] = dict(ITEM)
    steps[1]["observation"]["results"][0]["content"] = TEXT
    steps.append(
        {
            "step_id": 3,
            "source": "agent",
            "message": HOSTILE,
            "tool_calls": [{"tool_call_id": "c3", "function_name": "x](javascript:alert(2))", "arguments": {}}],
            "observation": {"results": [{"source_call_id": "c3", "content": HOSTILE}]},
        }
    )
    trial_dir = write_trial(root / "jobs", steps=steps)
    result = orjson.loads((trial_dir / "result.json").read_bytes())
    result["verifier_result"] = {"rewards": {"reward": 0.0}}
    result["agent_info"]["name"] = agent  # (a configuration of its own: the two are compared)
    result["exception_info"] = {"exception_type": "RuntimeError", "exception_message": f"failed on {TEXT}"}
    (trial_dir / "result.json").write_bytes(orjson.dumps(result))
    common = {"sessionId": SESSION, "timestamp": "2026-11-03T14:07:27Z"}
    event = {**common, "type": "context.item.added", "eventId": "e1", "payload": {"item": dict(ITEM)}}
    (trial_dir / "events.jsonl").write_bytes(orjson.dumps(event) + b"\n")
    import_path(trial_dir)
    return Trial.objects.latest("pk")


@pytest.fixture
def redacted(tmp_path) -> list[Trial]:
    redaction = {"type": "context.redaction.applied", "eventId": "e9", "sessionId": SESSION,
                 "payload": {"redaction_id": "r1", "item_id": "item-42", "reason": "pii"}}  # fmt: skip
    (tmp_path / "redactions.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    import_path(tmp_path / "redactions.jsonl")
    return [_redacted_failing_trial(tmp_path / name, f"agent-{name}") for name in ("a", "b")]


def test_no_digest_holds_a_redacted_value_or_a_key(redacted):
    viewer = _viewer()
    first, second = redacted
    assert first.cluster_id is not None and first.configuration_id != second.configuration_id
    digests = {
        "trial": _md(viewer.get(f"/trials/{first.pk}.md")),
        "cluster": _md(viewer.get(f"/qc/clusters/{first.cluster_id}.md")),
        "comparison": _md(
            viewer.get(f"/comparisons/digest.md?baseline={first.configuration_id}&candidate={second.configuration_id}")
        ),
    }
    page = viewer.get(f"/trials/{first.pk}/").content.decode()
    assert CANARY not in page and KEY not in page  # (the page withholds them too: the same rows)
    for name, text in digests.items():
        assert CANARY not in text and KEY not in text, name
    assert "[redacted]" in digests["trial"] and "### Step 2 " in digests["trial"]


def test_hostile_text_stays_in_its_fence_and_makes_no_link_or_html(redacted):
    text = _md(_viewer().get(f"/trials/{redacted[0].pk}.md"))
    tokens = MarkdownIt("commonmark").parse(text)
    fenced = [t.content for t in tokens if t.type == "fence"]
    assert sum(HOSTILE in block for block in fenced) == 2  # the message and the result, each whole in its fence
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "owned" not in " ".join(headings)
    links = [c.attrs["href"] for t in tokens if t.children for c in t.children if c.type == "link_open"]
    assert links and all(str(href).startswith("http://testserver/") for href in links)
    rendered = MarkdownIt("commonmark").render(text)
    assert 'href="javascript' not in rendered and "<script>" not in rendered
    assert "Call x\\]\\(javascript:alert\\(2\\)\\):" in text  # the tool's name, escaped


def test_a_digest_needs_a_login_and_reads_with_the_apis_token(redacted):
    trial = redacted[0]
    anonymous = Client()
    assert anonymous.get(f"/trials/{trial.pk}.md").status_code == 401
    assert anonymous.get(f"/qc/clusters/{trial.cluster_id}.md").status_code == 401
    assert anonymous.get("/comparisons/digest.md?baseline=1&candidate=2").status_code == 401
    refused = anonymous.get(f"/trials/{trial.pk}/", headers={"accept": "text/markdown"})
    assert refused.status_code == 302 and refused["Location"].startswith("/accounts/login/")
    key = Token.objects.create(user=make_user("tom", "viewer")).key
    with_token = Client(headers={"authorization": f"Token {key}"}).get(f"/trials/{trial.pk}.md")
    assert _md(with_token).startswith(f"# Trial {trial.pk}: ")


def test_the_pages_answer_markdown_when_asked_and_html_otherwise(redacted):
    viewer, trial = _viewer(), redacted[0]
    for page, digest in ((f"/trials/{trial.pk}/", f"/trials/{trial.pk}.md"),
                         (f"/qc/clusters/{trial.cluster_id}/", f"/qc/clusters/{trial.cluster_id}.md")):  # fmt: skip
        asked = viewer.get(page, headers={"accept": "text/markdown"})
        assert _md(asked) == _md(viewer.get(digest)) and "Accept" in asked["Vary"]
        browser = viewer.get(page, headers={"accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
        assert browser.status_code == 200 and browser["Content-Type"].startswith("text/html")
        assert "Accept" in browser["Vary"]
        assert viewer.get(page, headers={"accept": "*/*"})["Content-Type"].startswith("text/html")


# ---------------------------------------------------------------- the MCP tool, through the SDK's client


def test_the_mcp_digest_tool_answers_a_trials_and_its_clusters_markdown(live_server, transactional_db):
    import_path(NOT_LOGGED_IN)
    trial = Trial.objects.get()
    key = Token.objects.create(user=make_user("vic", "viewer")).key

    async def main() -> tuple[str, str, bool]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Token {key}"}, timeout=60)
        async with McpClient(streamable_http_client(f"{live_server.url}/mcp/", http_client=http)) as client:
            one = await client.call_tool("digest", {"trial_id": trial.pk})
            group = await client.call_tool("digest", {"cluster_id": trial.cluster_id})
            neither = await client.call_tool("digest", {})
            return one.content[0].text, group.content[0].text, neither.is_error

    one, group, neither_is_error = anyio.run(main)
    assert one.startswith(f"# Trial {trial.pk}: ") and "Not logged in" in one and "**errored**" in one
    assert group.startswith("# Failure cluster ") and f"/trials/{trial.pk}/" in group
    assert neither_is_error
