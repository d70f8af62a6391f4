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
