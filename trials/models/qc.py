"""QC models (issue: failure triage). Imported by trials/models/__init__.py so they belong to the trials app.

A triager turns a failed trial into a QC fact (a QCItem): a failure mode of an Agent QC
scenario, a replay fixture request, a verifier criterion, a release blocker or a waiver.
Every change goes through trials.triage.services, which also writes the AuditEntry rows.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from trials.models.taxonomy import CODE_CHOICES, Category

__all__ = [
    "AuditEntry",
    "Comment",
    "FailureCluster",
    "FailureMode",
    "QCItem",
    "QCItemCitation",
    "QCScenario",
    "QueueEntry",
    "Severity",
    "TriageAssignment",
    "TriageTag",
]


class Severity(models.TextChoices):
    P0 = "P0"
    P1 = "P1"
    P2 = "P2"
    P3 = "P3"


class QCScenario(models.Model):
    """An Agent QC scenario: imported from a Lime scenario manifest or made during triage."""

    class Status(models.TextChoices):
        OPEN = "open"
        FIXED = "fixed"
        WAIVED = "waived"

    class Source(models.TextChoices):
        MANIFEST = "manifest"
        TRIAGE = "triage"

    scenario_id = models.CharField(max_length=200, unique=True)
    title = models.CharField(max_length=500)
    risk = models.CharField(max_length=2, choices=Severity.choices, default=Severity.P1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.TRIAGE)
    executor = models.CharField(max_length=60, blank=True)
    lanes = models.JSONField(default=list, blank=True)
    goal = models.TextField(blank=True)
    verifier = models.TextField(blank=True)
    evidence_required = models.JSONField(default=list, blank=True)
    evidence_layers = models.JSONField(default=list, blank=True)
    manifest = models.ForeignKey(
        "trials.Document", null=True, blank=True, on_delete=models.SET_NULL, related_name="qc_scenarios"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["risk", "scenario_id"]

    def __str__(self) -> str:
        return self.scenario_id

    def get_absolute_url(self) -> str:
        return reverse("qc-scenario", args=[self.pk])


class FailureMode(models.Model):
    scenario = models.ForeignKey(QCScenario, on_delete=models.CASCADE, related_name="failure_modes")
    name = models.CharField(max_length=300)
    category = models.CharField(max_length=20, choices=Category.choices, blank=True)
    code = models.CharField(max_length=40, choices=CODE_CHOICES, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["scenario", "pk"]
        constraints = [models.UniqueConstraint(fields=["scenario", "name"], name="unique_failure_mode_name")]

    def __str__(self) -> str:
        return f"{self.scenario.scenario_id} / {self.name}"


class QCItemQuerySet(models.QuerySet):
    def open(self):
        return self.filter(status=QCItem.Status.OPEN)

    def active_waivers(self):
        """Waivers that still count: open and not past their expiry."""
        return self.filter(kind=QCItem.Kind.WAIVER, status=QCItem.Status.OPEN, expires_at__gt=timezone.now())

    def facts(self):
        """Everything but waivers: the things a waiver can cover."""
        return self.exclude(kind=QCItem.Kind.WAIVER)

    def about(self, trial):
        """Items filed on this trial, and those filed on a failure cluster that cite it."""
        return self.filter(models.Q(trial=trial) | models.Q(pk__in=trial.cited_qc_items.values("pk")))

    def unwaived(self):
        """Open facts that no active waiver covers (an expired waiver covers nothing)."""
        covered = QCItem.objects.active_waivers().values("waived_item")
        return self.open().facts().exclude(pk__in=covered)


class QCItem(models.Model):
    class Kind(models.TextChoices):
        FAILURE_MODE = "failure-mode", "QC scenario failure mode"
        REPLAY_FIXTURE = "replay-fixture", "Replay fixture request"
        VERIFIER_CRITERION = "verifier-criterion", "Verifier criterion"
        RELEASE_BLOCKER = "release-blocker", "Release blocker"
        WAIVER = "waiver", "Waiver"

    class Status(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"
        REVOKED = "revoked"  # a waiver withdrawn, or an item filed by mistake

    kind = models.CharField(max_length=20, choices=Kind.choices)
    trial = models.ForeignKey("trials.Trial", on_delete=models.CASCADE, related_name="qc_items")
    step_id = models.CharField(max_length=300, blank=True)  # triage.services.step_ref
    category = models.CharField(max_length=20, choices=Category.choices)
    code = models.CharField(max_length=40, choices=CODE_CHOICES, blank=True)
    severity = models.CharField(max_length=2, choices=Severity.choices, default=Severity.P2)
    # [{"kind": "step" | "tool_call" | "artifact" | "criterion" | "trial", "ref": "..."}]
    evidence_refs = models.JSONField(default=list, blank=True)
    note = models.TextField(blank=True)
    scenario = models.ForeignKey(QCScenario, null=True, blank=True, on_delete=models.SET_NULL, related_name="items")
    failure_mode = models.ForeignKey(
        FailureMode, null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )
    target_name = models.CharField(max_length=300, blank=True)  # the fixture or criterion name
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_qc_items"
    )
    # Waivers only (Agent QC: approver, reason, scope and expiry are all required).
    waived_item = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="waivers")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="approved_waivers"
    )
    reason = models.TextField(blank=True)
    scope = models.CharField(max_length=500, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="filed_qc_items"
    )
    # An item filed on a failure cluster cites every trial of it (`trial` is its representative).
    cluster = models.ForeignKey(
        "trials.FailureCluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="qc_items"
    )
    cited_trials = models.ManyToManyField(  # type: ignore[var-annotated]  # (stubs: a through model named later)
        "trials.Trial", blank=True, through="QCItemCitation", related_name="cited_qc_items"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = QCItemQuerySet.as_manager()

    class Meta:
        ordering = ["severity", "-created_at"]
        indexes = [models.Index(fields=["kind", "status", "severity"])]

    def __str__(self) -> str:
        return f"QC-{self.pk} {self.get_kind_display()} ({self.severity})"

    def get_absolute_url(self) -> str:
        return reverse("qc-item", args=[self.pk])

    @property
    def label(self) -> str:
        return f"QC-{self.pk}"

    @property
    def is_waiver(self) -> bool:
        return self.kind == self.Kind.WAIVER

    @property
    def is_expired(self) -> bool:
        return self.is_waiver and self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def waiver_state(self) -> str:
        """A waiver in words: active, expired or revoked (resolved once its item is)."""
        if self.status == self.Status.OPEN:
            return "expired" if self.is_expired else "active"
        return self.status

    @property
    def status_in_words(self) -> str:
        """What a page shows: a waiver's state (active / expired / revoked), else the effective status."""
        return self.waiver_state if self.is_waiver else self.effective_status

    @property
    def effective_status(self) -> str:
        """What the item counts as now: an open waiver past its expiry is "expired"."""
        if self.status == self.Status.OPEN and self.is_expired:
            return "expired"
        return self.status


