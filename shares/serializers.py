"""The share API's shapes: a share to create, the one created, the live one a second share answers with."""

from __future__ import annotations

from rest_framework import serializers

from shares.models import Share, ShareEvent


class ComparisonSidesField(serializers.JSONField):
    """{"baseline": id, "candidate": id} (configurations; `baseline_job` / `candidate_job` for jobs),
    or a grid: {"sides": [ids], "reference": id} (`side_jobs` for jobs)."""


class ShareCreateSerializer(serializers.Serializer):
    trial = serializers.IntegerField(required=False)
    comparison = ComparisonSidesField(required=False)
    qc_item = serializers.IntegerField(required=False)
    expires_at = serializers.DateTimeField(required=False, help_text="default 7 days from now, at most 90")
    expires_in_days = serializers.IntegerField(
        required=False,
        help_text="instead of expires_at: whole days from now, 1 to 90 (the Share control offers 1, 7, 30, 90)",
    )
    if_exists = serializers.ChoiceField(
        choices=["offer", "new", "replace"],
        default="offer",
        help_text='when you already have a live link to it: "offer" answers 409 naming it (no new link), '
        '"new" makes another beside it, "replace" revokes it and makes a new one',
    )


class ShareCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.URLField(help_text="the only time the token is shown: only its hash is stored")
    expires_at = serializers.DateTimeField()


class LiveShareSerializer(serializers.Serializer):
    """A live link the caller already has (409): its address was shown once, when it was made."""

    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    views = serializers.IntegerField(source="view_count")


class AlreadySharedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    existing = LiveShareSerializer(many=True)


class ShareEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.get_username", default=None)

    class Meta:
        model = ShareEvent
        fields = ["action", "actor", "at", "changes"]


class ShareSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.get_username", default=None)
    revoked_by = serializers.CharField(source="revoked_by.get_username", default=None)
    views = serializers.IntegerField(source="view_count", help_text="times the link was opened")
    history = ShareEventSerializer(many=True, help_text="who shared it and when; who revoked it")
    comparison = serializers.JSONField(source="params")
    state = serializers.SerializerMethodField()

    class Meta:
        model = Share
        fields = [
            "id",
            "kind",
            "trial",
            "qc_item",
            "comparison",
            "created_by",
            "created_at",
            "expires_at",
            "revoked_at",
            "revoked_by",
            "state",
            "views",
            "history",
        ]

    def get_state(self, share: Share) -> str:
        return "revoked" if share.revoked_at else ("expired" if share.is_expired else "active")
