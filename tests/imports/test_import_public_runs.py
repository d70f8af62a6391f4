"""The public runs of ../shared/reference/public-runs-*: what their READMEs say a correct import shows."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Document, ToolCall, Trial

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
