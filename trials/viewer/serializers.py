"""The trials API's shapes: datasets, tasks, configurations, jobs, trials."""

from django.urls import reverse
from rest_framework import serializers

from trials.ingest import completeness
from trials.models import Configuration, Dataset, Job, Task, Trial
from trials.reading.text import scrub_json


class DatasetSerializer(serializers.ModelSerializer):
    class Meta:
        model = Dataset
        fields = ["id", "name", "version", "ref", "pass_reward"]  # (pass_reward: null passes at 1, full marks)


class ConfigurationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Configuration
        fields = ["id", "key", "role", "agent_name", "agent_version", "model_name", "profiles"]


class TaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = ["id", "name", "checksum", "source"]


class JobSerializer(serializers.ModelSerializer):
    class Meta:
        model = Job
        fields = ["id", "key", "name", "source_format", "started_at", "started_as_written", "finished_at"]


class TrialListSerializer(serializers.ModelSerializer):
    dataset = DatasetSerializer(allow_null=True)
    configuration = ConfigurationSerializer(allow_null=True)
    task = TaskSerializer(allow_null=True)
    job = JobSerializer(allow_null=True)

    def to_representation(self, instance: Trial) -> dict:
        # Anything shaped like a secret (an exception's message, a provenance value...) is masked,
        # as on the pages.
        return scrub_json(super().to_representation(instance))

    class Meta:
        model = Trial
        fields = [
            "id",
            "name",
            "source_format",
            "source",
            "job",
            "dataset",
            "task",
            "configuration",
            "attempt",
            "status",
            "reward",
            "rewards",
            "failure_category",
            "exception_type",
            "duration_sec",
            "input_tokens",
            "cached_tokens",
            "output_tokens",
            "cost_usd",
            "step_count",
            "tool_call_count",
            "is_complete",
            "missing",
            "started_at",
            "finished_at",
        ]


class TrialDetailSerializer(TrialListSerializer):
    completeness = serializers.SerializerMethodField()
    trajectories = serializers.SerializerMethodField()
    stalled = serializers.BooleanField(source="is_stalled", read_only=True, help_text="running, and silent too long")

    class Meta(TrialListSerializer.Meta):
        fields = TrialListSerializer.Meta.fields + [
            "exception_message",
            "exception_traceback",
            "phases",
            "benchmark",
            "runtime_correlation",
            "refs",
            "provenance",
            "problems",
            "completeness",
            "trajectories",
            "live_seen_at",
            "stalled",
            "failure_class",
            "failure_class_why",
            "failure_class_override",
            "cluster",  # its failure cluster (/api/qc/clusters/<id>/), null when it did not fail
            "is_flagged",
            "safety_flags",
        ]

    def get_completeness(self, obj: Trial) -> dict:
        return completeness.evaluate(obj.benchmark, obj.runtime_correlation, obj.refs)

    def get_trajectories(self, obj: Trial) -> list[dict]:
        return [
            {
                "id": t.pk,
                "path": t.path,
                "role": t.role,
                "schema_version": t.schema_version,
                "step_count": t.step_count,
                "derived": t.derived,  # made from the trial's runtime events, not written by the agent
                "valid": t.is_valid,
                "problems": t.problems,
                "url": f"{reverse('api-trial-trajectory', args=[obj.pk])}?trajectory={t.pk}",  # the ATIF file
            }
            for t in obj.trajectories.all()
        ]
