"""The pages: dashboard, jobs, configurations, trial list, search, a trial (its tabs: reading/tab_panels.py), a step,
side by side, artifacts."""

import mimetypes
from pathlib import PurePosixPath

from csp.decorators import csp_update
from django.core.paginator import Paginator
from django.db.models import Avg, Count, F, Max, Q, QuerySet
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_safe

from core.ids import parse_pk
from trials import thresholds
from trials.ingest.formats import harbor_checks
from trials.models import Artifact, Configuration, Dataset, Import, Job, PackFile, QCItem, Trial
from trials.models.taxonomy import FLAG_LABELS, WITH_REWARD_FLAG
from trials.models.trial import PASSES, WITHOUT_REWARD, failures_q, stall_cutoff
from trials.reading import artifacts, lists, search_hits, side_by_side, tab_panels, tabs, text
from trials.triage import clusters
from trials.triage.forms import CommentForm

PAGE_SIZE = 50
DASHBOARD_ROWS = 10  # of each list on the dashboard, with a link to all of it
JOBS_NEWEST_FIRST = ("-created_at", "-pk")  # the job list's order: the last imported first
KEPT_ROWS_SHOWN = 50  # an envelope's rows that are not trials, shown on its job page
# Images an agent step can show inline; anything else downloads as an attachment.
INLINE_MEDIA_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"} | {
    f"audio/{kind}" for kind in ("wav", "x-wav", "mpeg", "mp4", "aac", "ogg", "flac", "webm", "aiff", "x-aiff")
}


def flag_counts() -> list[tuple[str, str, int]]:
    """(flag, its reason, trials it flags, passing ones too): failures whatever the reward."""
    flagged = Trial.objects.filter(is_flagged=True)
    counts = flagged.aggregate(
        **{flag: Count("pk", filter=Q(safety_flags__icontains=f'"{flag}"')) for flag in FLAG_LABELS}
    )
    return [(flag, label, counts[flag]) for flag, label in FLAG_LABELS.items() if counts[flag]]


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    untriaged = Trial.objects.for_list().select_related("task__dataset").untriaged().order_by("-pk")
    # The newest first, as the job list and the configuration list order them: each panel is their first rows.
    jobs = list(
        Job.objects.for_list()
        .annotate(n_trials=Count("trials"), mean_reward=Avg("trials__reward"))
        .order_by(*JOBS_NEWEST_FIRST)[:DASHBOARD_ROWS]
    )
    agents = lists.agents_by_job([job.pk for job in jobs])
    for job in jobs:  # agent · model, as the job list names them: a format names no run
        job.agents = agents.get(job.pk, [])
    return render(
        request,
        "trials/home.html",
        {
            "imports": Import.objects.all()[:10],
            "jobs": jobs,
            "datasets": Dataset.objects.annotate(n_trials=Count("trial"))[:20],
            "configurations": newest_configurations()[:DASHBOARD_ROWS],
            "job_count": Job.objects.count(),
            "configuration_count": Configuration.objects.count(),
            # by class, as the clusters page counts them (every failed, unscored or flagged trial is in a cluster)
            "failure_classes": [row for row in clusters.class_rows() if row["trials"]],
            "flagged": flag_counts(),
            "untriaged": untriaged[:10],
            "untriaged_count": untriaged.count(),
            "incomplete_count": Trial.objects.filter(lime_evidence=True, is_complete=False).count(),
            "trial_count": Trial.objects.count(),
        },
    )


def newest_configurations() -> QuerySet[Configuration]:
    """Configurations with their trial counts, the one whose trials came in last first."""
    return Configuration.objects.annotate(n_trials=Count("trials"), last_trial=Max("trials__created_at")).order_by(
        F("last_trial").desc(nulls_last=True), "-pk"
    )


