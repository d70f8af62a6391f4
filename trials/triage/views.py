"""Triage pages: the feedback form, the queue, failure clusters, comments; the QC pages are qc_views.py."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from core import roles
from core.ids import parse_pk
from trials.models import Step, Trial
from trials.models.qc import FailureCluster, QCItem
from trials.models.taxonomy import FLAG_CHOICES, Category
from trials.reading import lists
from trials.triage import clusters, prefill, queries, services
from trials.triage.forms import (
    AssignForm,
    ClusterFeedbackForm,
    CommentForm,
    FailureClassForm,
    FeedbackForm,
    MergeForm,
    SplitForm,
    TagForm,
)

PAGE_SIZE = 50
QUEUE_PAGE_SIZE = 100  # a queue page is dense rows, not cards


def _step_for(trial: Trial, wanted: str | None, trajectory: str | None, choices: list[tuple[str, str]]) -> str:
    """`?step=` is a step ref (one of the form's `choices`, `prefill.step_choices`), or a 1-based
    step number of the trajectory `?t=` (the trial page's links; the trial's first trajectory without it)."""
    if not wanted:
        return ""
    number, trajectory_pk = parse_pk(wanted), parse_pk(trajectory)
    numbered = number is not None and trajectory_pk is not None
    if not numbered and any(ref == wanted for ref, _ in choices):
        return wanted
    if number is not None:
        steps = Step.objects.filter(trial=trial, index=number - 1)
        if trajectory_pk is not None:  # (numbered, as number is not None here)
            steps = steps.filter(trajectory_id=trajectory_pk)
        step = steps.order_by("trajectory__position").only("step_id", "trajectory_id").first()
        if step is not None:
            return prefill.step_ref(step.step_id, prefill.trajectory_names(trial)[step.trajectory_id])
    return ""


@roles.require_right(roles.FILE_QC)
def feedback(request, pk: int):
    trial = get_object_or_404(Trial.objects.for_list(), pk=pk)
    guess = prefill.prefill(trial)
    if request.method == "POST":
        form = FeedbackForm(request.POST, trial=trial, user=request.user)
        if form.is_valid():
            item = services.file_item(request.user, trial, form.cleaned_data)
            messages.success(request, f"Filed {item.label}: {item.get_kind_display()} ({item.severity}).")
            return redirect(item)
    else:
        form = FeedbackForm(trial=trial, user=request.user)
        choices = form.fields["step_id"].choices  # type: ignore[attr-defined]  # (a ChoiceField; stubs: Field)
        step_id = _step_for(trial, request.GET.get("step"), request.GET.get("t"), choices)
        form.initial = {
            "kind": request.GET.get("kind") or QCItem.Kind.FAILURE_MODE,
            "category": guess.category,
            "code": guess.code,
            "severity": "P1" if trial.is_failure else "P2",
            "step_id": step_id,
            "evidence_refs": [f"step:{step_id}"] if step_id else [],
            "approver": request.user.pk if roles.has_right(request.user, roles.WAIVE) else None,
        }
    similar = []
    if guess.code and not form.is_bound:
        similar = list(prefill.similar_failure_modes("", guess.code))
    return render(
        request,
        "triage/feedback.html",
        {
            "trial": trial,
            "form": form,
            "guess": guess,
            "similar": form.similar or similar,
            "items": QCItem.objects.about(trial).select_related("scenario", "failure_mode").order_by("-pk"),
            "comments": trial.qc_comments.select_related("author"),
            "comment_form": CommentForm(),
        },
    )


@roles.require_right(roles.READ)
def queue(request):
    rows = queries.queue(request.GET, request.user)
    page = Paginator(rows, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    for trial in page:
        signature = trial.cluster.signature if trial.cluster else {}
        # (what the queue rows show, set on each trial of the page)
        trial.category = signature.get("category") or prefill.queue_category(vars(trial))  # type: ignore[attr-defined]
        trial.reasons = queries.queue_reasons(trial)  # type: ignore[attr-defined]
    kept = request.GET.copy()
    kept.pop("page", None)
    sort = request.GET.get("sort") or "trial"
    return render(
        request,
        "triage/queue.html",
        {
            "page": page,
            "total": Trial.objects.untriaged().count(),
            "filters": {key: request.GET.get(key, "") for key in queries.QUEUE_FILTERS},
            "sort": sort,
            "sorts": [(key, f"-{key}" if sort == key else key) for key in queries.QUEUE_SORTS],
            "query": _without(request.GET, "page", "sort"),
            "page_query": _without(request.GET, "page"),
            "flags": FLAG_CHOICES,
            "categories": Category.choices,
            "progress": queries.assignee_progress(),
            "assignees": roles.users_with_right(roles.FILE_QC),
        },
    )


def _without(params, *keys: str) -> str:
    kept = params.copy()
    for key in keys:
        kept.pop(key, None)
    return kept.urlencode()


@require_POST
@roles.require_right(roles.ASSIGN)
def assign(request):
    form = AssignForm(request.POST)
    if form.is_valid():
        count = services.assign_trials(request.user, list(form.cleaned_data["trials"]), form.cleaned_data["assignee"])
        messages.success(request, f"Assigned {count} trial{pluralize(count)}.")
    else:
        errors = "; ".join(str(e) for e in form.errors.get("trials", []))
        messages.error(request, "Pick failed trials and a triager: " + errors)
    return _back_to_queue(request)


@require_POST
@roles.require_right(roles.ASSIGN)
def claim(request, pk: int):
    """ "Assign to me": the trial is the triager's until they file it or hand it on."""
    trial = get_object_or_404(Trial.objects.triageable(), pk=pk)
    services.assign_trials(request.user, [trial], request.user)
    messages.success(request, f"{trial.name} is yours.")
    return _back_to_queue(request)


@require_POST
@roles.require_right(roles.FILE_QC)
def next_untriaged(request):
    """Claim the next untriaged trial of the queue (as filtered) and open its feedback form."""
    trial = queries.next_untriaged(request.user, request.POST)
    if trial is None:
        messages.info(request, "Nothing left to triage under these filters.")
        return _back_to_queue(request)
    if roles.has_right(request.user, roles.ASSIGN):
        services.assign_trials(request.user, [trial], request.user)
    return redirect("triage-feedback", trial.pk)


@require_POST
@roles.require_right(roles.FILE_QC)
def tag(request):
    """Put a tag on the picked trials of the queue (the queue filters on it: `?tag=`)."""
    form = TagForm(request.POST)
    if form.is_valid():
        count = services.tag_trials(request.user, list(form.cleaned_data["trials"]), form.cleaned_data["tag"])
        messages.success(request, f"Tagged {count} trial{pluralize(count)} {form.cleaned_data['tag']}.")
    else:
        messages.error(request, "Pick trials and a tag (letters, digits, - and _).")
    return _back_to_queue(request)


@roles.require_right(roles.FILE_QC)
def add_to_queue(request):
    """Every trial of a trials list filter into the queue in one action: GET says how many, POST adds them."""
    _, trials = lists.trial_list(request.POST if request.method == "POST" else request.GET)
    if request.method == "POST":
        added = services.add_to_queue(request.user, trials)
        messages.success(request, f"Added {added} trial{pluralize(added)} to the triage queue.")
        return redirect("triage-queue")
    count = trials.count()
    already = trials.filter(pk__in=Trial.objects.untriaged().values("pk")).count()
    return render(
        request,
        "triage/queue_add.html",
        {
            "count": count,
            "already": already,
            "new": count - already,
            "params": [(k, v) for k, values in request.GET.lists() for v in values if k != "page"],
            "list_query": lists.list_query(request.GET),
        },
    )


def _back_to_queue(request):
    query = request.POST.get("query") or ""
    return redirect(f"{reverse('triage-queue')}?{query}" if query else reverse("triage-queue"))


@roles.require_right(roles.READ)
def cluster_list(request):
    page = Paginator(clusters.cluster_rows(request.GET), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "triage/cluster_list.html",
        {
            "page": page,
            "rows": clusters.with_details(list(page), request.GET),
            "classes": clusters.class_rows(request.GET),
            "chosen_class": request.GET.get("class", ""),
            "class_query": _without(request.GET, "page", "class"),
            "filters": {key: request.GET.get(key, "") for key in clusters.FILTER_KEYS},
            "query": _without(request.GET, "page"),
        },
    )


@roles.require_right(roles.READ)
def cluster_detail(request, pk: int):
    cluster = get_object_or_404(FailureCluster, pk=pk)
    return _cluster_page(request, cluster, form=None)


def _cluster_page(request, cluster: FailureCluster, form):
    example = clusters.representative(cluster)
    if form is None and example is not None and roles.has_right(request.user, roles.FILE_QC):
        signature = cluster.signature
        form = ClusterFeedbackForm(trial=example.trial, user=request.user)
        form.initial = {
            "kind": QCItem.Kind.FAILURE_MODE,
            "category": clusters.form_category(cluster, example.trial),
            "code": signature.get("code") or "",
            "severity": "P1",
        }
    trials = (
        clusters.clustered_trials(request.GET)
        .filter(cluster=cluster)
        .select_related("task", "job", "configuration", "triage_assignment__assignee")
    )
    page = Paginator(trials.order_by("-pk"), PAGE_SIZE).get_page(request.GET.get("page"))
    shown = list(page) + ([example.trial] if example is not None else [])
    return render(
        request,
        "triage/cluster_detail.html",
        {
            "cluster": cluster,
            "row": clusters.cluster_row(cluster, request.GET),
            "breakdown": clusters.breakdown(cluster, request.GET),
            "facets": clusters.facets(cluster, request.GET),
            "example": example,
            "page": page,
            "form": form,
            "items": cluster.qc_items.select_related("scenario", "failure_mode", "assignee", "trial").order_by("-pk"),
            "filters": {key: request.GET.get(key, "") for key in clusters.FILTER_KEYS},
            "page_query": _without(request.GET, "page"),
            "with_passing": clusters.with_passing_attempt(shown),  # the link is hidden on the others
        },
    )


@require_POST
@roles.require_right(roles.FILE_QC)
def cluster_file(request, pk: int):
    cluster = get_object_or_404(FailureCluster, pk=pk)
    trials = list(Trial.objects.filter(cluster=cluster).order_by("pk"))
    if not trials:
        messages.error(request, f"{cluster.label} has no trial left to file.")
        return redirect(cluster)
    form = ClusterFeedbackForm(request.POST, trial=trials[0], user=request.user)
    if not form.is_valid():
        return _cluster_page(request, cluster, form)
    item = services.file_cluster(request.user, cluster, trials, form.cleaned_data)
    messages.success(request, f"Filed {item.label} for {len(trials)} trial{pluralize(len(trials))} of {cluster.label}.")
    return redirect(item)


@require_POST
@roles.require_right(roles.FILE_QC)
def cluster_merge(request, pk: int):
    cluster = get_object_or_404(FailureCluster, pk=pk)
    form = MergeForm(request.POST)
    target = FailureCluster.objects.filter(pk=form.cleaned_data["into"]).first() if form.is_valid() else None
    if target is None:
        messages.error(request, "Name the cluster to merge into by its number (C-12 is 12).")
        return redirect(cluster)
    try:
        moved = services.merge_clusters(request.user, cluster, target)
    except ValueError as error:
        messages.error(request, str(error))
        return redirect(cluster)
    messages.success(request, f"Merged {cluster.label} into {target.label}: {moved} trial{pluralize(moved)} moved.")
    return redirect(target.merged_into or target)


@require_POST
@roles.require_right(roles.FILE_QC)
def cluster_split(request, pk: int):
    cluster = get_object_or_404(FailureCluster, pk=pk)
    form = SplitForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Split on a task or a failing test of this cluster.")
        return redirect(cluster)
    child = services.split_cluster(request.user, cluster, form.cleaned_data["facet"], form.cleaned_data["value"])
    messages.success(request, f"Split {child.label} out of {cluster.label}.")
    return redirect(child)


@roles.require_right(roles.READ)
def compare_passing(request, pk: int):
    """The failure beside a passing attempt of its task (`clusters.passing_attempt`: its configuration first,
    else the reference's, else another's), on the side-by-side page, which opens at the first divergence."""
    trial = get_object_or_404(Trial, pk=pk)
    passing = clusters.passing_attempt(trial)
    if passing is None:
        messages.info(request, f"No passing attempt of {trial.task or 'its task'} in any configuration.")
        return redirect(request.GET.get("back") if _safe_back(request) else trial.get_absolute_url())
    return redirect("trial-side-by-side", trial.pk, passing.pk)


def _safe_back(request) -> bool:
    target = request.GET.get("back") or ""
    return bool(target) and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})


