"""Joinability checks (seed 000, check 1): is a trial pack complete enough to be trusted?

Each gap has a consequence the user sees. Pure: the same function serves the import
(to store `is_complete` / `missing` for filters), the trial page and the API.
"""

from __future__ import annotations

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
