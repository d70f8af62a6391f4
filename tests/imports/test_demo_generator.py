"""The demo generator writes realistic, schema-valid, deterministic Harbor trial packs.

Run without the database: `pytest tests/imports/test_demo_generator.py -p no:django`.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from trials.demo import SECRET, write_demo, write_job, write_trajectory

pytestmark = pytest.mark.sqlite_only("no database: the generator only writes files")

SCHEMAS = Path("/work/shared/spec/harbor-0.25")
TRIAL_FILES = ("config.json", "result.json")


def _validator(name: str) -> Draft202012Validator:
    # The Harbor schemas are Pydantic output (JSON Schema 2020-12) without a $schema key.
    schema = orjson.loads((SCHEMAS / name).read_bytes())
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]


def _trials(job: Path) -> list[Path]:
    return sorted(p for p in job.iterdir() if p.is_dir())


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("demo")
    baseline, candidate = write_demo(out)
    return {"out": out, "baseline": baseline, "candidate": candidate}


@pytest.fixture(scope="module")
def all_trials(demo: dict[str, Path]) -> list[Path]:
    return _trials(demo["baseline"]) + _trials(demo["candidate"])


def test_the_demo_has_two_jobs_of_twenty_tasks_times_three_attempts(demo):
    assert demo["baseline"].name == "baseline-job"
    assert demo["candidate"].name == "candidate-job"
    for job in (demo["baseline"], demo["candidate"]):
        trials = _trials(job)
        assert len(trials) == 60
        for name in ("config.json", "result.json", "lock.json", "job.log"):
            assert (job / name).is_file()
        for trial in trials:
            task, suffix = trial.name.rsplit("__", 1)
            assert len(suffix) == 7 and len(task) <= 32
            assert all((trial / name).is_file() for name in TRIAL_FILES)


def test_every_trial_result_validates_against_the_trial_result_schema(all_trials):
    validator = _validator("TrialResult.schema.json")
    config_validator = _validator("TrialConfig.schema.json")
    for trial in all_trials:
        result = _load(trial / "result.json")
        errors = [e.message for e in validator.iter_errors(result)]
        assert not errors, (trial.name, errors[:3])
        assert not list(config_validator.iter_errors(_load(trial / "config.json")))
        assert result["trial_name"] == trial.name
        assert result["started_at"].endswith("Z") and result["finished_at"].endswith("Z")


def test_every_trajectory_validates_against_the_atif_schema(all_trials):
    validator = _validator("atif-trajectory.schema.json")
    checked = 0
    for trial in all_trials:
        path = trial / "agent" / "trajectory.json"
        if not path.exists():
            continue
        trajectory = _load(path)
        errors = [e.message for e in validator.iter_errors(trajectory)]
        assert not errors, (trial.name, errors[:3])
        # The rules the schema cannot express (harbor's trajectory_validator).
        for index, step in enumerate(trajectory["steps"]):
            assert step["step_id"] == index + 1
            call_ids = {c["tool_call_id"] for c in step.get("tool_calls") or []}
            for result in (step.get("observation") or {}).get("results", []):
                assert result["source_call_id"] is None or result["source_call_id"] in call_ids
        checked += 1
    assert checked > 100


def test_job_config_and_result_validate_against_their_schemas(demo):
    for job in (demo["baseline"], demo["candidate"]):
        assert not list(_validator("JobConfig.schema.json").iter_errors(_load(job / "config.json")))
        result = _load(job / "result.json")
        assert not list(_validator("JobResult.schema.json").iter_errors(result))
        assert result["n_total_trials"] == 60
        (key,) = result["stats"]["evals"]
        assert key == "terminus-2__gpt-5.4__benchviewer-demo/terminal-tasks"


def test_both_jobs_share_task_names_and_checksums(demo):
    def checksums(job: Path) -> dict[str, set[str]]:
        seen: dict[str, set[str]] = {}
        for trial in _trials(job):
            result = _load(trial / "result.json")
            seen.setdefault(result["task_name"], set()).add(result["task_checksum"])
        return seen

    baseline, candidate = checksums(demo["baseline"]), checksums(demo["candidate"])
    assert len(baseline) == 20
    assert baseline == candidate
    assert all(len(values) == 1 for values in baseline.values())


def test_the_secret_appears_only_in_context_event_files(demo):
    holders = {
        path.relative_to(demo["out"]).as_posix()
        for path in demo["out"].rglob("*")
        if path.is_file() and SECRET.encode() in path.read_bytes()
    }
    assert holders
    assert all(h.endswith("/agent/context-events.jsonl") for h in holders)
    # Exactly one masked item per trial carries it.
    for holder in holders:
        items = [e["data"]["item"] for e in _jsonl(demo["out"] / holder) if e["event_type"] == "context.item.added"]
        masked = [i for i in items if i["redaction_state"] == "masked"]
        assert len(masked) == 1 and SECRET in masked[0]["content"]
        assert masked[0]["sensitivity"] == "secret"
        assert masked[0]["policy_refs"] == ["policy://redaction/secrets"]


def test_generation_is_deterministic_for_a_given_seed(demo, tmp_path):
    again = tmp_path / "again"
    write_demo(again)
    assert _tree_hash(again) == _tree_hash(demo["out"])
    other = tmp_path / "other-seed"
    write_demo(other, tasks=3, attempts=2, seed=1)
    write_demo(tmp_path / "seed-0-small", tasks=3, attempts=2, seed=0)
    assert _tree_hash(other) != _tree_hash(tmp_path / "seed-0-small")


def test_token_and_cost_totals_are_the_sums_of_the_steps(all_trials):
    for trial in all_trials:
        path = trial / "agent" / "trajectory.json"
        if not path.exists():
            continue
        trajectory = _load(path)
        metrics = [s["metrics"] for s in trajectory["steps"] if s.get("metrics")]
        agent_result = _load(trial / "result.json")["agent_result"]
        final = trajectory["final_metrics"]
        assert agent_result["n_input_tokens"] == sum(m["prompt_tokens"] for m in metrics)
        assert agent_result["n_cache_tokens"] == sum(m["cached_tokens"] for m in metrics)
        assert agent_result["n_output_tokens"] == sum(m["completion_tokens"] for m in metrics)
        assert final["total_prompt_tokens"] == agent_result["n_input_tokens"]
        assert final["total_steps"] == len(trajectory["steps"])
        step_cost = sum(m["cost_usd"] for m in metrics)
        assert agent_result["cost_usd"] == pytest.approx(step_cost, abs=1e-9)
        assert final["total_cost_usd"] == agent_result["cost_usd"]
        assert all(m["cached_tokens"] <= m["prompt_tokens"] for m in metrics)


def test_timestamps_increase_through_each_trial(all_trials):
    for trial in all_trials:
        result = _load(trial / "result.json")
        phases = [result[p] for p in ("environment_setup", "agent_setup", "agent_execution")]
        if result["verifier"]:
            phases.append(result["verifier"])
        times = [result["started_at"]]
        for phase in phases:
            times += [phase["started_at"], phase["finished_at"]]
        times.append(result["finished_at"])
        assert times == sorted(times), trial.name
        events = _jsonl(trial / "agent" / "runtime-events.jsonl")
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        stamps = [e["timestamp"] for e in events]
        assert stamps == sorted(stamps), trial.name


def test_runtime_events_carry_the_ids_the_lime_profile_requires(all_trials):
    for trial in all_trials:
        for event in _jsonl(trial / "agent" / "runtime-events.jsonl"):
            assert event["schemaVersion"] == "lime-profile-0.4.0"
            for key in ("eventId", "runtimeId", "sessionId", "threadId", "turnId", "payload"):
                assert event[key], (trial.name, event["type"], key)
            kind = event["type"]
            if kind.startswith("tool."):
                assert event["stepId"] and event["toolCallId"]
            if kind.startswith("action."):
                assert event["actionId"]
            if kind.startswith("benchmark."):
                assert event["benchmark"]["trialId"] == trial.name
                assert event["taskId"] and event["runId"] and event["refs"]


def test_the_demo_contains_every_case_the_viewer_must_handle(demo, all_trials):
    results = {t: _load(t / "result.json") for t in all_trials}
    errored = [t for t, r in results.items() if r["exception_info"]]
    timeouts = [
        t
        for t in errored
        if results[t]["exception_info"]["exception_type"] == "AgentTimeoutError" and results[t]["verifier_result"]
    ]
    no_reward = [t for t, r in results.items() if r["verifier_result"] is None]
    assert 6 <= len(errored) <= 24 and timeouts and no_reward
    for trial in errored:
        assert (trial / "exception.txt").read_text().startswith("Traceback")
    for trial in no_reward:
        assert not (trial / "verifier" / "reward.json").exists()
        assert not (trial / "verifier" / "reward.txt").exists()

    assert any((t / "verifier" / "reward.txt").exists() for t in all_trials)
    for missing in (
        "agent/trajectory.json",
        "verifier/reward-details.json",
        "artifacts/manifest.json",
        "benchmark-trial-pack.json",
    ):
        assert any(not (t / missing).exists() and results[t]["verifier_result"] for t in all_trials), missing

    steps = [
        s
        for t in all_trials
        if (t / "agent" / "trajectory.json").exists()
        for s in _load(t / "agent" / "trajectory.json")["steps"]
    ]
    assert any(s.get("is_copied_context") for s in steps)
    assert any(
        (s.get("extra") or {}).get("context_management") == {"type": "compaction", "boundary": "replace"} for s in steps
    )
    contents = [r["content"] for s in steps for r in (s.get("observation") or {}).get("results", [])]
    assert any("<script>alert(1)</script>" in c and "<img src=x onerror=alert(2)>" in c for c in contents)


def test_a_candidate_trial_has_a_side_effect_after_a_denial(demo):
    def bypasses(job: Path) -> list[str]:
        found = []
        for trial in _trials(job):
            denied: set[str] = set()
            for event in _jsonl(trial / "agent" / "runtime-events.jsonl"):
                if event["type"] == "action.resolved" and event["payload"]["decision"] == "deny":
                    denied.add(event["toolCallId"])
                if event["type"] == "tool.completed" and event["toolCallId"] in denied:
                    found.append(trial.name)
        return found

    assert len(bypasses(demo["candidate"])) == 1
    assert bypasses(demo["baseline"]) == []


def test_the_candidate_is_better_on_average(demo):
    def mean(job: Path) -> float:
        return _load(job / "result.json")["stats"]["evals"]["terminus-2__gpt-5.4__benchviewer-demo/terminal-tasks"][
            "metrics"
        ][0]["mean"]

    assert mean(demo["candidate"]) > mean(demo["baseline"])


def test_manifests_list_files_that_exist_at_their_destinations(all_trials):
    entry_schema = _load(SCHEMAS / "ArtifactManifest.schema.json")["$defs"]["ArtifactManifestEntry"]
    validator = Draft202012Validator(entry_schema)
    for trial in all_trials:
        path = trial / "artifacts" / "manifest.json"
        if not path.exists():
            continue
        for entry in _load(path):
            assert not list(validator.iter_errors(entry))
            target = trial / "artifacts" / entry["destination"]
            assert target.is_file() == (entry["status"] in ("ok", "empty"))


def test_reward_details_cite_steps_and_tool_calls_that_exist(all_trials):
    for trial in all_trials:
        details_path = trial / "verifier" / "reward-details.json"
        traj_path = trial / "agent" / "trajectory.json"
        if not details_path.exists() or not traj_path.exists():
            continue
        steps = _load(traj_path)["steps"]
        call_ids = {c["tool_call_id"] for s in steps for c in s.get("tool_calls") or []}
        details = _load(details_path)
        assert details["reward"] == _load(trial / "result.json")["verifier_result"]["rewards"]["reward"]
        for criterion in details["criteria"]:
            for ref in criterion["evidence"]:
                kind, _, value = ref.partition(":")
                assert (int(value) <= len(steps)) if kind == "step" else (value in call_ids)


def test_without_extras_only_the_plain_harbor_files_are_written(tmp_path):
    job = write_job(
        tmp_path,
        "bench-job",
        role="baseline",
        configuration_id="bench",
        agent="terminus-2",
        model="openai/gpt-5.4",
        tasks=4,
        attempts=2,
        with_extras=False,
    )
    allowed = {"config.json", "result.json", "agent/trajectory.json", "verifier/reward.json", "verifier/reward.txt"}
    for trial in _trials(job):
        files = {p.relative_to(trial).as_posix() for p in trial.rglob("*") if p.is_file()}
        assert files <= allowed
        assert "agent/trajectory.json" in files


def test_a_20mb_trajectory_is_streamed_with_little_memory(tmp_path):
    path = tmp_path / "big.json"
    tracemalloc.start()
    try:
        write_trajectory(path, steps=2_000, observation_bytes=10_000, seed=7, session_id="big-session", model="gpt-5.4")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = path.stat().st_size
    assert size > 18_000_000
    assert peak < 20_000_000
    trajectory = orjson.loads(path.read_bytes())
    assert len(trajectory["steps"]) == 2_000
    assert trajectory["final_metrics"]["total_steps"] == 2_000
