"""The saved comparisons' API shape (comparisons.pair.saved.side_summary, documented for the schema)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from comparisons.models import SavedComparison
from comparisons.pair import saved


class SavedSideSerializer(serializers.Serializer):
    kind = serializers.CharField(allow_null=True, help_text="configuration or job; null when the side is gone")
    id = serializers.IntegerField(allow_null=True)
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label (DRF pops it)


class SavedComparisonSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    eventId = serializers.CharField()
    savedBy = serializers.CharField(allow_null=True, help_text="username of who saved it")
    savedAt = serializers.DateTimeField()
    decision = serializers.CharField(help_text="promote, hold or revert, when saved")
    baseline = SavedSideSerializer()
    candidate = SavedSideSerializer()
    pageUrl = serializers.CharField()
    nowUrl = serializers.CharField(allow_null=True, help_text="the comparison page as it stands now")
    downloadUrl = serializers.CharField()
    apiUrl = serializers.CharField()

    def to_representation(self, instance: SavedComparison) -> dict[str, Any]:
        return super().to_representation(saved.side_summary(instance))


class SavedComparisonDetailSerializer(SavedComparisonSerializer):
    saved = serializers.DictField(help_text="the event's comparison figures, as saved")
    now = serializers.DictField(help_text="the comparison's figures as it stands now")
    changes = serializers.ListField(
        child=serializers.DictField(), help_text="{figure, label, saved, now} for each figure that differs"
    )
