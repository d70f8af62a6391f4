"""What trials belong to: datasets, tasks, configurations (agent + model + role), jobs.

A task is its dataset and its name, whatever its checksum (`Task.objects.same_as`).
"""

from __future__ import annotations

from django.db import models
from django.urls import reverse

from trials.ingest.formats import harbor_checks
from trials.ingest.formats.detect import traits_of
from trials.ingest.records import FormatTraits
from trials.models.imports import Pack
from trials.storage.fields import CharField, JSONField


class Dataset(models.Model):
    name = CharField(max_length=300)
    version = CharField(max_length=100, blank=True)
    ref = CharField(max_length=500, blank=True)
    # The reward its trials pass at, where it is not full marks (PASS_REWARD): none of the formats read states
    # one, so it is set here (the admin); its trials scored by their reward are decided again (trials/thresholds.py).
    pass_reward = models.FloatField(
        null=True,
        blank=True,
        help_text="The reward a trial of this dataset passes at; empty: 1 (full marks). A trial below it with "
        "a reward above 0 is partial, at 0 failed. Saving it decides its reward-scored trials again.",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="unique_dataset_version")]
        ordering = ["name", "version"]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name


class Configuration(models.Model):
    class Role(models.TextChoices):
        BASELINE = "baseline"
        CANDIDATE = "candidate"
        CONTROL = "control"
        NONE = "", "unassigned"

    key = CharField(max_length=300, unique=True)
    role = CharField(max_length=20, choices=Role.choices, blank=True, db_index=True)
    agent_name = CharField(max_length=200, blank=True)
    agent_version = CharField(max_length=100, blank=True)
    model_name = CharField(max_length=200, blank=True)
    profiles = JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.key} ({self.role})" if self.role else self.key


class JobQuerySet(models.QuerySet):
    # A Harbor job's result.json names every trial (0.5 MB at 5,000 trials): lists of jobs,
    # and of trials with their job, never load these (bench/README.md, "Scale").
    DOCUMENT_FIELDS = ("config", "result", "extra")

    def for_list(self):
        return self.defer(*self.DOCUMENT_FIELDS)


class Job(models.Model):
    """A run container: a Harbor job, an AgentV run, an OpenChrome envelope, a QC experiment."""

    key = CharField(max_length=300, unique=True)
    name = CharField(max_length=300)
    source_format = CharField(max_length=20)
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL)
    started_at = models.DateTimeField(null=True, blank=True)
    started_as_written = CharField(max_length=40, blank=True)  # a start with no time zone, never read as UTC
    finished_at = models.DateTimeField(null=True, blank=True)
    config = JSONField(default=dict, blank=True)
    result = JSONField(default=dict, blank=True)
    extra = JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("job-detail", args=[self.pk])

    @property
    def format_traits(self) -> FormatTraits:
        """What its format declares of its jobs (its config kept whole, its envelope's rows…)."""
        return traits_of(self.source_format)

    def check_report(self) -> dict:
        """`harbor check`'s task-quality verdicts of a Harbor job: {task: {criterion: {outcome, explanation}}}."""
        report = self.extra.get("check_report") if isinstance(self.extra, dict) else None
        return report.get("tasks") or {} if isinstance(report, dict) else {}

    @staticmethod
    def task_checks(job_id: int | None, task_name: str) -> dict:
        """One task's checks in its job's report, reading only the report (a job's extra can be large)."""
        if job_id is None:
            return {}
        tasks = Job.objects.filter(pk=job_id).values_list("extra__check_report__tasks", flat=True).first()
        return harbor_checks.checks_for_task({"tasks": tasks}, task_name) if isinstance(tasks, dict) else {}

    def kept_result_rows(self) -> list:
        """An OpenChrome envelope's results[] rows that are not trials (other axes): shown as written."""
        extra = self.extra if isinstance(self.extra, dict) else {}
        made = set(extra.get("row_trials") or [])
        rows = extra.get("results") if self.format_traits.envelope_results else None
        return [
            row
            for i, row in enumerate(rows or [])
            if i not in made and not (isinstance(row, dict) and "run_count" in row)
        ]

    def claim_eligibility(self) -> list[dict]:
        """OpenChrome's headline decision, one per result entry that makes one (seed 003); a mock envelope
        (`options.live: false`) or mock rows (`live: false`) say in words that they never make one."""
        extra: dict = self.extra if isinstance(self.extra, dict) else {}
        found, options = extra.get("results"), extra.get("options")
        entries: list = found if isinstance(found, list) else []
        claims = [
            {"suite": entry.get("suite") or "", **entry["claimEligibility"]}
            for entry in entries
            if isinstance(entry, dict) and isinstance(entry.get("claimEligibility"), dict)
        ]
        mock_rows = sum(isinstance(e, dict) and e.get("live") is False for e in entries)
        options = options if isinstance(options, dict) else {}
        if self.format_traits.envelope_results and (options.get("live") is False or mock_rows):
            what = (
                "this run is a mock (live: false)"
                if options.get("live") is False
                else f"{mock_rows} mock row(s) (live: false)"
            )
            reason = f"{what}: it checks the harness, not the libraries, so it is never headline-eligible"
            claims.append({"suite": "mock", "eligible": False, "tier": "diagnostic-only", "reasons": [reason]})
        return claims


