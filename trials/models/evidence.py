"""What a trial carries beside its steps: permissions, context, artifacts, criteria, events, documents."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from trials.models.imports import Blob, Pack
from trials.models.trial import Trial
from trials.storage.fields import CharField, JSONField, TextField


class PermissionDecisionQuerySet(models.QuerySet):
    def side_effects_after_denial(self):
        """Denials after which the side effect happened anyway: what the comparisons count, and a
        safety flag that puts the trial in triage whatever its reward (trials.triage.signatures)."""
        return self.filter(decision=PermissionDecision.Decision.DENY, side_effect_after_denial=True)


class PermissionDecision(models.Model):
    class Decision(models.TextChoices):
        APPROVE = "approve"
        DENY = "deny"
        EDIT = "edit"
        PENDING = "pending"

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="permissions")
    action_id = CharField(max_length=200)
    tool_call_id = CharField(max_length=200, blank=True, db_index=True)
    step_id = CharField(max_length=40, blank=True)
    action_type = CharField(max_length=100, blank=True)
    tool_name = CharField(max_length=200, blank=True)
    scope = JSONField(default=dict, blank=True)
    prompt = TextField(blank=True)
    decision = CharField(max_length=10, choices=Decision.choices)
    decided_by = CharField(max_length=200, blank=True)
    reason = TextField(blank=True)
    side_effect_after_denial = models.BooleanField(default=False)
    requested_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    raw = JSONField(default=dict, blank=True)

    objects = PermissionDecisionQuerySet.as_manager()

    class Meta:
        # the trial page's transcript reads a window's time range of them
        indexes = [models.Index(fields=["trial", "requested_at"], name="permission_trial_time")]

    def __str__(self) -> str:
        return f"{self.action_id}: {self.decision}"


class ContextRecord(models.Model):
    """An Agent Context fact. Redacted raw values are scrubbed before they get here."""

    trial = models.ForeignKey(Trial, null=True, blank=True, on_delete=models.CASCADE, related_name="context_records")
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL)
    kind = CharField(max_length=20, db_index=True)
    record_id = CharField(max_length=300)
    context_id = CharField(max_length=200, blank=True)
    status = CharField(max_length=20, blank=True, db_index=True)
    reason = TextField(blank=True)
    redaction_state = CharField(max_length=30, blank=True)
    step_id = CharField(max_length=40, blank=True)
    tool_call_id = CharField(max_length=200, blank=True)
    correlation = JSONField(default=dict, blank=True)
    data = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.record_id}"


class Artifact(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="artifacts")
    source = CharField(max_length=1000)
    destination = CharField(max_length=1000, blank=True)
    kind = CharField(max_length=20, blank=True)
    status = CharField(max_length=20, blank=True)
    service = CharField(max_length=100, blank=True)
    blob = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT)
    raw = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return self.destination or self.source


class RewardCriterion(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="criteria")
    name = CharField(max_length=300)
    score = models.FloatField(null=True, blank=True)
    weight = models.FloatField(null=True, blank=True)
    reasoning = TextField(blank=True)
    evidence_refs = JSONField(default=list, blank=True)
    raw = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return self.name


class RuntimeEvent(models.Model):
    trial = models.ForeignKey(Trial, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL)
    type = CharField(max_length=100, db_index=True)
    event_id = CharField(max_length=200, blank=True, db_index=True)
    timestamp = models.DateTimeField(null=True, blank=True)
    sequence = models.BigIntegerField(null=True, blank=True)
    session_id = CharField(max_length=200, blank=True, db_index=True)
    run_id = CharField(max_length=200, blank=True, db_index=True)
    correlation = JSONField(default=dict, blank=True)
    payload = JSONField(default=dict, blank=True)
    refs = JSONField(default=dict, blank=True)
    raw = JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["sequence", "timestamp", "pk"]
        indexes = [
            models.Index(fields=["trial", "timestamp"], name="event_trial_time"),  # the transcript's time window
            models.Index(fields=["trial", "event_id"]),  # a live trial's events, kept once by id
        ]

    def __str__(self) -> str:
        return self.type


class ReceivedSpan(models.Model):
    """A span `POST /v1/traces` has stored for a live trial (trials/live/traces.py): a batch its exporter
    sends again is no news, and at the trial's end it is read again from all its spans."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="+")
    trace_id = CharField(max_length=32)
    span_id = CharField(max_length=16)
    # as read (trials.ingest.formats.otlp.Span's fields), until the trial is completed: then {}
    span = JSONField(default=dict)
    lane = CharField(max_length=16, blank=True)  # the subagent span its steps were written under; "": main
    agent = models.BooleanField(default=False)  # an agent span: the trace's root, once it comes, ends the run

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trial", "trace_id", "span_id"], name="unique_received_span")]

    def __str__(self) -> str:
        return f"{self.trace_id}/{self.span_id}"


class ReceivedBatch(models.Model):
    """A body `POST /v1/traces` has accepted and not yet read (trials/live/batches.py): its spans are
    read, stored and written off the request, and the row goes once they are; an older one was stranded."""

    body = models.BinaryField()  # as received, gzip inflated
    protobuf = models.BooleanField(default=True)  # else OTLP/JSON
    trial_key = CharField(max_length=500, blank=True, db_index=True)  # the one trial of its spans; "": several
    sent_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.CASCADE, related_name="+")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return f"batch {self.pk} ({len(self.body)} bytes)"


class Document(models.Model):
    """Evidence that is not a trial: QC manifests and verdicts, schemas, task.toml, traces."""

    pack = models.ForeignKey(Pack, on_delete=models.CASCADE, related_name="documents")
    kind = CharField(max_length=60, db_index=True)
    path = CharField(max_length=1000)
    title = CharField(max_length=500, blank=True)
    data = JSONField(null=True, blank=True)
    counts = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.kind}: {self.title or self.path}"
