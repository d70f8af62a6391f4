"""AgentV and OpenChrome views of the same pairing.

`compute` adds one to the result when either side holds trials of a format that names it (its traits'
`comparison_report`, a key of REPORTS): `agentv compare`'s own output shape, and OpenChrome's completion
table per library and task.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from comparisons.statistics import stats
from comparisons.statistics.side_data import SideData
from trials.ingest.formats.detect import traits_of
from trials.models import Configuration

AGENTV_THRESHOLD = 0.1


def agentv_compare(base: SideData, cand: SideData, threshold: float = AGENTV_THRESHOLD) -> dict[str, Any]:
    """`agentv compare`: rows matched by test_id (attempts averaged), delta, gain, win/loss/tie."""
    matched: list[dict[str, Any]] = []
    for test_id in sorted(set(base.tasks) & set(cand.tasks)):
        s1, s2 = base.tasks[test_id].mean, cand.tasks[test_id].mean
        if s1 is None or s2 is None:
            continue
        delta = s2 - s1
        matched.append(
            {
                "test_id": test_id,
                "score1": s1,
                "score2": s2,
                "delta": delta,
                "normalized_gain": stats.normalized_gain(s1, s2),
                "outcome": stats.win_loss_tie(delta, threshold),
            }
        )
    gains = [m["normalized_gain"] for m in matched if m["normalized_gain"] is not None]
    outcomes = [m["outcome"] for m in matched]
    return {
        "matched": matched,
        "unmatched": {
            "file1": sorted(set(base.tasks) - {m["test_id"] for m in matched}),
            "file2": sorted(set(cand.tasks) - {m["test_id"] for m in matched}),
        },
        "summary": {
            "total": len(set(base.tasks) | set(cand.tasks)),
            "matched": len(matched),
            "wins": outcomes.count("win"),
            "losses": outcomes.count("loss"),
            "ties": outcomes.count("tie"),
            "mean_delta": stats.mean_or_none([m["delta"] for m in matched]),
            "mean_normalized_gain": stats.mean_or_none(gains),
        },
        "threshold": threshold,
    }


def openchrome_completion(base: SideData, cand: SideData) -> list[dict[str, Any]]:
    """Per library (configuration) and task: runs, successes, success rate and its CI95."""
    names = dict(
        Configuration.objects.filter(pk__in=base.configuration_ids | cand.configuration_ids).values_list("id", "key")
    )
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for role, data in (("baseline", base), ("candidate", cand)):
        for row in data.rows:
            if traits_of(row["source_format"]).comparison_report != "openchrome":
                continue
            key = (role, names.get(row["configuration_id"], "?"), row["task__name"] or "")
            counts[key][0] += 1
            counts[key][1] += row["reward"] == 1.0
    return [
        {
            "side": role,
            "library": library,
            "task": task,
            "runs": runs,
            "successes": ok,
            "successRate": ok / runs,
            "successRateCi95": stats.proportion_ci(ok, runs),
        }
        for (role, library, task), (runs, ok) in sorted(counts.items())
    ]


# The reports a format's traits can name, by the key each has in a comparison's result.
REPORTS: dict[str, Callable[[SideData, SideData], Any]] = {
    "agentv": agentv_compare,
    "openchrome": openchrome_completion,
}
