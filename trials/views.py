from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render

from trials import completeness, services
from trials.filters import TrialFilter
from trials.forms import UploadForm
from trials.models import Configuration, Dataset, Import, Job, Trial

PAGE_SIZE = 50


def home(request):
    failures = Trial.objects.failed().values("failure_category").annotate(n=Count("id")).order_by("-n")
    return render(
        request,
        "trials/home.html",
        {
            "imports": Import.objects.all()[:10],
            "jobs": Job.objects.annotate(n_trials=Count("trials"))[:10],
            "datasets": Dataset.objects.annotate(n_trials=Count("trial"))[:20],
            "configurations": Configuration.objects.annotate(n_trials=Count("trials"))[:20],
            "failures": failures,
            "trial_count": Trial.objects.count(),
        },
    )


def imports(request):
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        created = [
            services.import_upload(f, f.name, origin=Import.Origin.UPLOAD, user=request.user)
            for f in form.cleaned_data["files"]
        ]
        messages.success(request, f"{len(created)} file(s) queued for import.")
        if len(created) == 1:
            return redirect(created[0])
        return redirect("imports")
    page = Paginator(Import.objects.all(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "trials/imports.html", {"form": form, "page": page})


def import_detail(request, pk):
    imp = get_object_or_404(Import, pk=pk)
    return render(request, "trials/import_detail.html", {"import": imp})


def job_list(request):
    jobs = Job.objects.annotate(
        n_trials=Count("trials"), n_failed=Count("trials", filter=Q(trials__status__in=Trial.FAILED_STATUSES))
    )
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "trials/job_list.html", {"page": page})


def job_detail(request, pk):
    job = get_object_or_404(Job, pk=pk)
    trials = Trial.objects.for_list().filter(job=job).order_by("task__name", "name")
    page = Paginator(trials, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "trials/job_detail.html", {"job": job, "page": page})


def trial_list(request):
    filterset = TrialFilter(request.GET, queryset=Trial.objects.for_list().order_by("-pk"))
    page = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "trials/trial_list.html", {"filter": filterset, "page": page})


def trial_detail(request, pk):
    trial = get_object_or_404(Trial.objects.for_list(), pk=pk)
    steps = Paginator(trial.steps.order_by("trajectory__position", "index"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "trials/trial_detail.html",
        {
            "trial": trial,
            "completeness": completeness.evaluate(trial.benchmark, trial.runtime_correlation, trial.refs),
            "steps": steps,
        },
    )
