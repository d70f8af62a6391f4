"""The trial page's header facts and tabs: phases, completeness, context, logs, config."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Q

from trials.ingest import completeness
from trials.ingest.records import PASS_REWARD
from trials.ingest.values import as_dict
from trials.models import ContextRecord, Trajectory, Trial
from trials.models.taxonomy import WITH_REWARD
from trials.models.trial import counts_as_passed
from trials.reading.steps import main_trajectory
from trials.reading.text import pretty_json, scrub, scrub_json


def header_facts(trial: Trial, trajectories: list[Trajectory]) -> dict[str, Any]:
    main = main_trajectory(trial, trajectories)
    agent = (main.agent if main else {}) or {}
    config = trial.configuration
    bench = trial.benchmark or {}
    refs = {**(trial.refs or {})}
    for key in ("harborJobRef", "harborTrialRef", "taskTomlRef", "datasetRef"):
        if bench.get(key):
            refs.setdefault(key, bench[key])
    # A joined evidence pack's refs, as written: where the trial's own file (its stored path)
    # took a ref's place, or no file backs it, the page says what the pack claimed.
    claimed = ((trial.documents or {}).get("evidence_pack") or {}).get("refs")
    claimed = claimed if isinstance(claimed, dict) else {}
    ref_rows = []
    for key in sorted(refs.keys() | claimed.keys()):
        value = refs.get(key)
        ref_rows.append(
            {"key": key, "value": value, "claimed": claimed[key] if claimed.get(key, value) != value else None}
        )
    total_tokens = None
    if trial.input_tokens is not None or trial.output_tokens is not None:
        total_tokens = (trial.input_tokens or 0) + (trial.output_tokens or 0)
    return {
        "agent_name": (config.agent_name if config else "") or agent.get("name", ""),
        "agent_version": (config.agent_version if config else "") or agent.get("version", ""),
        "model_name": (config.model_name if config else "") or agent.get("model_name", ""),
        "refs": ref_rows,
        "correlation": sorted((trial.runtime_correlation or {}).items()),
        "provenance": sorted((trial.provenance or {}).items()),
        "total_tokens": total_tokens,
        "pass_rule": pass_rule(trial),
    }


ENDED = {"timeout": "timed out", "errored": "errored", "cancelled": "was cancelled", "limit": "hit a limit"}


def pass_rule(trial: Trial) -> str:
    """Why a run that did not end normally yet holds a reward (a `…-with-reward` flag) counts as passed or not,
    by the one rule (trials.models.trial.PASSES); "" for any other trial, whose status says it all."""
    flag = next((f for f in trial.safety_flags or [] if f in WITH_REWARD.values()), "")
    if not flag:
        return ""
    ended = ENDED.get(flag.removesuffix("-with-reward"), "did not end normally")
    cause = trial.exception_type or str((trial.provenance or {}).get("failure_mode") or "") or trial.failure_category
    how = f"its run {ended}" + (f" ({cause})" if cause else "")
    threshold = getattr(trial.dataset, "pass_reward", None)
    threshold = PASS_REWARD if threshold is None else threshold
    if counts_as_passed(trial.status, trial.reward, threshold):
        return (
            f"Counted as passed: a trial passes at reward ≥ {threshold} however its run ended, and this one "
            f"scored {trial.reward} though {how}. Flagged, for a person to check the score stands."
        )
    return (
        f"Not passed: its reward {trial.reward} is below {threshold}, the pass threshold however a run ends; "
        f"{how}. Flagged, for a person to check the score stands."
    )


PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")


def phase_bar(trial: Trial) -> list[dict[str, Any]]:
    phases = trial.phases or {}
    rows = [(name, (phases.get(name) or {}).get("seconds")) for name in PHASES if name in phases]
    total = sum(s for _, s in rows if isinstance(s, int | float)) or 0
    return [
        {
            "name": name,
            "label": name.replace("_", " "),
            "seconds": s,
            "pct": round(100 * s / total, 2) if total and isinstance(s, int | float) else 0,
        }
        for name, s in rows
    ]


def token_bar(trial: Trial) -> list[dict[str, Any]]:
    """The trial's tokens as a bar, as Harbor's viewer draws them: input not cached, cached input, output."""
    cached = trial.cached_tokens or 0
    parts = [
        ("input", "input", max((trial.input_tokens or 0) - cached, 0)),
        ("cached", "cached", cached),
        ("output", "output", trial.output_tokens or 0),
    ]
    return [{"name": name, "label": label, "tokens": n} for name, label, n in parts if n > 0]


def trial_completeness(trial: Trial) -> dict[str, Any]:
    """The evidence checks, and whether they apply: only a source carrying Lime evidence has those facts."""
    return completeness.evaluate(trial.benchmark, trial.runtime_correlation, trial.refs) | {
        "applies": trial.lime_evidence
    }


CONTEXT_SECTIONS = (
    ("envelope", "Envelopes (runtime ids)"),
    ("item", "Context items"),
    ("selection", "Selection: selected and omitted"),
    ("budget", "Budget and truncation"),
    ("assembly", "Assembly (what a model request was built from)"),
    ("injection", "Injection"),
    ("missing", "Missing context"),
    ("compaction", "Compaction"),
    ("redaction", "Redactions"),
    ("event", "Evidence exports (refs, not payloads)"),
)


# Runtime-only statuses a context record may carry but never decides (ACTX-AR-GOV-001).
RUNTIME_STATUS_KEYS = ("status", "turn_status", "task_status", "tool_status", "runtime_status", "approval_status")


RUNTIME_STATUSES = frozenset({"completed", "complete", "failed", "approved", "succeeded", "success", "passed"})


def context_records(trial: Trial, kind: str | None = None) -> list[dict[str, Any]]:
    """The trial's context records as summaries: every kind but raw events (except exports),
    with the reason and policy refs of a separate redaction record joined onto its item."""
    records = trial.context_records.exclude(Q(kind="event") & ~Q(data__event_type="context.exported"))
    if kind:
        records = records.filter(kind=kind)
    summaries = [record_summary(r) for r in records.order_by("pk")]
    redactions: dict[Any, dict[str, Any]] = {}  # item_id (as written) -> its redaction record
    for r in trial.context_records.filter(kind="redaction").order_by("pk"):
        summary = record_summary(r)
        redactions.setdefault(summary["item_id"], summary)
    for summary in summaries:
        found = redactions.get(summary.get("item_id")) if summary["kind"] == "item" else None
        if found and summary["status"] == "redacted":
            summary["reason"] = summary["reason"] or found["reason"]
            summary["policy_refs"] = summary["policy_refs"] or found["policy_refs"]
            summary["redaction_record"] = found["record_id"]
    return summaries


def context_sections(trial: Trial) -> list[dict[str, Any]]:
    """The trial's context records grouped for the Context tab (events themselves are omitted)."""
    records = context_records(trial)
    sections = []
    for kind, title in CONTEXT_SECTIONS:
        rows = [r for r in records if r["kind"] == kind]
        if kind == "selection":
            groups: dict[str, dict[str, Any]] = {}
            for r in rows:
                sel_id = r["selection_id"] or r["record_id"]
                group = groups.setdefault(sel_id, {"id": sel_id, "record": None, "selected": [], "omitted": []})
                if r["status"] in ("selected", "omitted"):
                    group[r["status"]].append(r)
                else:
                    group["record"] = r
            sections.append({"kind": kind, "title": title, "groups": list(groups.values()), "count": len(groups)})
        else:
            sections.append({"kind": kind, "title": title, "records": rows, "count": len(rows)})
    return sections


