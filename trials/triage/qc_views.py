"""The QC pages: the QC home, scenarios and their manifests, the blocker board, waivers, and an
item's page (its edit and the waiver granted from it). The queue and cluster pages are views.py.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core import roles
from core.ids import parse_pk
from trials.models import Document, Trial
from trials.models.qc import AuditEntry, QCItem, QCScenario
from trials.triage import export, queries, scenario_manifests, services
from trials.triage.evidence_links import citation_links, evidence_links
from trials.triage.forms import CommentForm, ItemEditForm, ScenarioStatusForm, WaiveForm
from trials.triage.views import PAGE_SIZE

CITATIONS_SHOWN = 50  # of an item filed on a failure cluster; its cluster page lists them all


@roles.require_right(roles.READ)
def qc_home(request):
    evidence = export.build_evidence()
    return render(
        request,
        "triage/qc_home.html",
        {
            "verdict": evidence["verdict"],
            "scenario_count": QCScenario.objects.count(),
            "open_p0": QCItem.objects.filter(severity="P0").unwaived().count(),
            "blocker_count": QCItem.objects.filter(kind=QCItem.Kind.RELEASE_BLOCKER).unwaived().count(),
            "expiring": queries.expiring_waivers()[:10],
            "untriaged": Trial.objects.untriaged().count(),
            "recent": AuditEntry.objects.select_related("actor", "item", "trial", "scenario")[:15],
        },
    )


@roles.require_right(roles.READ)
def scenario_list(request):
    page = Paginator(queries.scenario_rows(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "triage/scenario_list.html",
        {
            "page": page,
            "manifests": scenario_manifests.manifests().annotate(n=Count("qc_scenarios")),
        },
    )


@require_POST
@roles.require_right(roles.FILE_QC)
def scenario_import(request):
    document_id = request.POST.get("document", "")
    document = get_object_or_404(Document, pk=parse_pk(document_id) or 0, kind=scenario_manifests.MANIFEST_KIND)
    scenarios, modes = scenario_manifests.import_manifest(request.user, document)
    messages.success(request, f"Imported {scenarios} new scenario(s) and {modes} new failure mode(s).")
    return redirect("qc-scenarios")


@roles.require_right(roles.READ)
def scenario_detail(request, pk: int):
    scenario = get_object_or_404(queries.scenario_rows(), pk=pk)
    return render(
        request,
        "triage/scenario_detail.html",
        {
            "scenario": scenario,
            "modes": queries.failure_mode_rows(scenario),
            "status_form": ScenarioStatusForm(initial={"status": scenario.status}, user=request.user),
            "history": scenario.history.select_related("actor")[:50],
        },
    )


@require_POST
@roles.require_right(roles.FILE_QC)
def scenario_status(request, pk: int):
    scenario = get_object_or_404(QCScenario, pk=pk)
    form = ScenarioStatusForm(request.POST, user=request.user)
    if form.is_valid():
        if services.set_scenario_status(request.user, scenario, form.cleaned_data["status"]):
            messages.success(request, f"{scenario.scenario_id} is now {form.cleaned_data['status']}.")
    else:
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
    return redirect(scenario)


@roles.require_right(roles.READ)
def blocker_board(request):
    items = list(queries.blockers()[:500])
    return render(
        request,
        "triage/blockers.html",
        {
            "open_items": [i for i in items if i.status == QCItem.Status.OPEN],
            "closed_items": [i for i in items if i.status != QCItem.Status.OPEN],
            "expiring": queries.expiring_waivers()[:20],
        },
    )


@roles.require_right(roles.READ)
def waiver_list(request):
    page = Paginator(queries.waivers().order_by("status", "expires_at", "pk"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "triage/waivers.html",
        {"page": page, "expiring": queries.expiring_waivers()[:20]},
    )


@roles.require_right(roles.READ, write=roles.FILE_QC)
def item_detail(request, pk: int):
    item = _item_with_facts(pk)
    form = None
    if roles.has_right(request.user, roles.FILE_QC) and (
        not item.is_waiver or roles.has_right(request.user, roles.WAIVE)
    ):
        form = ItemEditForm(instance=item, user=request.user)
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("your role may not edit this item")
        form = ItemEditForm(request.POST, instance=QCItem.objects.get(pk=pk), user=request.user)
        if form.is_valid():
            changed = services.update_item(request.user, item, form.cleaned_data)
            messages.success(request, f"Saved {item.label}: {', '.join(changed) or 'nothing changed'}.")
            return redirect(item)
    return _item_page(request, item, form, WaiveForm() if _may_waive_here(request.user, item) else None)


@require_POST
@roles.require_right(roles.WAIVE)
def waive_item(request, pk: int):
    """Grant a waiver of this item from its own page (a release blocker's): filed as the feedback form files one."""
    item = _item_with_facts(pk)
    if not _may_waive_here(request.user, item):
        messages.error(request, f"{item.label} is not an open item a waiver can cover.")
        return redirect(item)
    waive_form = WaiveForm(request.POST)
    if waive_form.is_valid():
        feedback = waive_form.waiver_feedback(item, request.user)
        if feedback.is_valid():
            waiver = services.file_item(request.user, item.trial, feedback.cleaned_data)
            until = f"{waiver.expires_at:%Y-%m-%d %H:%M}"
            messages.success(request, f"Granted {waiver.label}: a waiver of {item.label} until {until}.")
            return redirect(item)
        for name, errors in feedback.errors.items():
            for error in errors:
                waive_form.add_error(name if name in waive_form.fields else None, error)
    edit_form = ItemEditForm(instance=item, user=request.user)
    return _item_page(request, item, edit_form, waive_form, status=400)


def _item_with_facts(pk: int) -> QCItem:
    return get_object_or_404(
        QCItem.objects.select_related("trial", "trial__task", "scenario", "failure_mode", "waived_item", "approver"),
        pk=pk,
    )


def _may_waive_here(user, item: QCItem) -> bool:
    """An approver, on an open release blocker."""
    return (
        roles.has_right(user, roles.WAIVE)
        and item.kind == QCItem.Kind.RELEASE_BLOCKER
        and item.status == QCItem.Status.OPEN
    )


def _item_page(request, item: QCItem, form, waive_form, status: int = 200):
    return render(
        request,
        "triage/item_detail.html",
        {
            "item": item,
            "form": form,
            "waive_form": waive_form,
            "evidence": evidence_links(item.trial, item.evidence_refs, item.step_id),
            "history": item.history.select_related("actor"),
            "comments": item.comments.select_related("author"),
            "comment_form": CommentForm(),
            "waivers": item.waivers.select_related("approver"),
            "citations": citation_links(
                list(item.citations.select_related("trial").order_by("trial_id")[:CITATIONS_SHOWN])
            ),
            "citation_count": item.citations.count(),
        },
        status=status,
    )
