"""One trial: its outcome, rewards, tokens, timing, correlation ids and refs."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Cast, Coalesce
from django.urls import get_script_prefix, reverse
from django.utils import timezone

from trials.ingest import context_kinds
from trials.ingest.formats.detect import traits_of
from trials.ingest.records import PASS_REWARD, FormatTraits
from trials.models.catalog import Configuration, Dataset, Job, JobQuerySet, Task
from trials.models.imports import Pack
from trials.storage.fields import CharField, JSONField, TextField


def step_url(trial_pk: int, number: int, trajectory_pk: int | None = None) -> str:
    """Step `number`'s permalink on the trial page; `trajectory_pk` for a step outside the main trajectory."""
    url = f"{_steps_url(get_script_prefix(), trial_pk)}{number}/"
    return f"{url}?t={trajectory_pk}" if trajectory_pk else url


@functools.lru_cache(maxsize=4096)
def _steps_url(prefix: str, trial_pk: int) -> str:  # one reverse() a trial: a page links hundreds of steps
    return reverse("trial-step", args=[trial_pk, 0]).removesuffix("0/")


def stall_cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=settings.LIVE_STALL_SECONDS)


# Ended with no verdict, neither scored nor failed (TB1's `is_resolved: null`): a triager looks at why.
# (A running trial has no reward yet either, but a status of its own.)
UNSCORED = models.Q(status="unknown", reward=None)
# No reward, whatever the status (a running trial aside): what a job page and a comparison count as unscored,
# left out of the mean, never averaged in as 0 (the trial list's `unscored` filter).
WITHOUT_REWARD = models.Q(reward=None) & ~models.Q(status="running")
# The one rule of a pass (the job page, the comparisons, a passing attempt): a trial passes at its
# dataset's pass reward (PASS_REWARD unless the dataset sets one: trials/thresholds.py). A passed or failed
# status its source gave says so; a run that ended otherwise (timed out, errored, hit a limit) passes by its
# reward, and is flagged `…-with-reward` for a person to look at.
DECIDED = ("passed", "failed")


def pass_at(prefix: str = "") -> Coalesce:
    """The reward a trial passes at (`prefix`: the path to the trial, "trials__" from a job)."""
    return Coalesce(models.F(f"{prefix}dataset__pass_reward"), models.Value(PASS_REWARD))


PASSES = models.Q(status="passed") | (~models.Q(status__in=DECIDED) & models.Q(reward__gte=pass_at()))


def failures_q(prefix: str = "") -> models.Q:
    """Failed, errored or timed out, but not a run that passed by its reward (`PASSES`): what a job counts as
    failed (`prefix`: the path to the trial, "trials__" from a job)."""
    status, reward = f"{prefix}status", f"{prefix}reward"
    ended_otherwise = models.Q(**{f"{reward}__isnull": True}) | models.Q(**{f"{reward}__lt": pass_at(prefix)})
    return models.Q(**{status: "failed"}) | (models.Q(**{f"{status}__in": ("errored", "timeout")}) & ended_otherwise)


def counts_as_passed(status: str, reward: float | None, threshold: float | None = None) -> bool:
    """`PASSES` for one trial's status and reward (`threshold`: its dataset's pass reward, if it sets one)."""
    if status in DECIDED:
        return status == "passed"
    return reward is not None and reward >= (PASS_REWARD if threshold is None else threshold)


