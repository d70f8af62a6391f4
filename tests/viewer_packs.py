"""Small generated trial packs for the viewer tests (built on trials.demo, then tweaked)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import import_path
from trials.demo import write_demo, write_trajectory
from trials.models import Trial

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


def demo_jobs(out: Path) -> Path:
    """A two-task demo (baseline + candidate job, one attempt each)."""
    write_demo(out, tasks=2, attempts=1, seed=0)
    return out


def candidate_trial_dir(out: Path) -> Path:
    """The candidate trial that has every feature: a permission denial followed by a side
    effect, compaction, copied context, an XSS-looking tool result, a masked secret in its
    context events, rewards with reward details, CTRF tests and artifacts."""
    job = demo_jobs(out) / "candidate-job"
    return next(p for p in sorted(job.iterdir()) if (p / "verifier" / "reward-details.json").is_file())


def import_trial_dir(path: Path) -> Trial:
    import_path(path)
    return Trial.objects.latest("pk")


def crafted_trial_dir(
    out: Path,
    *,
    context_events: list[dict[str, Any]] | None = None,
    message: str | None = None,
    tool_result: str | None = None,
    artifact_name: str | None = None,
) -> Path:
    """The demo candidate trial copied under a new name, with the given parts replaced."""
    source = candidate_trial_dir(out / "demo")
    target = out / source.name
    shutil.copytree(source, target)
    if context_events is not None:
        (target / "agent" / "context-events.jsonl").write_bytes(
            b"".join(orjson.dumps(e) + b"\n" for e in context_events)
        )
    if message is not None or tool_result is not None:
        path = target / "agent" / "trajectory.json"
        data = orjson.loads(path.read_bytes())
        for step in data["steps"]:
            if message is not None and step["source"] == "user":
                step["message"] = message
                message = None
            results = (step.get("observation") or {}).get("results") or []
            if tool_result is not None and step.get("tool_calls") and results:
                results[0]["content"] = tool_result
                tool_result = None
        path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    if artifact_name is not None:
        (target / "artifacts" / artifact_name).write_text("artifact bytes\n")
        manifest_path = target / "artifacts" / "manifest.json"
        manifest = orjson.loads(manifest_path.read_bytes())
        manifest.append(
            {"source": f"/app/{artifact_name}", "destination": artifact_name, "type": "file", "status": "ok"}
        )
        manifest_path.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return target


def long_trajectory(
    out: Path, steps: int, name: str | None = None, observation_bytes: int = 200, planted: dict[int, str] | None = None
) -> Trial:
    """A standalone ATIF file of `steps` steps, imported as its own trial.

    `planted`: text added to the message of the step at each (0-based) index, to search for.
    """
    session = name or f"long-{steps}"
    path = out / f"{session}.trajectory.json"
    write_trajectory(
        path, steps=steps, observation_bytes=observation_bytes, seed=0, session_id=session, model="openai/gpt-5.4"
    )
    if planted:
        data = orjson.loads(path.read_bytes())
        for index, text in planted.items():
            data["steps"][index]["message"] += f"\n{text}"
        path.write_bytes(orjson.dumps(data))
    import_path(path)
    return Trial.objects.get(trajectories__session_id=session)
