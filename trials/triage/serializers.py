"""Read serializers for QC items, scenarios and waivers (writes go through FeedbackForm)."""

from __future__ import annotations

from rest_framework import serializers

from trials.models.qc import AuditEntry, FailureMode, QCItem, QCScenario
from trials.triage.evidence_links import citation_links, evidence_links
from trials.triage.forms import FEEDBACK_FIELDS
from trials.triage.queries import queue_reasons


# Choice fields are rendered as plain strings: the shared Severity / Status choice sets
# would otherwise collide as OpenAPI enum names (drf_spectacular.W001).
def _text():
    return serializers.CharField(read_only=True)


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.get_username", default=None, allow_null=True)

    class Meta:
        model = AuditEntry
        fields = ["at", "actor", "action", "changes"]


class QCItemSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="label")
    pk = serializers.IntegerField()
    trial = serializers.IntegerField(source="trial_id")
    trial_name = serializers.CharField(source="trial.name")
    scenario = serializers.CharField(source="scenario.scenario_id", default=None, allow_null=True)
    failure_mode = serializers.CharField(source="failure_mode.name", default=None, allow_null=True)
    assignee = serializers.CharField(source="assignee.get_username", default=None, allow_null=True)
    approver = serializers.CharField(source="approver.get_username", default=None, allow_null=True)
    created_by = serializers.CharField(source="created_by.get_username", default=None, allow_null=True)
    waived_item = serializers.CharField(source="waived_item.label", default=None, allow_null=True)
    effective_status = serializers.CharField()
    kind = _text()
    category = _text()
    code = _text()
    severity = _text()
    status = _text()
    url = serializers.CharField(source="get_absolute_url")

    class Meta:
        model = QCItem
        fields = [
            "id",
            "pk",
            "kind",
            "trial",
            "trial_name",
            "step_id",
            "category",
            "code",
            "severity",
            "evidence_refs",
            "note",
            "scenario",
            "failure_mode",
            "target_name",
            "status",
            "effective_status",
            "assignee",
            "waived_item",
            "approver",
            "reason",
            "scope",
            "expires_at",
            "created_by",
            "created_at",
            "updated_at",
            "url",
        ]


class BlockerSerializer(QCItemSerializer):
    waived_by = serializers.SerializerMethodField(help_text="the active waivers of this blocker (QC-n labels)")

    class Meta(QCItemSerializer.Meta):
        fields = [*QCItemSerializer.Meta.fields, "waived_by"]

    def get_waived_by(self, obj: QCItem) -> list[str]:
        # (a list the prefetch of queries.blockers sets, to_attr="waived_by": no field of the model)
        return [waiver.label for waiver in obj.waived_by]  # type: ignore[attr-defined]


class QCItemDetailSerializer(QCItemSerializer):
    history = AuditEntrySerializer(many=True)
    waivers = serializers.SerializerMethodField()
    evidence = serializers.SerializerMethodField(help_text="the item's evidence refs, each with its link (or null)")
    citations = serializers.SerializerMethodField(
        help_text="an item filed on a cluster: each trial it cites, its link and its evidence refs with their links"
    )

    class Meta(QCItemSerializer.Meta):
        fields = [*QCItemSerializer.Meta.fields, "waivers", "history", "evidence", "citations"]

    def get_waivers(self, obj: QCItem) -> list[str]:
        return [w.label for w in obj.waivers.all()]

    def get_evidence(self, obj: QCItem) -> list[dict]:
        return evidence_links(obj.trial, obj.evidence_refs, obj.step_id)["refs"]  # type: ignore[return-value]

    def get_citations(self, obj: QCItem) -> list[dict]:
        return [
            {"trial": c["trial"].pk, "trial_name": c["trial"].name, "url": c["url"], "evidence": c["refs"]}  # type: ignore[attr-defined]
            for c in citation_links(list(obj.citations.select_related("trial").order_by("trial_id")))
        ]


class FailureModeSerializer(serializers.ModelSerializer):
    trials = serializers.SerializerMethodField()
    category = _text()
    code = _text()

    class Meta:
        model = FailureMode
        fields = ["name", "category", "code", "trials"]

    def get_trials(self, obj: FailureMode) -> list[int]:
        return sorted({item.trial_id for item in obj.items.all()})


class QCScenarioSerializer(serializers.ModelSerializer):
    p0_open = serializers.IntegerField(read_only=True, default=0)
    p1_open = serializers.IntegerField(read_only=True, default=0)
    trials_hit = serializers.IntegerField(read_only=True, default=0)
    risk = _text()
    status = _text()
    source = _text()

    class Meta:
        model = QCScenario
        fields = [
            "id",
            "scenario_id",
            "title",
            "risk",
            "status",
            "source",
            "executor",
            "p0_open",
            "p1_open",
            "trials_hit",
        ]