def record_summary(record: ContextRecord) -> dict[str, Any]:
    """The facts of one context record under stable names, for pages and the API."""
    data = record.data or {}
    out: dict[str, Any] = {
        "pk": record.pk,
        "kind": record.kind,
        "record_id": record.record_id,
        "context_id": record.context_id,
        "status": record.status,
        "reason": scrub(record.reason),
        "redaction_state": record.redaction_state,
        "step_id": record.step_id,
        "tool_call_id": record.tool_call_id,
        "step_number": int(record.step_id) if record.step_id.isdigit() and int(record.step_id) > 0 else None,
        "correlation": scrub_json(record.correlation),
    }
    if record.kind == "item":
        redaction = as_dict(data.get("redaction"))
        out |= {
            "reason": out["reason"] or scrub(data.get("reason") or redaction.get("reason") or ""),  # the item's own
            "item_id": data.get("item_id"),
            "context_kind": data.get("context_kind"),
            "title": scrub(data.get("title")),
            "sensitivity": data.get("sensitivity"),
            "source_refs": scrub_json(data.get("source_refs") or []),
            "policy_refs": scrub_json(
                data.get("policy_refs") or (data.get("redaction") or {}).get("policy_refs") or []
            ),
            "redaction": scrub_json(data.get("redaction")),
        }
    elif record.kind == "selection":
        out |= {"selection_id": data.get("selection_id"), "item_id": data.get("item_id")}
    elif record.kind == "budget":
        keys = ("max_tokens", "reserved_tokens", "actual_tokens", "overflow_strategy", "truncation_records")
        out |= {k: scrub_json(data.get(k)) for k in keys}
    elif record.kind in ("assembly", "injection"):
        out |= {
            "target": data.get("target"),
            "model_request_id": data.get("model_request_id"),
            "source_item_refs": scrub_json(data.get("source_item_refs") or []),
            "source_refs": scrub_json(data.get("source_refs") or []),
        }
    elif record.kind == "missing":
        out |= {
            "owner": scrub_json(data.get("owner")),
            "requested_action": scrub_json(data.get("requested_action")),
            "safe_summary": scrub_json(data.get("safe_summary")),
        }
    elif record.kind == "compaction":
        out |= {
            "source_window": scrub_json(
                data.get("source_window") or data.get("source_range") or data.get("source_item_refs")
            ),
            "source_item_refs": scrub_json(data.get("source_item_refs") or []),
            "summary_ref": scrub_json(data.get("summary_ref")),
            "method": data.get("method"),
        }
    elif record.kind == "redaction":
        out |= {
            "item_id": data.get("item_id") or data.get("target_ref"),
            "redaction_method": data.get("redaction_method"),
            "redacted_fields": scrub_json(data.get("redacted_fields") or []),
            "policy_refs": scrub_json(data.get("policy_refs") or []),
        }
    elif record.kind == "event":
        out |= {
            "event_type": data.get("event_type"),
            "evidence_id": record.correlation.get("evidenceId"),
            "refs": scrub_json(data.get("data")),
        }
    out["declares_runtime_status"] = [
        f"{key}={data[key]}"
        for key in RUNTIME_STATUS_KEYS
        if str(data.get(key, "")).strip().lower() in RUNTIME_STATUSES
    ]
    out["data"] = scrub_json(data)
    return out