class QCItemCitation(models.Model):
    """A trial an item filed on a failure cluster cites, with its own evidence refs."""

    item = models.ForeignKey(QCItem, on_delete=models.CASCADE, related_name="citations")
    trial = models.ForeignKey("trials.Trial", on_delete=models.CASCADE, related_name="qc_citations")
    evidence_refs = models.JSONField(default=list, blank=True)  # as QCItem.evidence_refs

    class Meta:
        ordering = ["item", "trial"]
        constraints = [models.UniqueConstraint(fields=["item", "trial"], name="unique_qc_item_citation")]

    def __str__(self) -> str:
        return f"{self.item} cites {self.trial}"


class FailureCluster(models.Model):
    """Failed or flagged trials that share a signature (trials.triage.signatures).

    Trials point here (Trial.cluster), so counting a cluster's trials is a GROUP BY on an
    indexed column, never a pass over their bodies.
    """

    class Class(models.TextChoices):
        INFRASTRUCTURE = "infrastructure"
        TASK_QUALITY = "task_quality", "Task quality"
        CAPABILITY = "capability"
        SAFETY = "safety"
        # A trial that passed (trials.models.trial.PASSES) a `…-with-reward` flag marks: no failure, yet to look at.
        FLAGGED_PASS = "flagged_pass", "Flagged pass"

    key = models.CharField(max_length=64, unique=True)  # sha256 of the signature
    signature = models.JSONField(default=dict)
    # The coarse level a person opens first (trials.models.failure_classes, or a safety signal).
    failure_class = models.CharField(max_length=20, choices=Class.choices, default=Class.CAPABILITY)
    # sha256 of the signature without its message: near-identical messages of one family merge.
    family = models.CharField(max_length=64, blank=True, db_index=True)
    # A person's hand, kept across re-clustering (trials.triage.services.merge_clusters / split_cluster).
    merged_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="merged")
    split_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="splits")
    split_on = models.JSONField(default=dict, blank=True)  # {"task": name} or {"test": name}
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"cluster {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("qc-cluster", args=[self.pk])

    @property
    def label(self) -> str:
        return f"C-{self.pk}"


class TriageAssignment(models.Model):
    """Who triages a failed trial (one assignee per trial)."""

    trial = models.OneToOneField("trials.Trial", on_delete=models.CASCADE, related_name="triage_assignment")
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="triage_assignments")
    assigned_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    assigned_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.trial} -> {self.assignee}"


class QueueEntry(models.Model):
    """A trial a person put in the triage queue (from a trials list filter): queued once, whatever its flags."""

    trial = models.OneToOneField("trials.Trial", on_delete=models.CASCADE, related_name="queue_entry")
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    added_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.trial} queued"


class TriageTag(models.Model):
    """A word a triager puts on a trial from the queue, to filter on."""

    trial = models.ForeignKey("trials.Trial", on_delete=models.CASCADE, related_name="triage_tags")
    name = models.CharField(max_length=60, db_index=True)
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["trial", "name"], name="unique_triage_tag")]

    def __str__(self) -> str:
        return self.name


class Comment(models.Model):
    """A reviewer's note on a trial, a step of it, or a QC item."""

    trial = models.ForeignKey("trials.Trial", on_delete=models.CASCADE, related_name="qc_comments")
    step_id = models.CharField(max_length=300, blank=True)  # triage.services.step_ref
    item = models.ForeignKey(QCItem, null=True, blank=True, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"comment by {self.author} on {self.trial}"


class AuditEntry(models.Model):
    """Who did what, when: one row per triage action, with {field: [old, new]}."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(default=timezone.now)
    action = models.CharField(max_length=60)
    item = models.ForeignKey(QCItem, null=True, blank=True, on_delete=models.CASCADE, related_name="history")
    trial = models.ForeignKey("trials.Trial", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    scenario = models.ForeignKey(QCScenario, null=True, blank=True, on_delete=models.CASCADE, related_name="history")
    changes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action}"