@require_POST
@roles.require_right(roles.COMMENT)
def trial_comment(request, pk: int):
    trial = get_object_or_404(Trial, pk=pk)
    item = None
    if request.POST.get("item"):
        item_id = request.POST["item"]
        item = get_object_or_404(QCItem, pk=parse_pk(item_id) or 0, trial=trial)
    form = CommentForm(request.POST)
    if form.is_valid():
        services.add_comment(
            request.user, trial, form.cleaned_data["text"], step_id=form.cleaned_data["step_id"], item=item
        )
        messages.success(request, "Comment added.")
    else:
        messages.error(request, "A comment needs some text.")
    if item is not None:
        return redirect(item)
    return redirect(request.POST.get("next") if _safe_next(request) else trial.get_absolute_url())


def _safe_next(request) -> bool:
    target = request.POST.get("next") or ""
    return bool(target) and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})


@require_POST
@roles.require_right(roles.FILE_QC)
def set_failure_class(request, pk: int):
    """A triager's class for one failing trial, from its header; an empty choice goes back to the rules'."""
    trial = get_object_or_404(Trial, pk=pk)
    form = FailureClassForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose infrastructure, task quality, capability, or the rules' class.")
    elif services.set_failure_class(
        request.user, trial, form.cleaned_data["failure_class"], form.cleaned_data["reason"]
    ):
        shown = form.cleaned_data["failure_class"].replace("_", " ") or "the rules' class"
        messages.success(request, f"Failure class set: {shown}.")
    return redirect(trial.get_absolute_url())