class TrialQuerySet(models.QuerySet):
    def for_list(self):
        return self.select_related("task", "configuration", "dataset", "job").defer(
            *(f"job__{name}" for name in JobQuerySet.DOCUMENT_FIELDS)
        )

    def failed(self):
        return self.filter(status__in=Trial.FAILED_STATUSES)

    def passes(self):
        """Trials that passed (`PASSES`), as a comparison counts them (comparisons.statistics.side_data._add_row):
        a passed status, or a run that ended otherwise (timed out, errored, a limit) with a passing reward."""
        return self.filter(PASSES)

    def of_task(self, task: Task | None):
        """Trials of this task (`Task.objects.same_as`: its dataset and its name); none without one."""
        return self.none() if task is None else self.filter(task__in=Task.objects.same_as(task))

    def failures(self):
        """Failed trials and those a safety signal flagged whatever their reward: what triage counts."""
        return self.filter(models.Q(status__in=Trial.FAILED_STATUSES) | models.Q(is_flagged=True))

    def triageable(self):
        """Failures, unscored trials, and the trials a person put in the queue: what a triager may claim or
        be assigned."""
        return self.filter(
            models.Q(status__in=Trial.FAILED_STATUSES)
            | UNSCORED
            | models.Q(is_flagged=True)
            | models.Q(queue_entry__isnull=False)
        )

    def with_failure_class(self, failure_class: str):
        """Trials of this class: a triager's override where one is set, else the rules' class."""
        return self.filter(
            models.Q(failure_class_override=failure_class)
            | models.Q(failure_class_override="", failure_class=failure_class)
        )

    def running(self):
        return self.filter(status=Trial.Status.RUNNING)

    def stalled(self):
        """Running trials no event has reached for LIVE_STALL_SECONDS: their runner may be gone."""
        return self.running().filter(live_seen_at__lt=stall_cutoff())

    def untriaged(self):
        """Failures, and trials a person queued, no QC item has been filed on: the triage queue."""
        return self.triageable().filter(qc_items__isnull=True, cited_qc_items__isnull=True)

    def held_by(self, pack_ids):
        """The trials of these packs: the ones they brought, and the ones they found already there."""
        also = Pack.other_trials.through.objects.filter(pack_id__in=pack_ids).values("trial_id")
        return self.filter(models.Q(pack_id__in=pack_ids) | models.Q(pk__in=also))