class QCScenarioDetailSerializer(QCScenarioSerializer):
    failure_modes = FailureModeSerializer(many=True)
    items = QCItemSerializer(many=True)

    class Meta(QCScenarioSerializer.Meta):
        fields = [
            *QCScenarioSerializer.Meta.fields,
            "lanes",
            "goal",
            "verifier",
            "evidence_required",
            "evidence_layers",
            "failure_modes",
            "items",
        ]


class FeedbackRequestSerializer(serializers.ModelSerializer):
    """The body of POST /api/trials/<id>/feedback/, for the schema: the feedback form checks it
    (trials.triage.forms.FeedbackForm), with the same fields."""

    evidence_refs = serializers.ListField(
        child=serializers.CharField(), required=False, help_text='"kind:ref" strings, or {"kind", "ref"} objects'
    )
    step_id = serializers.CharField(required=False, help_text="a step of the trial: step_id, or step_id@file")
    failure_mode = serializers.IntegerField(required=False, allow_null=True)
    scenario = serializers.IntegerField(required=False, allow_null=True)
    new_failure_mode = serializers.CharField(required=False, max_length=300)
    new_scenario_id = serializers.CharField(required=False, max_length=200)
    new_scenario_title = serializers.CharField(required=False, max_length=500)
    create_anyway = serializers.BooleanField(required=False)
    waived_item = serializers.CharField(required=False, allow_null=True, help_text="a QC item's id or label")
    approver = serializers.CharField(required=False, allow_null=True, help_text="a user name in the approver group")
    expires_at = serializers.DateTimeField(required=False, help_text="required for a waiver")

    class Meta:
        model = QCItem
        fields = FEEDBACK_FIELDS
        extra_kwargs = {"severity": {"required": True}}  # (the form has no default for it)


class ClusterSignatureSerializer(serializers.Serializer):
    # (the JSON key is "class", a Python keyword: the field is renamed in to_representation)
    failure_class = serializers.CharField(
        source="class",
        default="",  # (a cluster signed before classes, until `manage.py sign_failures` signs it again)
        help_text="infrastructure, task_quality, capability or safety: the level opened first",
    )
    category = serializers.CharField()
    code = serializers.CharField()
    exceptionType = serializers.CharField()
    message = serializers.CharField(help_text="the error text, numbers, paths, ids, hex and timestamps as placeholders")
    tool = serializers.CharField(help_text="the first tool that failed")
    flags = serializers.ListField(child=serializers.CharField(), help_text="safety signals")
    split = serializers.DictField(
        child=serializers.CharField(), required=False, help_text="a cluster split by hand: its task or failing test"
    )
    ended = serializers.CharField(required=False, help_text="no error text: how it ended, in the source's own term")
    test = serializers.CharField(
        required=False, help_text="no error text, or timed out: the first failing test where the tests ran"
    )
    tests = serializers.CharField(required=False, help_text='"passed": the tests ran and none failed')
    lastTool = serializers.CharField(required=False, help_text="nor tests: the last tool the agent called")
    task = serializers.CharField(required=False, help_text="no error text, how it ended, tests nor tool: the task")
    benchmark = serializers.CharField(required=False, help_text="no error text: the dataset of its trials")


class ClusterSerializer(serializers.Serializer):
    """A failure cluster (trials.triage.clusters.ClusterRow): counts follow the query's filters."""

    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # (a field, as Serializer.label is not)
    failure_class = serializers.CharField(source="class", help_text="the level a person opens first")
    signature = ClusterSignatureSerializer()
    description = serializers.CharField(help_text="the signature in words")
    count = serializers.IntegerField()
    trials = serializers.ListField(child=serializers.IntegerField(), help_text="trial ids (the first 1000)")
    by_configuration = serializers.DictField(child=serializers.IntegerField())
    by_job = serializers.DictField(child=serializers.IntegerField())
    first_seen = serializers.DateTimeField(allow_null=True)
    last_seen = serializers.DateTimeField(allow_null=True)
    new_in_candidate = serializers.BooleanField(help_text="candidate trials hit it, no baseline trial did")

    def to_representation(self, instance):
        return super().to_representation(instance.as_json())


class QueueRowSerializer(serializers.Serializer):
    """A trial in the triage queue."""

    trial = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    status = _text()
    reward = serializers.FloatField(allow_null=True)
    reasons = serializers.SerializerMethodField()
    flags = serializers.ListField(child=serializers.CharField(), source="safety_flags")
    cluster = serializers.IntegerField(source="cluster_id", allow_null=True)
    category = serializers.CharField(source="failure_category")
    task = serializers.CharField(source="task.name", default=None, allow_null=True)
    job = serializers.CharField(source="job.name", default=None, allow_null=True)
    configuration = serializers.CharField(source="configuration.key", default=None, allow_null=True)
    assignee = serializers.SerializerMethodField()

    def get_reasons(self, trial) -> list[str]:
        return queue_reasons(trial)

    def get_assignee(self, trial) -> str | None:
        assignment = getattr(trial, "triage_assignment", None)
        return assignment.assignee.get_username() if assignment else None
