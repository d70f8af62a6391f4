"""What a Harbor trial's (or a step's) `verifier/` and `artifacts/` folders say: its rewards
(reward.json over reward.txt), reward details as criteria, CTRF tests, and the artifacts its
manifest lists. harbor.py reads the rest of the trial folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trials.ingest.jsonio import load_json
from trials.ingest.records import PackError, ParsedArtifact, ParsedCriterion, ParsedTrial, Problem
from trials.ingest.values import to_float


def reward_from_files(verifier: Path, rel: str, problems: list[Problem]) -> dict[str, Any]:
    """Harbor's rule: reward.json (a flat dict) wins over reward.txt (a single number)."""
    if (verifier / "reward.json").is_file():
        try:
            data = load_json(verifier / "reward.json", f"{rel}/reward.json", problems)
        except PackError as exc:
            problems.append(exc.problem)
            return {}
        if isinstance(data, dict):
            return data
        problems.append(Problem(f"{rel}/reward.json", "reward.json must be a flat object"))
    elif (verifier / "reward.txt").is_file():
        text = (verifier / "reward.txt").read_text("utf-8", "replace").strip()
        if not text:
            problems.append(Problem(f"{rel}/reward.txt", "reward file is empty (RewardFileEmptyError)"))
            return {}
        try:
            return {"reward": float(text)}
        except ValueError:
            problems.append(Problem(f"{rel}/reward.txt", f"reward is not a number: {text[:80]!r}"))
    return {}


def read_verifier(trial: ParsedTrial, verifier: Path, rel: str, step_name: str = "") -> None:
    if not verifier.is_dir():
        return
    file_rewards = reward_from_files(verifier, rel, trial.problems)
    if file_rewards and step_name:  # (a multi-step trial's steps have rewards of their own, not the trial's)
        trial.provenance.setdefault("step_rewards", {})[step_name] = file_rewards
    elif file_rewards:
        read = "reward.json" if (verifier / "reward.json").is_file() else "reward.txt"
        trial.refs.setdefault("rewardRef", f"{rel}/{read}")
        if not trial.rewards:
            trial.rewards = dict(file_rewards)
            trial.present.add("reward")
    if (verifier / "test-stdout.txt").is_file() and not step_name:
        trial.refs.setdefault("harborVerifierStdoutRef", f"{rel}/test-stdout.txt")
    details_path = verifier / "reward-details.json"
    if details_path.is_file():
        try:
            details = load_json(details_path, f"{rel}/reward-details.json", trial.problems)
            trial.criteria.extend(criteria_from_details(details, step_name))
            trial.present.add("reward_details")
            trial.refs.setdefault("rewardDetailsRef", f"{rel}/reward-details.json")
            trial.documents.setdefault("reward_details", {})[step_name or "trial"] = details
        except PackError as exc:
            trial.problems.append(exc.problem)
    ctrf_path = verifier / "ctrf.json"
    if ctrf_path.is_file():
        try:
            ctrf = load_json(ctrf_path, f"{rel}/ctrf.json", trial.problems)
            tests = ((ctrf.get("results") or {}).get("tests") or []) if isinstance(ctrf, dict) else []
            trial.ctrf_tests.extend(t for t in tests if isinstance(t, dict))
        except PackError as exc:
            trial.problems.append(exc.problem)


def criteria_from_details(details: Any, step_name: str = "") -> list[ParsedCriterion]:
    """reward-details.json has no public real sample: accept a criteria list or a name -> entry map."""
    if isinstance(details, dict):
        entries = details.get("criteria") or details.get("details") or details.get("dimensions")
        if isinstance(entries, dict):
            entries = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "score": v} for k, v in entries.items()]
    else:
        entries = details
    criteria = []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name") or entry.get("criterion") or entry.get("id") or f"criterion-{i + 1}")
        evidence = entry.get("evidence") or entry.get("evidence_refs") or []
        criteria.append(
            ParsedCriterion(
                name=f"{step_name}/{name}" if step_name else name,
                score=_score(entry.get("score", entry.get("value"))),
                weight=to_float(entry.get("weight")),
                reasoning=str(entry.get("reasoning") or entry.get("reason") or entry.get("explanation") or ""),
                evidence_refs=evidence if isinstance(evidence, list) else [evidence],
                raw=entry,
            )
        )
    return criteria


def _score(value: Any) -> float | None:
    """A criterion's score: a number, or its pass written as true / false (1 or 0)."""
    return float(value) if isinstance(value, bool) else to_float(value)


def read_artifacts(trial: ParsedTrial, artifacts: Path, rel: str) -> None:
    manifest_path = artifacts / "manifest.json"
    if not manifest_path.is_file():
        return
    try:
        manifest = load_json(manifest_path, f"{rel}/manifest.json", trial.problems)
    except PackError as exc:
        trial.problems.append(exc.problem)
        return
    entries = manifest.get("artifacts", manifest.get("entries")) if isinstance(manifest, dict) else manifest
    trial.present.add("manifest")
    trial.refs.setdefault("artifactManifestRef", f"{rel}/manifest.json")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        destination = str(entry.get("destination") or "")
        local = _artifact_file(artifacts, destination, str(entry.get("source") or ""))
        trial.artifacts.append(
            ParsedArtifact(
                source=str(entry.get("source") or ""),
                destination=destination,
                kind=str(entry.get("type") or "file"),
                status=str(entry.get("status") or ""),
                service=str(entry.get("service") or ""),
                path=f"{rel}/{local.relative_to(artifacts).as_posix()}" if local else "",
                raw=entry,
            )
        )


def _artifact_file(artifacts: Path, destination: str, source: str) -> Path | None:
    """Where a manifest entry's bytes are in the pack (v0.22 mirrors the source path)."""
    for candidate in (destination, source):
        stripped = candidate.removeprefix("/logs/artifacts/").lstrip("/")
        if stripped and ".." not in Path(stripped).parts:
            path = artifacts / stripped
            if path.is_file():
                return path
    return None
