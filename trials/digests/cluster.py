"""A failure cluster's digest: its class, cause, signature, count, facets and a bounded list of its trials.

Read with the cluster page's own helpers (`trials.triage.clusters`), filtered like the page by `params`.
"""

from __future__ import annotations

from typing import Any

from django.http import QueryDict

from trials.digests.markdown import fenced, inline, link, number, table
from trials.digests.trial import Absolute
from trials.models import step_url
from trials.models.qc import FailureCluster
from trials.reading.text import pretty_json
from trials.triage import clusters

TRIALS_LISTED = 50  # the newest trials of the cluster in a digest
GROUPS_LISTED = 20  # rows of each facet / breakdown
SIGNATURE_CHARS = 2000


def cluster_digest(
    cluster: FailureCluster, absolute: Absolute, params: QueryDict | dict[str, Any] | None = None
) -> str:
    row = clusters.cluster_row(cluster, params)
    facets = clusters.facets(cluster, params)
    example = clusters.representative(cluster)
    signature = cluster.signature or {}
    lines = [
        f"# Failure cluster {inline(cluster.label, 80)}",
        "",
        f"- Class: {inline(cluster.failure_class, 40)}",
        f"- Cause: {inline(row.description, 600)}",  # (the signature in words, as the page says it)
        f"- Trials: {number(row.count)} (candidate {number(row.candidates)}, baseline {number(row.baselines)})"
        + (" · new in the candidate" if row.new_in_candidate else ""),
        f"- First seen: {inline(row.first_seen or '—')} · last seen: {inline(row.last_seen or '—')}",
        f"- Page: {link(cluster.label, absolute(cluster.get_absolute_url()))}",
    ]
    if example is not None:
        where = link(f"trial {example.trial.pk}", absolute(example.trial.get_absolute_url()))
        if example.step_number is not None:
            step_link = absolute(step_url(example.trial.pk, example.step_number))
            where += f", {link(f'step {example.step_number}', step_link)}"
        lines.append(f"- Representative: {where}")
    parts = ["\n".join(lines), "## Signature", fenced(pretty_json(signature), SIGNATURE_CHARS, "json")]
    parts += _facet("Configurations", list(row.by_configuration.items()))
    parts += _facet("Jobs", list(row.by_job.items()))
    parts += _facet("Tasks", [(name, n) for name, n, _ in facets["task"]])
    parts += _facet("First failing tests", [(name, n) for name, n, _ in facets["test"] if name])
    parts.append(_trials(cluster, row.count, absolute, params))
    return "\n\n".join(parts) + "\n"


def _facet(title: str, counts: list[tuple[str, int]]) -> list[str]:
    if not counts:
        return []
    rows = [(inline(name or "(none)", 200), number(n)) for name, n in counts[:GROUPS_LISTED]]
    more = f"\n\n_{len(counts) - GROUPS_LISTED} more._" if len(counts) > GROUPS_LISTED else ""
    return [f"## {title}", table(("value", "trials"), rows) + more]


def _trials(cluster: FailureCluster, count: int, absolute: Absolute, params: Any) -> str:
    trials = (
        clusters.clustered_trials(params)
        .filter(cluster=cluster)
        .select_related("task", "configuration")
        .order_by("-pk")[:TRIALS_LISTED]
    )
    rows = [
        (
            link(f"trial {t.pk}", absolute(t.get_absolute_url())),
            inline(t.task.name if t.task else "—", 120),
            inline(t.configuration.key if t.configuration else "—", 120),
            inline(t.status, 20),
            number(t.reward),
        )
        for t in trials
    ]
    title = f"## Trials (the newest {len(rows)} of {count:,})" if count > len(rows) else f"## Trials ({len(rows)})"
    return title + "\n\n" + table(("trial", "task", "configuration", "outcome", "reward"), rows)