class Trial(models.Model):
    class Status(models.TextChoices):
        PASSED = "passed"
        FAILED = "failed"
        PARTIAL = "partial"  # a reward above 0 below the pass threshold: a score, neither a pass nor a failure
        ERRORED = "errored"
        TIMEOUT = "timeout"
        SKIPPED = "skipped"
        UNKNOWN = "unknown"
        RUNNING = "running"  # a live trial a runner reports to (trials/live/)

    FAILED_STATUSES = ("failed", "errored", "timeout")

    key = CharField(max_length=500, unique=True)
    # What its files were (trials.imports.service.files_sha256): a re-import of the trial from other
    # bytes is told apart from the same trial again. Blank for trials of shared files (AgentV).
    files_sha256 = CharField(max_length=64, blank=True)
    source_format = CharField(max_length=20, db_index=True)
    name = CharField(max_length=300)
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL, related_name="trials")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="trials")
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.PROTECT)
    configuration = models.ForeignKey(
        Configuration, null=True, blank=True, on_delete=models.PROTECT, related_name="trials"
    )
    attempt = models.PositiveIntegerField(null=True, blank=True)
    status = CharField(max_length=10, choices=Status.choices, default=Status.UNKNOWN)
    reward = models.FloatField(null=True, blank=True)
    rewards = JSONField(default=dict, blank=True)
    exception_type = CharField(max_length=200, blank=True)
    exception_message = TextField(blank=True)
    exception_traceback = TextField(blank=True)
    failure_category = CharField(max_length=60, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_sec = models.FloatField(null=True, blank=True)
    phases = JSONField(default=dict, blank=True)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    cached_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    step_text_indexed = models.BooleanField(default=False)  # its steps are in the search index (trials/search.py)
    # Joinability: which evidence parts the pack has, and whether it can be trusted.
    is_complete = models.BooleanField(default=False)
    missing = JSONField(default=list, blank=True)
    # Whether its source carries the Lime evidence facts the checks and the evidence gate read (a Lime
    # or Agent QC pack, a runtime correlation): elsewhere they read "not applicable", never a failure.
    lime_evidence = models.BooleanField(default=False)
    # Made of trajectory files alone, with no trial folder (its parser said so): a folder holding them takes it over.
    trajectory_files_alone = models.BooleanField(default=False)
    session_id = CharField(max_length=200, blank=True, db_index=True)
    run_id = CharField(max_length=200, blank=True, db_index=True)
    benchmark = JSONField(default=dict, blank=True)
    runtime_correlation = JSONField(default=dict, blank=True)
    refs = JSONField(default=dict, blank=True)
    provenance = JSONField(default=dict, blank=True)
    documents = JSONField(default=dict, blank=True)  # result.json, config.json… as parsed
    texts = JSONField(default=dict, blank=True)  # logs, stdout, exception.txt (path -> text)
    ctrf_tests = JSONField(default=list, blank=True)
    problems = JSONField(default=list, blank=True)
    # Triage (trials.triage.signatures): the failure cluster of a failed or flagged trial, and
    # the safety signals that flag it whatever its reward (["side-effect-after-denial", ...]).
    cluster = models.ForeignKey(
        "trials.FailureCluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="trials"
    )
    safety_flags = JSONField(default=list, blank=True)
    failing_test = CharField(max_length=200, blank=True)  # its verifier's first failing test: a cluster's facet
    is_flagged = models.BooleanField(default=False, db_index=True)
    # Why it failed (trials.models.failure_classes): the class the rules give, stored when it is
    # signed so comparisons can leave infrastructure failures out, and a triager's override.
    failure_class = CharField(max_length=20, blank=True)
    failure_class_why = CharField(max_length=200, blank=True)
    failure_class_override = CharField(max_length=20, blank=True)

    # The account that started a live trial: only it writes into the trial (`writable_by`).
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # When a runner last reported (an event, a step, a command): a running trial silent longer is stalled.
    live_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)  # a later join or re-score: cached comparisons go stale

    objects = TrialQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "name"]
        # An admin grants it (admin site, to a user or a group): a runner that writes into any live trial.
        permissions = [("write_any_live_trial", "Can write into live trials other accounts started")]
        indexes = [
            models.Index(fields=["job", "task"]),
            models.Index(fields=["configuration", "task"]),
            models.Index(fields=["dataset", "status"]),
            models.Index(fields=["status", "failure_category"]),
            models.Index(fields=["reward"]),
            # the trial list's sortable columns (trials.reading.lists.TRIAL_SORTS)
            models.Index(fields=["name"], name="trial_name_idx"),
            models.Index(fields=["duration_sec"], name="trial_duration_idx"),
            models.Index(fields=["cost_usd"], name="trial_cost_idx"),
            # the query box's suggestions of categories and exception types, prefix-matched (trials/queries/)
            models.Index(fields=["failure_category"], name="trial_category_idx"),
            models.Index(fields=["exception_type"], name="trial_exception_idx"),
            # what a stored grid's fingerprint reads (comparisons.families.grid.trials_fingerprint), read
            # from the index alone instead of every wide trial row: a stored grid served in O(index)
            models.Index(fields=["configuration", "updated_at", "reward", "is_complete"], name="trial_conf_fp_idx"),
            models.Index(fields=["job", "updated_at", "reward", "is_complete"], name="trial_job_fp_idx"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("trial-detail", args=[self.pk])

    @property
    def format_traits(self) -> FormatTraits:
        """What its format declares of its trials (check verdicts, recordings as text, Lime evidence…)."""
        return traits_of(self.source_format)

    @property
    def source(self) -> str:
        """Where it came from, as pages say it: "live", or "live (imported from an export)" after a round trip."""
        return f"{self.source_format} (imported from an export)" if "export" in self.provenance else self.source_format

    @property
    def is_stalled(self) -> bool:
        seen = self.live_seen_at
        return self.status == self.Status.RUNNING and seen is not None and seen < stall_cutoff()

    @property
    def effective_failure_class(self) -> str:
        """The triager's class when one was set, else the rules' ("" for a trial that did not fail)."""
        return self.failure_class_override or self.failure_class

    @property
    def is_failure(self) -> bool:
        return self.status in self.FAILED_STATUSES

    def writable_by(self, user) -> bool:
        """Events, steps, rewards and completions come from the account that started it, or one granted more."""
        started_here = self.started_by_id is not None and self.started_by_id == user.pk
        return started_here or user.has_perm("trials.write_any_live_trial")

    def redactions(self) -> dict[str, dict[str, Any]]:
        """The redactions the trial declares (its runtime events, context records, documents): item id -> entry.

        Every mark of a redaction is a key or value starting "redact (context_kinds.has_redaction_marks),
        so the database leaves out the rows without one: a live trial asks this on every POST.
        """
        marked = '"redact'
        events = self.events.alias(text=Cast("raw", models.TextField())).filter(text__contains=marked)
        records = self.context_records.alias(text=Cast("data", models.TextField())).filter(text__contains=marked)
        return context_kinds.redactions_in(
            [*events.values_list("raw", flat=True), *records.values_list("data", flat=True), self.documents]
        )
