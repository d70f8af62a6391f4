"""Harbor adapters' `parity_experiment.json`: the original benchmark's scores beside the adapter's.

A list of experiments (adapter, agent, model, date), each with `metrics[]` whose two sides are named
by the file (`original` / `harbor`, `original` / `tb_adapter`, `tb_adapter` / `harbor`: the names drift
within one file) and given as a summary string ("35.7 +/- 0.6") and a list of per-run scores
(`<side>_runs`). It is a comparison document beside its dataset, not a trial: kept whole, with each
metric's sides and run counts read out for the document's page.
"""

from __future__ import annotations

from typing import Any

from trials.ingest.records import ParsedDocument, ParsedPack
from trials.ingest.values import as_dict, as_list, to_str

KIND = "harbor-parity-experiment"


def is_parity_experiment(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(e, dict) and "adapter_name" in e and isinstance(e.get("metrics"), list) for e in data)
    )


def metric_sides(metric: dict[str, Any]) -> dict[str, list[Any]]:
    """Each side of one metric and its per-run scores, in the file's order: {"original": [35, 36, …], …}."""
    return {key.removesuffix("_runs"): as_list(value) for key, value in metric.items() if key.endswith("_runs")}


def parse(data: list[dict[str, Any]], rel: str) -> ParsedPack:
    metrics = [as_dict(m) for entry in data for m in as_list(entry.get("metrics"))]
    runs = sum(len(scores) for m in metrics for scores in metric_sides(m).values())
    adapters = sorted({to_str(entry.get("adapter_name")) for entry in data})
    document = ParsedDocument(
        kind=KIND,
        path=rel,
        title=f"Parity experiment: {', '.join(adapters)}",
        data=data,
        counts={"experiments": len(data), "metrics": len(metrics), "runs": runs},
    )
    return ParsedPack(kind=KIND, documents=[document])
