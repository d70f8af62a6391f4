"""The Lime runtime events triage writes on a trial where its pack lacked them
(benchmark.trial.failed, benchmark.reward.recorded), so the runtime facts and the QC facts join
on the same ids; written by `services` when an item is filed.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Max
from django.utils import timezone

from trials.ingest.formats import lime
from trials.models import RuntimeEvent, Trial
from trials.models.qc import QCItem

LIME_SCHEMA_VERSION = "lime-profile-0.4.0"


RUNTIME_ID = "benchviewer"


def _correlation(trial: Trial) -> dict[str, str]:
    rc = trial.runtime_correlation or {}
    return {
        "sessionId": str(rc.get("sessionId") or trial.session_id or f"benchviewer-trial-{trial.pk}"),
        "taskId": str(rc.get("taskId") or (trial.task.name if trial.task else "") or trial.name),
        "runId": str(rc.get("runId") or trial.run_id or trial.key),
        **{k: str(rc[k]) for k in ("threadId", "turnId", "traceId") if rc.get(k)},
    }


def _benchmark_block(trial: Trial) -> dict[str, str]:
    bench = {k: str(v) for k, v in (trial.benchmark or {}).items() if isinstance(v, str | int | float)}
    bench.setdefault("datasetId", trial.dataset.name if trial.dataset else "")
    if trial.dataset and trial.dataset.version:
        bench.setdefault("datasetVersion", trial.dataset.version)
    bench.setdefault("taskId", trial.task.name if trial.task else trial.name)
    bench.setdefault("trialId", trial.name)
    if trial.configuration:
        bench.setdefault("configurationId", trial.configuration.key)
        if trial.configuration.role and "role" not in bench:
            bench["role"] = trial.configuration.role
    if bench.get("role") not in (None, "baseline", "candidate", "control"):
        bench.pop("role")
    return {k: v for k, v in bench.items() if v != ""}


def lime_event(trial: Trial, etype: str, payload: dict[str, Any], sequence: int) -> dict[str, Any]:
    """A Lime profile event envelope (agentruntime-lime-profile-event.schema.json)."""
    ids = _correlation(trial)
    refs = {k: v for k, v in (trial.refs or {}).items() if isinstance(v, str)}
    return {
        "type": etype,
        "eventId": f"evt_bv_{uuid.uuid4().hex}",
        "timestamp": timezone.now().isoformat().replace("+00:00", "Z"),
        "schemaVersion": LIME_SCHEMA_VERSION,
        "runtimeId": RUNTIME_ID,
        **ids,
        "sequence": sequence,
        "benchmark": _benchmark_block(trial),
        "refs": refs,
        "payload": payload,
    }


def write_missing_events(trial: Trial, item: QCItem) -> list[RuntimeEvent]:
    """Write benchmark.trial.failed / benchmark.reward.recorded where the pack lacked them,
    so the runtime facts and the QC facts join on the same ids."""
    have = set(trial.events.filter(type__startswith="benchmark.").values_list("type", flat=True))
    sequence = (trial.events.aggregate(m=Max("sequence"))["m"] or 0) + 1
    wanted = []
    if trial.is_failure and lime.TRIAL_FAILED not in have:
        payload: dict[str, Any] = {
            "failureCategory": item.code or item.category,
            "source": "triage",
            "qcItemId": item.label,
        }
        if trial.exception_type:
            payload["exceptionType"] = trial.exception_type
        wanted.append((lime.TRIAL_FAILED, payload))
    if trial.reward is not None and lime.REWARD_RECORDED not in have:
        criteria = list(trial.criteria.values_list("name", flat=True))
        payload = {"reward": trial.reward, "criteria": criteria, "failureCategory": item.code or item.category}
        wanted.append((lime.REWARD_RECORDED, payload | {"source": "triage", "qcItemId": item.label}))
    rows = []
    for offset, (etype, payload) in enumerate(wanted):
        event = lime_event(trial, etype, payload, sequence + offset)
        parsed = lime.parse_event(event, "triage")  # (its row as an import of the same event would write it)
        rows.append(
            RuntimeEvent(
                trial=trial,
                pack=None,
                type=etype,
                event_id=event["eventId"],
                timestamp=parsed.timestamp,
                sequence=event["sequence"],
                session_id=event["sessionId"][:200],
                run_id=event["runId"][:200],
                correlation=parsed.correlation,
                payload=payload,
                refs=event["refs"],
                raw=event,
            )
        )
    return RuntimeEvent.objects.bulk_create(rows)
