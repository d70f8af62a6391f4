"""Share links: a trial, a comparison (a pair or a grid) or a QC item opened without an account.

Only a hash of the token is stored and looked up, so a token never sits in the database
and an unknown one costs the same indexed lookup as a known one.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models
from django.utils import timezone


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ShareQuerySet(models.QuerySet):
    def visible_to(self, user: User | AnonymousUser) -> ShareQuerySet:
        """An administrator lists every share; anyone else their own."""
        return self if user.is_superuser else self.filter(created_by=user)

    def with_view_counts(self) -> ShareQuerySet:
        return self.annotate(view_count=models.Count("views"))


class Share(models.Model):
    class Kind(models.TextChoices):
        TRIAL = "trial"
        COMPARISON = "comparison"  # a baseline and a candidate
        GRID = "grid"  # sides against a reference
        QC_ITEM = "qc_item"

    kind = models.CharField(max_length=12, choices=Kind.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    trial = models.ForeignKey("trials.Trial", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    qc_item = models.ForeignKey("trials.QCItem", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # A comparison's or a grid's sides as the API took them: {"baseline", "candidate"} or {"sides", "reference"}.
    params = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = ShareQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"share {self.pk} of a {self.kind}"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()


class ShareView(models.Model):
    """One opening of a share: when, and a keyed hash of the visitor's address (never the address)."""

    share = models.ForeignKey(Share, on_delete=models.CASCADE, related_name="views")
    at = models.DateTimeField(default=timezone.now)
    address_hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"view of share {self.share_id} at {self.at:%Y-%m-%d %H:%M}"


class ShareEvent(models.Model):
    """The audit history: who shared what and when, who revoked it."""

    class Action(models.TextChoices):
        CREATED = "created"
        REVOKED = "revoked"

    share = models.ForeignKey(Share, on_delete=models.CASCADE, related_name="history")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(default=timezone.now)
    action = models.CharField(max_length=10, choices=Action.choices)
    changes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"share {self.share_id} {self.action} by {self.actor}"
