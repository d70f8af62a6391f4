"""Lime scenario manifests: the QCScenario and FailureMode rows an imported manifest seeds, and
the manifests imported (the scenarios page lists them).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from trials.models import Document, taxonomy
from trials.models.qc import FailureMode, QCScenario, Severity
from trials.triage.services import audit

MANIFEST_KIND = "agentqc-scenario-manifest"


@transaction.atomic
def import_manifest(user, document: Document) -> tuple[int, int]:
    """Seed QCScenario / FailureMode rows from an imported Lime scenario manifest.

    Idempotent: importing again updates titles and adds new failure modes; a scenario's
    status and the items filed against it are kept. Returns (scenarios created, failure
    modes created).
    """
    data = document.data or {}
    created_scenarios = created_modes = 0
    for entry in data.get("scenarios") or []:
        if not isinstance(entry, dict) or not entry.get("id"):
            continue
        risk = entry.get("risk") if entry.get("risk") in Severity.values else Severity.P1
        scenario, created = QCScenario.objects.update_or_create(
            scenario_id=str(entry["id"])[:200],
            defaults={
                "title": str(entry.get("title") or entry["id"])[:500],
                "risk": risk,
                "source": QCScenario.Source.MANIFEST,
                "executor": str(entry.get("executor") or "")[:60],
                "lanes": entry.get("lanes") or [],
                "goal": str(entry.get("goal") or ""),
                "verifier": str(entry.get("verifier") or ""),
                "evidence_required": entry.get("evidenceRequired") or [],
                "evidence_layers": entry.get("evidenceLayers") or [],
                "manifest": document,
            },
        )
        created_scenarios += created
        for name in entry.get("failureModes") or []:
            name = str(name)[:300]
            code = taxonomy.normalise_code(name.replace(" ", "-"))
            _, mode_created = FailureMode.objects.get_or_create(
                scenario=scenario, name=name, defaults={"code": code, "category": taxonomy.category_for(code)}
            )
            created_modes += mode_created
    audit(
        user,
        "manifest imported",
        changes={
            "manifest": (None, document.path),
            "scenarios": (None, created_scenarios),
            "failure_modes": (None, created_modes),
        },
    )
    return created_scenarios, created_modes


def manifests() -> QuerySet[Document]:
    return Document.objects.filter(kind=MANIFEST_KIND).select_related("pack").order_by("-pk")
