"""Joinability checks (seed 000, check 1): is a trial pack complete enough to be trusted?

Each gap has a consequence the user sees. Pure: the same function serves the import
(to store `is_complete` / `missing` for filters), the trial page and the API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CHECKS: list[dict[str, Any]] = [
    {
        "check": "benchmark",
        "label": "Benchmark ids",
        "source": "benchmark",
        "fields": ["datasetId", "taskId", "trialId", "harborJobRef"],
        "consequence": "runner blocks",
    },
    {
        "check": "runtimeCorrelation",
        "label": "Runtime correlation",
        "source": "runtimeCorrelation",
        "fields": ["sessionId", "threadId", "turnId", "runId"],
        "consequence": "runtime profile blocks",
    },
    {
        "check": "trajectoryRef",
        "label": "Trajectory",
        "source": "refs",
        "fields": ["trajectoryRef"],
        "consequence": "smoke only, not for hill climbing",
    },
    {
        "check": "rewardDetailsRef",
        "label": "Reward details",
        "source": "refs",
        "fields": ["rewardDetailsRef"],
        "consequence": "benchmark eval blocks",
    },
    {
        "check": "artifactManifestRef",
        "label": "Artifact manifest",
        "source": "refs",
        "fields": ["artifactManifestRef"],
        "consequence": "viewable, but cannot be promoted",
    },
]


RUNTIME_FIELDS = next(c["fields"] for c in CHECKS if c["check"] == "runtimeCorrelation")


# The ids only a runtime writes: an ATIF trajectory's own session_id (any Harbor trial) is no Lime evidence.
RUNTIME_IDS = tuple(f for f in RUNTIME_FIELDS if f != "sessionId") + ("runtimeId",)


def applies(lime_format: bool, runtime_correlation: dict[str, Any]) -> bool:
    """Whether a trial's source carries the facts these checks read: a format whose trials are Lime
    evidence (its traits say so), or a runtime correlation (a Lime pack or runtime events joined to it).
    A TB1, Inspect, OTLP or plain Harbor trial (whose trajectory names only its session) has none."""
    return lime_format or any(runtime_correlation.get(f) for f in RUNTIME_IDS)


# Each names a file of the trial; a Harbor trial folder's own refs name the ones it has, as read.
FILE_REFS = (
    "trajectoryRef",
    "rewardRef",
    "rewardDetailsRef",
    "artifactManifestRef",
    "runtimeTranscriptRef",
    "harborTrialResultRef",
    "harborVerifierStdoutRef",
)


# Where Harbor mounts a trial's folders in the task's container: a pack's refs name its files by these.
CONTAINER_MOUNTS = {"/logs/agent/": "agent/", "/logs/verifier/": "verifier/", "/logs/artifacts/": "artifacts/"}


def own_files_for(claims: dict, own: dict, find: Callable[[str], str | None]) -> dict:
    """The trial's own files that a pack's refs name by their container path, where the trial has no
    ref of its own for them (a runtime transcript in artifacts/): ref -> the file's path.

    `find`: a path within the trial's folder -> the file's pack-relative path, or None.
    """
    found = {}
    for key in FILE_REFS:
        claimed = claims.get(key)
        if not isinstance(claimed, str) or own.get(key):
            continue
        for mount, local in CONTAINER_MOUNTS.items():
            if claimed.startswith(mount) and (path := find(local + claimed[len(mount) :])):
                found[key] = path
    return found


def join_refs(own: dict, pack: dict) -> tuple[dict, list[str]]:
    """A trial's refs with an evidence pack's joined in (the trial's own win), and the refs not taken.

    A trial's own file refs name the files it has (a Harbor trial folder's, as read). A
    pack ref to a trial file the trial lacks names something nobody imported: it is not
    taken, so that part counts as missing. A pack imported alone joins no trial (`own` is
    empty): none of the files it names came with it.
    """
    unbacked = [k for k in FILE_REFS if pack.get(k) and not own.get(k)]
    return {**{k: v for k, v in pack.items() if k not in unbacked}, **own}, unbacked


def evaluate(benchmark: dict, runtime_correlation: dict, refs: dict) -> dict[str, Any]:
    sources = {"benchmark": benchmark or {}, "runtimeCorrelation": runtime_correlation or {}, "refs": refs or {}}
    checks = []
    for spec in CHECKS:
        values = sources[spec["source"]]
        missing = [f for f in spec["fields"] if not values.get(f)]
        checks.append(
            {
                "check": spec["check"],
                "label": spec["label"],
                "passed": not missing,
                "missing": [f"{spec['source']}.{f}" for f in missing],
                "consequence": "" if not missing else spec["consequence"],
            }
        )
    return {
        "joinable": all(c["passed"] for c in checks),
        "checks": checks,
        "missing": [c["check"] for c in checks if not c["passed"]],
    }
