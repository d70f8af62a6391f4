"""One status rule for a reward with no threshold set (issue 41: "a fractional reward is a score, not a
failure (a partial trial)"): every path that decides a trial by its reward writes passed at full marks,
partial above 0, failed at 0, the same for a Harbor folder, a Lime pack, an Inspect log, an OTLP file, a
trace POSTed to `/v1/traces`, a live trial its runner completed, an AgentV row and an OpenChrome long run.

Each input is written by its producer where one is installed (inspect_ai with `mockllm`, opentelemetry-sdk),
else as the shared reference's own file with its reward changed. The answer is the rule applied to the
reward the test wrote, read back through the trials API the pages read."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import get_model
from inspect_ai.scorer import Score, mean, scorer
from inspect_ai.solver import generate

from tests.builders import REFERENCE, import_path, status_by_rule, write_trial
from tests.imports.otlp_helpers import otlp_body, otlp_file, scored_trace
from tests.inspect_logs import MODEL, say
from tests.live.helpers import runner_client, spine
from trials.models import Trial

pytestmark = pytest.mark.django_db

REWARDS = (0.0, 0.6, 1.0)


def status_of(client, trial: Trial) -> str:
    return client.get(f"/api/trials/{trial.pk}/").json()["status"]


def harbor(tmp_path: Path, reward: float) -> Trial:
    trial = write_trial(tmp_path / "job", "fix-readme__HHHHHHH")
    result = orjson.loads((trial / "result.json").read_bytes())
    result["verifier_result"] = {"rewards": {"reward": reward}}
    (trial / "result.json").write_bytes(orjson.dumps(result))
    import_path(trial)
    return Trial.objects.get()


def lime(tmp_path: Path, reward: float) -> Trial:
    pack = orjson.loads((REFERENCE / "lime-agentruntime/benchmark-trial-pack.json").read_bytes())
    pack["metrics"]["reward"] = pack["reward"]["value"] = reward
    path = tmp_path / "benchmark-trial-pack.json"
    path.write_bytes(orjson.dumps(pack))
    import_path(path)
    return Trial.objects.get()


@scorer(metrics=[mean()])
def fixed(value: float):
    async def score(state, target) -> Score:
        return Score(value=value)

    return score


def inspect(tmp_path: Path, reward: float) -> Trial:
    task = Task(dataset=[Sample(id="s1", input="What is 1+2?", target="3")], solver=generate(), scorer=fixed(reward))
    model = get_model(MODEL, custom_outputs=[say("3", 10, 2)])
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.samples[0].scores["fixed"].value == reward  # (what inspect_ai wrote)
    import_path(Path(log.location))
    return Trial.objects.get()


def otlp(tmp_path: Path, reward: float) -> Trial:
    import_path(otlp_file(tmp_path / "run.json", scored_trace(reward, "swe-lite", "1.0"), []))
    return Trial.objects.get()


def agentv(tmp_path: Path, reward: float) -> Trial:
    path = tmp_path / "run.results.jsonl"
    path.write_text(json.dumps({"test_id": "refactor-001", "target": "gpt-4.1", "score": reward}) + "\n")
    import_path(path)
    return Trial.objects.get()


PATHS = {"harbor": harbor, "lime": lime, "inspect": inspect, "otlp": otlp, "agentv": agentv}


@pytest.mark.parametrize("reward", REWARDS)
@pytest.mark.parametrize("path", PATHS)
def test_a_reward_imported_by_any_format_gets_one_status(tmp_path, client_logged_in, path, reward):
    trial = PATHS[path](tmp_path, reward)
    assert trial.source_format == path and trial.reward == reward
    assert status_of(client_logged_in, trial) == status_by_rule(reward)


@pytest.mark.parametrize("reward", REWARDS)
def test_a_trace_posted_live_gets_the_same_status(transactional_db, client_logged_in, reward):
    runner, _ = runner_client()
    body = otlp_body(scored_trace(reward, "swe-lite", "1.0"))
    response = runner.post("/v1/traces", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    assert status_of(client_logged_in, Trial.objects.get()) == status_by_rule(reward)


@pytest.mark.parametrize("reward", REWARDS)
def test_a_live_trial_its_runner_completed_gets_the_same_status(transactional_db, client_logged_in, reward):
    runner, _ = runner_client()
    started = runner.post("/api/commands/start_benchmark_trial/", spine("live-a"), format="json")
    pk = started.json()["trial_id"]
    body = {"benchmark": {"trialId": "live-a"}, "reward": reward}
    assert runner.post("/api/commands/record_benchmark_reward/", body, format="json").status_code == 200
    done = {"trial_id": pk, "status": "completed"}
    assert runner.post("/api/commands/complete_benchmark_trial/", done, format="json").status_code == 200
    assert status_of(client_logged_in, Trial.objects.get(pk=pk)) == status_by_rule(reward)


def test_a_producers_own_verdict_still_decides(tmp_path, client_logged_in):
    """AgentV's `quality_failure` and an execution error are its verdicts, whatever the score."""
    rows = [
        {"testId": "wtg-replay-fail", "target": "codex", "score": 0.4, "executionStatus": "quality_failure"},
        {"test_id": "t-crash", "target": "codex", "score": 0.4, "execution_status": "execution_error"},
    ]
    path = tmp_path / "verdicts.results.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    import_path(path)
    statuses = {t.task.name: status_of(client_logged_in, t) for t in Trial.objects.all()}
    assert statuses == {"wtg-replay-fail": "failed", "t-crash": "errored"}