@require_safe
def configuration_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(newest_configurations(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "trials/configuration_list.html", {"page": page})


@require_safe
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = (
        Job.objects.for_list()
        .annotate(
            n_trials=Count("trials"),
            n_failed=Count("trials", filter=failures_q("trials__")),  # (the list's `status=…&passes=false`)
            mean_reward=Avg("trials__reward"),
        )
        .order_by(*JOBS_NEWEST_FIRST)
    )
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    agents = lists.agents_by_job([job.pk for job in page])
    for job in page:
        job.agents = agents.get(job.pk, [])
    return render(request, "trials/job_list.html", {"page": page})


@require_safe
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(Job, pk=pk)
    rows = lists.job_task_rows(job, request.GET)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    exceptions = lists.exception_types_by_task(job, [r["task_id"] for r in page])
    report = job.check_report()
    for row in page:
        row["exception_types"] = exceptions.get(row["task_id"], [])
        row["checks"] = harbor_checks.checks_for_task({"tasks": report}, row["task_name"]) if report else {}
    kept_rows = job.kept_result_rows()
    # One rule each, as the trial list's filters the counts link to and a comparison count (trials.models.trial):
    # a pass is PASSES (a run that timed out or errored with a passing reward too, flagged), unscored is no reward.
    totals = job.trials.aggregate(
        n=Count("pk"),
        n_passed=Count("pk", filter=PASSES),
        n_passed_flagged=Count("pk", filter=PASSES & Q(safety_flags__icontains=f'-{WITH_REWARD_FLAG}"')),
        mean_reward=Avg("reward"),
        n_scored=Count("pk", filter=Q(reward__isnull=False)),
        n_running=Count("pk", filter=Q(status=Trial.Status.RUNNING)),  # live trials (trials/live/)
        n_stalled=Count("pk", filter=Q(status=Trial.Status.RUNNING, live_seen_at__lt=stall_cutoff())),
        n_unscored=Count("pk", filter=WITHOUT_REWARD),
    )
    totals["n_finished"] = totals["n"] - totals["n_running"]
    # Terminal-Bench's accuracy: passed of every finished trial, an unscored one counting as not passed.
    totals["accuracy"] = totals["n_passed"] / totals["n_finished"] if totals["n_finished"] else None
    return render(
        request,
        "trials/job_detail.html",
        {
            "job": job,
            "agents": lists.agents_by_job([job.pk]).get(job.pk, []),
            "page": page,
            "totals": totals,
            # (the threshold the accuracy counts by, and where it came from, stated beside it)
            "pass_rule": thresholds.pass_rule(thresholds.datasets_of(job.trials.all())),
            "sorts": lists.TASK_SORT_LABELS,
            "sort": request.GET.get("sort", "task"),
            "check_report": report,
            "job_config": text.pretty_json(text.scrub_json(job.config)) if job.config else "",
            "kept_rows": [text.pretty_json(text.scrub_json(r)) for r in kept_rows[:KEPT_ROWS_SHOWN]],
            "kept_rows_total": len(kept_rows),
        },
    )


@require_safe
def trial_list(request: HttpRequest) -> HttpResponse:
    filterset, trials = lists.trial_list(request.GET)
    page = Paginator(trials, PAGE_SIZE).get_page(request.GET.get("page"))
    chosen = filterset.form.cleaned_data if filterset.form.is_valid() else {}
    return render(
        request,
        "trials/trial_list.html",
        {
            "filter": filterset,
            "page": page,
            "list_query": lists.list_query(request.GET),
            "sorts": lists.SORT_LABELS,
            "sort": request.GET.get("sort", "newest"),
            "from_import": chosen.get("import_id") and Import.objects.filter(pk=chosen["import_id"]).first(),
            "from_pack": chosen.get("pack"),
            "chosen": chosen,
            "figure_filter": lists.figure_filter(chosen),
        },
    )


@require_safe
def search(request: HttpRequest) -> HttpResponse:
    """Search across trials: the steps of every trial that hold the words, with the list's filters."""
    found = search_hits.search_trials(request.GET) if request.GET.get("q", "").strip() else None
    return render(request, "trials/search.html", {"found": found, "filters": search_hits.FILTER_KEYS})


# asciinema's player (the Artifacts tab's terminal recordings) compiles its terminal emulator from
# WebAssembly: this allows compiling WASM on the trial page only, never eval of JavaScript.
# (django-csp types a view as taking the request alone, hence the ignores.)
PLAYER_CSP = {"script-src": "'wasm-unsafe-eval'"}


@require_safe
@csp_update(PLAYER_CSP)  # type: ignore[arg-type]
def trial_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return trial_page(request, pk)


def trial_page(request: HttpRequest, pk: int, number: int | None = None) -> HttpResponse:
    """The trial page. `number` (from /steps/<n>/) opens the trajectory window holding step n."""
    trial = get_object_or_404(Trial.objects.for_list(), pk=pk)
    tab = "trajectory" if number is not None else request.GET.get("tab", "trajectory")
    if tab not in dict(tab_panels.TABS):
        tab = "trajectory"
    trajectories = list(trial.trajectories.order_by("position", "pk"))
    if (go_to := parse_pk(request.GET.get("step"))) is not None:  # the "go to step" box
        return redirect(_with_query(reverse("trial-step", args=[pk, go_to]), request, "t"))
    list_q = request.GET.get("list", "")
    context = {
        "trial": trial,
        "tab": tab,
        "tabs": tab_panels.TABS,
        "trajectories": trajectories,
        "facts": tabs.header_facts(trial, trajectories),
        "phases": tabs.phase_bar(trial),
        "token_bar": tabs.token_bar(trial),
        "completeness": tabs.trial_completeness(trial),
        "list_q": list_q,
        "neighbours": lists.neighbours(trial, list_q),
        "trial_url": trial.get_absolute_url(),
        # kept when moving to the previous / next trial: the list, the open tab, the filters
        "nav_query": _query(
            {"list": list_q, "tab": "" if tab == "trajectory" else tab, "hide": request.GET.get("hide")}
        ),
        # where ←/→ land: the trajectory's steps, or the open tab's panel
        "nav_anchor": "steps" if tab == "trajectory" else f"tab-{tab}",
        "counts": {
            "permissions": trial.permissions.count(),
            "denied_side_effects": trial.permissions.filter(side_effect_after_denial=True).count(),
        },
        # QC items and comments (triage/_trial_qc.html): reviewers comment here, triagers also file
        "items": QCItem.objects.about(trial).select_related("scenario", "failure_mode", "assignee").order_by("-pk"),
        "comments": trial.qc_comments.select_related("author"),
        "comment_form": CommentForm(),
        # "compare with a passing attempt" is offered on a failure that has one
        "has_passing_attempt": bool(trial.cluster_id and clusters.with_passing_attempt([trial])),
        # `harbor check`'s verdicts on the trial's task, from its job's check_report.json
        "task_checks": Job.task_checks(trial.job_id, trial.task.name)
        if trial.task and trial.format_traits.task_checks
        else {},
    }
    context |= tab_panels.PANELS[tab](request, trial, trajectories, number)
    return render(request, "trials/trial_detail.html", context)


@require_safe
@csp_update(PLAYER_CSP)  # type: ignore[arg-type]
def trial_step(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    """The stable URL of a step: the trial page at the window holding it, scrolled to it."""
    return trial_page(request, pk, number=number)


@require_safe
def trial_side_by_side(request: HttpRequest, pk: int, other: int) -> HttpResponse:
    """Two trials of one task, their steps aligned row by row; opens at the first divergence."""
    left, right = (
        get_object_or_404(Trial.objects.for_list(), pk=pk),
        get_object_or_404(Trial.objects.for_list(), pk=other),
    )
    context = {"left": left, "right": right, "sides": [(left, "Left", None), (right, "Right", None)]}
    try:
        s = side_by_side.sides(left, right)
    except side_by_side.NotComparable as exc:
        return render(request, "trials/side_by_side.html", context | {"error": str(exc)}, status=400)
    context["sides"] = [(left, "Left", s.left_steps.step_count), (right, "Right", s.right_steps.step_count)]
    numbers = [parse_pk(request.GET.get(k)) for k in ("left", "right")]
    return render(request, "trials/side_by_side.html", context | {"page": side_by_side.page(s, *numbers)})


@require_safe
def artifact_download(request: HttpRequest, pk: int, artifact_pk: int) -> FileResponse:
    """The stored bytes of an artifact, always as an attachment (never rendered by the browser)."""
    artifact = get_object_or_404(Artifact.objects.select_related("blob"), pk=artifact_pk, trial_id=pk)
    if artifact.blob is None:
        raise Http404("this artifact's bytes were not in the pack")
    return FileResponse(
        artifact.blob.open(),
        as_attachment=True,
        filename=artifacts.file_name(artifact),
        content_type="application/octet-stream",
    )


@require_safe
def artifact_preview(request: HttpRequest, pk: int, artifact_pk: int) -> FileResponse:
    """An image artifact shown in the page (PNG, JPEG, GIF, WebP up to the preview cap); nothing else."""
    artifact = get_object_or_404(Artifact.objects.select_related("blob"), pk=artifact_pk, trial_id=pk)
    content_type = artifacts.image_type(artifact)
    if artifact.blob is None or content_type is None or artifact.blob.size > artifacts.PREVIEW_BYTES:
        raise Http404("only images up to the preview size are shown in the page")
    return FileResponse(artifact.blob.open(), content_type=content_type, filename=artifacts.file_name(artifact))


@require_safe
def artifact_recording(request: HttpRequest, pk: int, artifact_pk: int) -> HttpResponse:
    """A terminal recording's asciicast, scrubbed, for asciinema's player on the Artifacts tab."""
    artifact = get_object_or_404(Artifact.objects.select_related("blob", "trial"), pk=artifact_pk, trial_id=pk)
    if not artifacts.is_recording(artifact):
        raise Http404("only terminal recordings up to the player's size are played")
    return HttpResponse(artifacts.recording_text(artifact.trial, artifact), content_type="text/plain; charset=utf-8")


@require_safe
def trial_file(request: HttpRequest, pk: int) -> FileResponse:
    """An image or audio file of the trial's pack by path, for the messages that reference it."""
    trial = get_object_or_404(Trial, pk=pk)
    wanted = request.GET.get("path", "").lstrip("/")
    if not wanted or trial.pack_id is None or ".." in wanted.split("/"):
        raise Http404("no such file")
    files = PackFile.objects.filter(pack_id=trial.pack_id).select_related("blob")
    match = files.filter(path=wanted).first() or files.filter(path__endswith="/" + wanted).first()
    if match is None:
        raise Http404("no such file")
    content_type = mimetypes.guess_type(match.path)[0] or ""
    if content_type not in INLINE_MEDIA_TYPES:
        # Only the media a message points at: other pack files (event logs, context records)
        # may hold values a redaction withholds, and artifacts have their own download.
        raise Http404("only images and audio of the trajectory are served here")
    return FileResponse(match.blob.open(), content_type=content_type, filename=PurePosixPath(match.path).name)


def _query(values: dict) -> str:
    params = QueryDict(mutable=True)
    for key, value in values.items():
        if value:
            params[key] = value
    return params.urlencode()


def _with_query(url: str, request: HttpRequest, *keys: str) -> str:
    query = _query({k: request.GET.get(k) for k in keys})
    return f"{url}?{query}" if query else url