class TaskQuerySet(models.QuerySet):
    def same_as(self, *tasks: Task) -> TaskQuerySet:
        """The rows of these tasks: a task is its dataset (name and version) and its name, whatever the
        checksum (a changed verifier is the same task, told apart by `checksumsDiffer`). Inspect names its
        samples by number, so a name alone is never a task."""
        same = models.Q(pk__in=[])
        for dataset_id, name in {task.identity for task in tasks}:
            same |= models.Q(dataset_id=dataset_id, name=name)  # (dataset_id=None: IS NULL)
        return self.filter(same)

    def paired_with(self, *tasks: Task) -> TaskQuerySet:
        """The rows that pair with these tasks: the same task (`same_as`), or the task of that name in
        another version of its dataset (issue 41: Terminal-Bench 2+ tags its versions on Harbor), never
        one of another dataset. A pair across versions is not like-for-like: `Task.version_differs` says so."""
        paired = models.Q(pk__in=[])
        for task in tasks:
            if task.dataset is None:
                paired |= models.Q(dataset=None, name=task.name)
            else:
                paired |= models.Q(dataset__name=task.dataset.name, name=task.name)
        return self.filter(paired)


class Task(models.Model):
    dataset = models.ForeignKey(Dataset, null=True, on_delete=models.PROTECT)
    name = CharField(max_length=300)
    checksum = CharField(max_length=128, blank=True)
    source = CharField(max_length=1000, blank=True)
    definition = JSONField(default=dict, blank=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "name", "checksum"], name="unique_task_checksum")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def identity(self) -> tuple[int | None, str]:
        """What makes it one task (`Task.objects.same_as`): its dataset and its name."""
        return self.dataset_id, self.name

    def pairs_with(self, other: Task | None) -> bool:
        """The same task, or the same name in another version of its dataset (`TaskQuerySet.paired_with`)."""
        if other is None or self.name != other.name:
            return False
        if self.dataset is None or other.dataset is None:
            return self.dataset_id == other.dataset_id
        return self.dataset_id == other.dataset_id or self.dataset.name == other.dataset.name

    def version_differs(self, other: Task) -> str:
        """ "" for one version; else the words a pair across versions shows (not like-for-like)."""
        if self.dataset_id == other.dataset_id or self.dataset is None or other.dataset is None:
            return ""
        versions = f"{self.dataset.version or '(no version)'} vs {other.dataset.version or '(no version)'}"
        return f"not like-for-like: {self.dataset.name} {versions}"
