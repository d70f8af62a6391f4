"""The imports API's shapes: an import and its progress, and what a POST sends."""

from rest_framework import serializers

from trials.models import Import


class ImportSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    rejected_count = serializers.IntegerField(read_only=True, help_text="packs or trials rejected so far")
    nothing_new = serializers.BooleanField(read_only=True, help_text="done, and every pack was already imported")
    has_trials = serializers.BooleanField(read_only=True, help_text="a pack brought, found or joined a trial")
    worker_gone = serializers.BooleanField(read_only=True, help_text="running, but no worker is working on it")

    class Meta:
        model = Import
        fields = [
            "id",
            "url",
            "origin",
            "source_name",
            "status",
            "progress",
            "progress_done",
            "progress_total",
            "rejected_count",
            "nothing_new",
            "has_trials",
            "worker_gone",
            "outcomes",
            "problems",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_url(self, obj: Import) -> str:
        return f"/api/imports/{obj.pk}/"

    def get_progress(self, obj: Import) -> float:
        if obj.status == Import.Status.DONE:
            return 1.0
        return round(obj.progress_done / obj.progress_total, 4) if obj.progress_total else 0.0


class ImportCreateSerializer(serializers.Serializer):
    file = serializers.FileField()
    path = serializers.CharField(
        required=False, max_length=500, help_text="the file's path relative to the folder it is from"
    )
