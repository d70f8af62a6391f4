"""What the export tests share: the export through the API, its members, and a trial field by field."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import orjson

from trials import export_rows
from trials.models import Configuration, Dataset, Job, RewardCriterion, RuntimeEvent, Step, Task, Trial
from trials.models.qc import AuditEntry, QCItem
from trials.reading.steps import main_trajectory

URL = "/api/commands/export_benchmark_trial/"


def exported(client, trial: Trial) -> zipfile.ZipFile:
    response = client.get(URL, {"trial": trial.pk})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/zip"
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


def members(archive: zipfile.ZipFile) -> dict[str, bytes]:
    """Path inside the top folder -> bytes."""
    return {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}


def atif_of(client, trial: Trial) -> dict | None:
    """The trial's main trajectory as the API serves it (or as the export derives it, with no ATIF file)."""
    main = main_trajectory(trial, list(trial.trajectories.order_by("position", "pk")))
    if main is None:
        return None
    if main.blob is None:
        return export_rows.derived_atif(trial, main)
    response = client.get(f"/api/trials/{trial.pk}/trajectory/")
    return orjson.loads(b"".join(response.streaming_content) if response.streaming else response.content)


def what_counts(client, trial: Trial) -> dict:
    """What must survive the round trip: trajectory JSON, rewards, events and QC refs."""
    return {
        "name": trial.name,
        "status": trial.status,
        "reward": trial.reward,
        "rewards": trial.rewards,
        "atif": atif_of(client, trial),
        "events": list(trial.events.order_by("sequence", "timestamp", "pk").values_list("raw", flat=True)),
    }


def same_trial(client, trial: Trial) -> dict[str, Any]:
    """Every field the issue names, as rows hold them: a trial imported from its export must give the same."""
    trial = Trial.objects.select_related("configuration", "job", "dataset", "task").get(pk=trial.pk)
    config, job, dataset, task = trial.configuration, trial.job, trial.dataset, trial.task
    event_fields = ("type", "event_id", "timestamp", "sequence", "session_id", "run_id", "correlation", "payload",
                    "refs", "raw")  # fmt: skip
    item_fields = ("kind", "category", "code", "severity", "status", "step_id", "evidence_refs", "note", "target_name",
                   "reason", "scope", "expires_at", "scenario__scenario_id", "failure_mode__name")  # fmt: skip
    return {
        "key": trial.key,
        "name": trial.name,
        "source_format": trial.source_format,
        "configuration": config
        and (
            config.key,
            config.role,
            config.agent_name,
            config.agent_version,
            config.model_name,
            config.profiles,
        ),  # fmt: skip
        "job": job and (job.key, job.name, job.source_format, job.started_at, job.finished_at),
        "dataset": dataset and (dataset.name, dataset.version),
        "task": task and (task.name, task.checksum),
        "attempt": trial.attempt,
        "ids": (trial.session_id, trial.run_id, trial.runtime_correlation, trial.benchmark),
        "status": (trial.status, trial.failure_category, trial.exception_type, trial.exception_message),
        "rewards": (trial.reward, trial.rewards),
        "criteria": list(
            trial.criteria.order_by("pk").values_list("name", "score", "weight", "reasoning", "evidence_refs")
        ),  # fmt: skip
        "times": (trial.started_at, trial.finished_at, trial.duration_sec),
        "tokens": (trial.input_tokens, trial.cached_tokens, trial.output_tokens, trial.cost_usd),
        "steps": (trial.step_count, trial.tool_call_count),
        "completeness": (trial.is_complete, trial.missing),
        "refs": trial.refs if trial.source_format != "harbor" else sorted(trial.refs),  # (a folder's: its paths)
        "events": list(trial.events.order_by("sequence", "timestamp", "event_id").values_list(*event_fields)),
        "qc_items": list(QCItem.objects.filter(trial=trial).order_by("pk").values_list(*item_fields)),
        "atif": atif_of(client, trial),
    }


def stored_counts() -> dict[str, int]:
    """How many rows of each kind an import could add: a second import of the same trial adds none."""
    models = (Trial, Job, Configuration, Dataset, Task, RuntimeEvent, Step, RewardCriterion, QCItem, AuditEntry)
    return {model.__name__: model.objects.count() for model in models}