def log_texts(trial: Trial) -> list[tuple[str, str]]:
    """trial.log and the verifier's logs (exception.txt and the agent's logs have their own tabs)."""
    texts = trial.texts or {}
    keys = [k for k in texts if k != "exception.txt" and not k.startswith("agent/") and not _agent_session(k)]
    return [(k, scrub(_readable(k, texts[k]))) for k in sorted(keys, key=lambda k: (k != "trial.log", k))]


def agent_log_texts(trial: Trial) -> list[tuple[str, str]]:
    """The agent's own logs: agent/*.txt, then agent/command-N/ files in command order; a Terminal-Bench
    trial's agent session (sessions/agent.log, then its panes before and after the agent ran)."""
    texts = trial.texts or {}

    def order(key: str) -> tuple[int, int, str]:
        if _agent_session(key):
            return (2, 0 if key.startswith("sessions/") else 1 if "pre-" in key else 2, key)
        folder = key.split("/")[1] if key.count("/") >= 2 else ""
        number = folder.removeprefix("command-")
        return (1 if folder else 0, int(number) if number.isdigit() else -1, key)

    keys = (k for k in texts if k.startswith("agent/") or _agent_session(k))
    return [(k, scrub(_readable(k, texts[k]))) for k in sorted(keys, key=order)]


def _agent_session(key: str) -> bool:
    """A Terminal-Bench trial's text of the agent's session (`sessions/agent.log`, `panes/*-agent.txt`)."""
    folder, _, name = key.partition("/")
    return folder in ("sessions", "panes") and "/" not in name and "agent" in name.rpartition(".")[0]


# A terminal's escape sequences (CSI, OSC, two-byte ESC) and other control characters but tab and newline.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def terminal_text(text: str) -> str:
    """What a terminal showed of its output: escapes dropped, a carriage return's overwrite kept last."""
    lines = []
    for line in _ESCAPES.sub("", text).split("\n"):
        if "\r" in line:
            line = next((part for part in reversed(line.split("\r")) if part.strip()), "")
        lines.append(_CONTROLS.sub("", line))
    return "\n".join(lines)


def _readable(key: str, text: str) -> str:
    """A terminal's log or pane read as its screen showed it; any other log as written."""
    return terminal_text(text) if key.startswith(("sessions/", "panes/")) else text


def config_documents(trial: Trial) -> list[tuple[str, str]]:
    docs = trial.documents or {}
    return [(name, pretty_json(docs[name])) for name in ("config", "lock", "result", "evidence_pack") if name in docs]
