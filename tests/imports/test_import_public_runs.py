"""The public runs of ../shared/reference/public-runs-*: what their READMEs say a correct import shows."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.builders import REFERENCE, every_page, import_path
from trials.models import Document, ObservationResult, ToolCall, Trial

pytestmark = pytest.mark.django_db

RUNS_1 = REFERENCE / "public-runs-1"
NATIVE = RUNS_1 / "harbor-rfc-native-logs"


def test_a_mini_swe_agent_log_is_a_trial_whose_bash_blocks_are_its_tool_calls(client_logged_in):
    path = NATIVE / "mini-swe-agent-trajectory.json"
    data = orjson.loads(path.read_bytes())
    imp = import_path(path)
    assert [o["outcome"] for o in imp.outcomes] == ["imported"]
    trial = Trial.objects.get()
    commands = [
        m["content"].split("```bash\n", 1)[1].split("```", 1)[0].strip()
        for m in data["messages"]
        if m["role"] == "assistant" and "```bash" in m["content"]
    ]
    assert trial.step_count == len(data["messages"])
    assert [c.arguments["command"] for c in ToolCall.objects.order_by("step__index")] == commands
    assert trial.cost_usd == pytest.approx(data["info"]["model_stats"]["instance_cost"])
    assert trial.configuration.model_name == data["info"]["config"]["model"]["model_name"]
    steps = client_logged_in.get(f"/api/trials/{trial.pk}/steps/").json()
    assert "Hello, world!" in orjson.dumps(steps).decode()  # the commands' output is each call's observation


def as_mini_swe_agent_v2(data: dict) -> dict:
    """The v1 log as mini-swe-agent 2 writes it in tool-calling mode: each command in the message's
    `extra.actions` under a call id, its output a `tool` message naming that id."""
    messages, call_id = [], ""
    for m in data["messages"]:
        if m["role"] == "assistant" and "```bash" in m["content"]:
            command = m["content"].split("```bash\n", 1)[1].split("```", 1)[0].strip()
            call_id = f"call_{len(messages)}"
            thought = m["content"].split("```bash", 1)[0].strip()  # (the command is a call, not in the text)
            action = {"command": command, "tool_call_id": call_id}
            messages.append({**m, "content": thought, "extra": {"actions": [action]}})
        elif call_id and m["role"] == "user":
            parts = m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]
            output = "".join(part["text"] for part in parts)  # (a tool message's content is its text)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
            call_id = ""
        else:
            messages.append(m)
    return {**data, "trajectory_format": "mini-swe-agent-1.1", "messages": messages}


def test_a_mini_swe_agent_2_log_reads_its_actions_and_their_tool_messages(tmp_path):
    v2 = as_mini_swe_agent_v2(orjson.loads((NATIVE / "mini-swe-agent-trajectory.json").read_bytes()))
    path = tmp_path / "v2.traj.json"
    path.write_bytes(orjson.dumps(v2))
    imp = import_path(path)
    assert [o["outcome"] for o in imp.outcomes] == ["imported"], imp.problems
    trial = Trial.objects.get()
    answers = {m["tool_call_id"]: m["content"] for m in v2["messages"] if m["role"] == "tool"}
    assert answers and trial.step_count == len(v2["messages"]) - len(answers)
    calls = ToolCall.objects.order_by("step__index")
    commands = [a["command"] for m in v2["messages"] for a in m.get("extra", {}).get("actions", [])]
    assert [c.arguments["command"] for c in calls] == commands
    assert {c.tool_call_id for c in calls} == set(answers)
    results = ObservationResult.objects.filter(step__trial=trial)
    assert {r.source_call_id: r.content_size for r in results} == {k: len(v.encode()) for k, v in answers.items()}
    assert not [p for p in imp.problems if p["severity"] == "error"], imp.problems


def test_a_gemini_cli_session_is_a_trial_with_its_messages_and_tokens():
    path = NATIVE / "gemini-cli-trajectory.json"
    data = orjson.loads(path.read_bytes())
    import_path(path)
    trial = Trial.objects.get()
    assert trial.step_count == len(data["messages"])
    counted = [m["tokens"] for m in data["messages"] if "tokens" in m]
    assert trial.input_tokens == sum(t["input"] for t in counted)
    assert trial.output_tokens == sum(t["output"] for t in counted)
    assert trial.configuration.model_name == next(m["model"] for m in data["messages"] if m.get("model"))


@pytest.mark.parametrize("adapter", ["swebenchpro", "codepde"])
def test_a_parity_experiment_is_kept_as_a_document_with_every_run(adapter):
    path = RUNS_1 / "harbor-adapters" / adapter / "parity_experiment.json"
    data = orjson.loads(path.read_bytes())
    import_path(path)
    document = Document.objects.get()
    assert document.data == data and Trial.objects.count() == 0
    runs = sum(len(v) for e in data for m in e["metrics"] for k, v in m.items() if re.fullmatch(r".+_runs", k))
    assert document.counts == {"experiments": len(data), "metrics": sum(len(e["metrics"]) for e in data), "runs": runs}


RUNS_2 = REFERENCE / "public-runs-2"
DROID = RUNS_2 / "tb1-droid-5x2"


def _tb1_rows(folder):
    """Every results.json row of the run folders below `folder`: {trial_name: row}."""
    return {
        row["trial_name"]: row
        for path in folder.glob("*/*/results.json")
        for row in orjson.loads(path.read_bytes())["results"]
    }


def test_tb1_failures_cluster_by_how_the_source_says_they_ended_and_unscored_rows_are_in_clusters(client_logged_in):
    rows = _tb1_rows(DROID)
    import_path(DROID)
    clusters = every_page(client_logged_in, "/api/qc/clusters/?page_size=100")
    trial_names = dict(Trial.objects.values_list("pk", "name"))
    in_clusters = {trial_names[pk] for c in clusters for pk in c["trials"]}
    not_passed = {name for name, row in rows.items() if row["is_resolved"] is not True}
    assert not_passed <= in_clusters  # every failed or unscored trial is in a cluster
    modes = {c["description"]: {rows[trial_names[pk]]["failure_mode"] for pk in c["trials"]} for c in clusters}
    assert all(len(m) == 1 for m in modes.values()), modes  # a cluster never mixes the source's failure modes
    failing_modes = {row["failure_mode"] for name, row in rows.items() if name in not_passed}
    assert {next(iter(m)) for m in modes.values()} == failing_modes  # and each mode has its cluster
    by_class = {c["description"]: c["failure_class"] for c in clusters}
    resolved = {
        c["description"]: {rows[trial_names[pk]]["is_resolved"] is True for pk in c["trials"]} for c in clusters
    }
    for description, mode in modes.items():
        if mode & {"test_timeout", "parse_error"}:  # the harness's failure, not the agent's
            assert by_class[description] == "infrastructure"
        if mode == {"agent_timeout"}:  # the agent's failure; resolved all the same, a pass (flagged) apart
            assert by_class[description] == ("flagged_pass" if resolved[description] == {True} else "capability")
    assert {d for d, r in resolved.items() if True in r} == {d for d, c in by_class.items() if c == "flagged_pass"}


def test_a_harbor_agent_that_was_not_logged_in_is_an_errored_credential_failure(client_logged_in):
    job = RUNS_2 / "harbor-check-claude-code-notloggedin" / "2026-09-30__08-59-24"
    [trajectory] = job.glob("*/agent/trajectory.json")
    last = [s["message"] for s in orjson.loads(trajectory.read_bytes())["steps"] if s["source"] == "agent"][-1]
    assert "Not logged in" in last  # the README's known answer, in the file itself
    import_path(job)
    trial = Trial.objects.get()
    shown = client_logged_in.get(f"/api/trials/{trial.pk}/").json()
    assert (shown["status"], shown["reward"], shown["failure_class"]) == ("errored", 0.0, "infrastructure")
    assert "credential" in shown["failure_class_why"]
