"""The QC evidence as a Lime Agent QC evidence pack (lime-app/agent-qc-evidence.schema.json).

Verdict rules ("a waiver is not a pass"):
- blocked: an open release blocker that no active waiver covers;
- fail: otherwise, an open P0 or P1 QC fact that no active waiver covers;
- waived: otherwise, open facts remain but active waivers cover them all;
- needs-human-review: nothing was ever triaged, or only P2/P3 facts are open;
- pass: every QC fact filed is resolved (or revoked) and no waiver is in force.
An expired waiver covers nothing, so its items count as if it never existed.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC
from typing import Any

from django.db.models import Prefetch
from django.utils import timezone

from trials.models.qc import QCItem, QCItemCitation, QCScenario, Severity
from trials.triage.evidence_links import citation_links
from trials.triage.prefill import ref_text


def _iso(dt) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _covered(item: QCItem, now) -> bool:
    return any(w.status == QCItem.Status.OPEN and w.expires_at and w.expires_at > now for w in item.waivers.all())


def _status_for(items: list[QCItem], now) -> str:
    open_items = [i for i in items if i.status == QCItem.Status.OPEN]
    if not open_items:
        return "pass"
    unwaived = [i for i in open_items if not _covered(i, now)]
    if not unwaived:
        return "waived"
    if any(i.kind == QCItem.Kind.RELEASE_BLOCKER for i in unwaived):
        return "blocked"
    if any(i.severity in (Severity.P0, Severity.P1) for i in unwaived):
        return "fail"
    return "needs-human-review"


def _blocker_text(item: QCItem) -> str:
    what = item.code or item.category
    where = f" step {item.step_id}" if item.step_id else ""
    note = f": {item.note.strip().splitlines()[0][:200]}" if item.note.strip() else ""
    return f"{item.label} {item.severity} {what} in trial {item.trial.name}{where}{note}"


def build_evidence(*, repo: str = "benchviewer", ref: str = "qc-triage", diff_base: str = "") -> dict[str, Any]:
    now = timezone.now()
    facts = list(
        QCItem.objects.facts()
        .select_related("trial", "trial__task", "scenario", "failure_mode", "assignee")
        .prefetch_related("waivers", Prefetch("citations", QCItemCitation.objects.select_related("trial")))
        .order_by("pk")
    )
    groups: dict[str, list[QCItem]] = defaultdict(list)
    for item in facts:
        key = (
            item.scenario.scenario_id
            if item.scenario
            else f"task:{item.trial.task.name if item.trial.task else item.trial.name}"
        )
        groups[key].append(item)
    scenarios = {s.scenario_id: s for s in QCScenario.objects.all()}

    results = []
    for scenario_id in sorted(set(groups) | set(scenarios)):
        items = groups.get(scenario_id, [])
        scenario = scenarios.get(scenario_id)
        results.append(_scenario_result(scenario_id, scenario, items, now))

    unwaived_blockers = [
        i
        for i in facts
        if i.kind == QCItem.Kind.RELEASE_BLOCKER and i.status == QCItem.Status.OPEN and not _covered(i, now)
    ]
    unwaived_blockers.sort(key=lambda i: (i.severity, i.pk))
    waivers = [
        w
        for w in QCItem.objects.active_waivers().select_related("approver", "waived_item").order_by("expires_at", "pk")
    ]
    status = _status_for(facts, now) if facts else "needs-human-review"
    open_count = sum(1 for i in facts if i.status == QCItem.Status.OPEN)
    p0 = sum(1 for i in facts if i.status == QCItem.Status.OPEN and i.severity == Severity.P0 and not _covered(i, now))
    summary = {
        "pass": f"All {len(facts)} QC facts filed from failed trials are resolved; no waiver is in force.",
        "blocked": f"{len(unwaived_blockers)} open release blocker(s) ({p0} open P0 fact(s)): not release evidence.",
        "fail": f"{open_count} open QC fact(s), {p0} of them P0, not covered by a waiver.",
        "waived": f"{open_count} open QC fact(s), all covered by {len(waivers)} unexpired waiver(s): "
        "a waiver is not a pass.",
        "needs-human-review": "No failed trial has been triaged yet."
        if not facts
        else f"{open_count} open P2/P3 QC fact(s) need a reviewer's decision.",
    }[status]
    next_action = {
        "pass": "Keep the replay fixtures and verifier criteria in the gates.",
        "blocked": "Fix or waive the release blockers (an approver grants waivers, with reason, scope and expiry).",
        "fail": "Fix the open P0/P1 failure modes, then re-run the affected scenarios.",
        "waived": "Fix the waived items before their waivers expire.",
        "needs-human-review": "Triage the failed trials in the queue.",
    }[status]
    verdict: dict[str, Any] = {
        "status": status,
        "summary": summary,
        "blockers": [_blocker_text(i) for i in unwaived_blockers],
        "waivers": [
            {
                "id": w.label,
                "reason": f"{w.reason} (scope: {w.scope}; waives {w.waived_item.label if w.waived_item else '-'})",
                "owner": w.approver.get_username() if w.approver else "",
                "expiresAt": _iso(w.expires_at),
            }
            for w in waivers
        ],
        "nextAction": next_action,
    }
    subject: dict[str, Any] = {
        "repo": repo or "benchviewer",
        "ref": ref or "qc-triage",
        "changedFiles": [],
        "riskTags": sorted({f"{i.severity}:{i.code or i.category}" for i in facts if i.status == QCItem.Status.OPEN}),
    }
    if diff_base:
        subject["diffBase"] = diff_base
    return {
        "schemaVersion": "v1",
        "runId": f"benchviewer-qc-{now:%Y%m%dT%H%M%SZ}",
        "generatedAt": _iso(now),
        "subject": subject,
        "laneResults": [],
        "scenarioResults": results,
        "verdict": verdict,
    }


def _scenario_result(scenario_id: str, scenario: QCScenario | None, items: list[QCItem], now) -> dict[str, Any]:
    if items:
        status = _status_for(items, now)
    elif scenario is not None and scenario.status == QCScenario.Status.FIXED:
        status = "pass"
    else:
        status = "skipped"  # nothing filed against it: this export holds no evidence about it
    open_modes = [i.failure_mode.name for i in items if i.failure_mode is not None and i.status == QCItem.Status.OPEN]
    refs: list[str] = []
    for item in items:
        refs.append(f"benchviewer:qc-item/{item.pk}")
        refs.extend(ref_text(r, item.trial) for r in item.evidence_refs)
        # An item filed on a failure cluster: each trial it cites, as its refs and as links to the
        # trial's page and the step where its failure shows ("benchviewer:/trials/7/steps/12/").
        for cited in citation_links(list(item.citations.all())):
            trial = cited["trial"]
            for ref in cited["refs"]:  # type: ignore[attr-defined]
                refs.append(ref_text(ref, trial))  # type: ignore[arg-type]
                if ref["url"]:
                    refs.append(f"benchviewer:{ref['url']}")
    result: dict[str, Any] = {
        "scenarioId": scenario_id,
        "status": status,
        "executor": (scenario.executor if scenario and scenario.executor else "harbor"),
        "attempts": len({i.trial_id for i in items}),
        "evidenceRefs": list(dict.fromkeys(refs)),
        "failureModes": list(dict.fromkeys(open_modes)),
    }
    transcripts = [i.trial.refs.get("runtimeTranscriptRef") for i in items if isinstance(i.trial.refs, dict)]
    transcripts = [t for t in transcripts if isinstance(t, str) and t]
    if transcripts:
        result["runtimeTranscriptRef"] = transcripts[0]
    if status in ("needs-human-review", "waived"):
        result["humanReview"] = {
            "required": True,
            "reason": "open P2/P3 facts need a decision"
            if status == "needs-human-review"
            else "waived items must be fixed before their waivers expire",
            "decision": "deferred" if status == "waived" else "not-reviewed",
        }
    return result
