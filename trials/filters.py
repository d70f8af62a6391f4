"""The trial list's filters (the page, the API and cross-trial search share them).

A text filter matches part of a name, case-insensitively ("git" finds "fix-git-hooks"),
unless some row bears exactly that name: then only that one, so the links that name a
task, job or category list exactly what they counted.
"""

import django_filters
from django import forms
from django.db.models import Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from core.ids import parse_pk
from trials import query
from trials.models import Configuration, Import, Job, Pack, PermissionDecision, Task, Trial
from trials.models.failure_classes import FailureClass, timed_out_q
from trials.models.qc import FailureCluster
from trials.models.taxonomy import FLAG_CHOICES, WITH_REWARD_FLAG
from trials.models.trial import PASSES, WITHOUT_REWARD

# Role "" (no role) is a value the empty choice ("any") cannot carry: it goes as "unassigned".
UNASSIGNED = "unassigned"
FAILURE_CLASS_CHOICES = [(c.value, c.value.replace("_", " ")) for c in FailureClass]
ROLE_CHOICES = [(value, label) for value, label in Configuration.Role.choices if value] + [(UNASSIGNED, "unassigned")]


def role_q(value: str, prefix: str = "") -> Q:
    """Trials (or rows reaching a trial through `prefix`) whose configuration has this role; "unassigned": none."""
    if value == UNASSIGNED:
        return Q(**{f"{prefix}configuration__isnull": True}) | Q(**{f"{prefix}configuration__role": ""})
    return Q(**{f"{prefix}configuration__role": value})


def name_q(field: str, value: str, exact_exists: bool) -> Q:
    """Exactly the name when a row bears it; otherwise every name holding it, case-insensitively."""
    return Q(**{field: value}) if exact_exists else Q(**{f"{field}__icontains": value})


class QueryField(forms.CharField):
    """A query of the trials query language (trials/query.py), parsed and checked when the form is cleaned:
    a bad one is the form's error (the API's 400), naming where and what was expected."""

    def clean(self, value):
        text = super().clean(value)
        if not text:
            return None
        try:
            return query.parse(text)
        except query.QueryError as error:
            raise forms.ValidationError(str(error), code="query") from None


@extend_schema_field(OpenApiTypes.STR)
class QueryFilter(django_filters.Filter):
    field_class = QueryField

    def filter(self, qs, value):
        return value.filter(qs) if value else qs


class TrialFilter(django_filters.FilterSet):
    q = QueryFilter(
        label="Query",
        widget=forms.TextInput(attrs={"placeholder": 'status = "failed" and calls.bash > 50', "size": 48}),
        help_text=(
            "and / or / not, = != > >= < <= ~ in (…); fields: status reward class cause flag model agent task job "
            "dataset steps tool_calls calls.TOOL tokens cost duration (docs/agents.md)"
        ),
    )
    job = django_filters.CharFilter(method="filter_job")
    dataset = django_filters.CharFilter(method="filter_dataset")
    configuration = django_filters.CharFilter(method="filter_configuration")
    role = django_filters.ChoiceFilter(choices=ROLE_CHOICES, method="filter_role", label="Role")
    task = django_filters.CharFilter(method="filter_task")
    # distinct=False: status is a column of the trial itself, so no row can repeat.
    status = django_filters.MultipleChoiceFilter(
        choices=Trial.Status.choices, distinct=False, widget=forms.CheckboxSelectMultiple
    )  # (boxes in a row: a multiple select took a quarter of the list's first screen)
    failure_category = django_filters.CharFilter(method="filter_failure_category")
    reward_min = django_filters.NumberFilter(field_name="reward", lookup_expr="gte", label="Reward at least")
    reward_max = django_filters.NumberFilter(field_name="reward", lookup_expr="lte", label="Reward at most")
    complete = django_filters.ChoiceFilter(
        choices=[("true", "complete"), ("false", "incomplete")], method="filter_complete", label="Evidence"
    )  # an empty first choice ("any"): a list page must not filter until asked
    source_format = django_filters.CharFilter()
    flag = django_filters.ChoiceFilter(
        choices=[
            ("any", "any safety flag"),
            *FLAG_CHOICES,
            (WITH_REWARD_FLAG, "any run that did not end normally, with a reward"),
        ],
        method="filter_flag",
        label="Safety flag",
    )
    # Set by the import page's links, and kept (hidden) when the list is filtered further.
    pack = django_filters.ModelChoiceFilter(queryset=Pack.objects.all(), method="filter_pack", widget=forms.HiddenInput)
    import_id = django_filters.UUIDFilter(method="filter_import", widget=forms.HiddenInput, label="Import")
    # Set by a comparison's figures (the trials each one counts), kept (hidden) when filtered further.
    unscored = django_filters.BooleanFilter(method="filter_unscored", widget=forms.HiddenInput)
    passes = django_filters.BooleanFilter(method="filter_passes", widget=forms.HiddenInput)
    timed_out = django_filters.BooleanFilter(method="filter_timed_out", widget=forms.HiddenInput)
    failure_class = django_filters.ChoiceFilter(
        choices=FAILURE_CLASS_CHOICES, method="filter_failure_class", widget=forms.HiddenInput
    )
    denied_side_effect = django_filters.BooleanFilter(method="filter_denied_side_effect", widget=forms.HiddenInput)
    # Set by the dashboard's failures by class: the trials the clusters page counts in each class.
    cluster_class = django_filters.ChoiceFilter(
        choices=FailureCluster.Class.choices, method="filter_cluster_class", widget=forms.HiddenInput
    )

    class Meta:
        model = Trial
        fields = ["job", "dataset", "configuration", "role", "task", "status"]

    def filter_queryset(self, queryset):
        """A query that cannot run lists nothing (the form says why), never the whole list."""
        if "q" in self.form.errors:
            return queryset.none()
        return super().filter_queryset(queryset)

    def filter_job(self, queryset, name, value):
        """A job id, or (part of) its name."""
        if (pk := parse_pk(value)) is not None:
            return queryset.filter(job_id=pk)
        return queryset.filter(name_q("job__name", value, Job.objects.filter(name=value).exists()))

    def filter_role(self, queryset, name, value):
        return queryset.filter(role_q(value))

    def filter_failure_category(self, queryset, name, value):
        exact = Trial.objects.filter(failure_category=value).exists()
        return queryset.filter(name_q("failure_category", value, exact))

    def filter_dataset(self, queryset, name, value):
        """A dataset id, or its name (optionally name@version)."""
        if (pk := parse_pk(value)) is not None:
            return queryset.filter(dataset_id=pk)
        dataset_name, _, version = value.partition("@")
        queryset = queryset.filter(dataset__name=dataset_name)
        return queryset.filter(dataset__version=version) if version else queryset

    def filter_configuration(self, queryset, name, value):
        if (pk := parse_pk(value)) is not None:
            return queryset.filter(configuration_id=pk)
        exact = Configuration.objects.filter(key=value).exists()
        return queryset.filter(name_q("configuration__key", value, exact))

    def filter_import(self, queryset, name, value):
        """The trials of the packs an import read (imported then, or already there)."""
        imp = Import.objects.filter(pk=value).first()
        return queryset.held_by(imp.pack_ids()) if imp else queryset.none()

    def filter_pack(self, queryset, name, value):
        return queryset.held_by([value.pk])

    def filter_flag(self, queryset, name, value):
        """Trials a safety signal flagged (trials.triage.signatures), whatever their reward."""
        flagged = queryset.filter(is_flagged=True)
        if value == WITH_REWARD_FLAG:  # (each such flag's name ends "-with-reward")
            return flagged.filter(safety_flags__icontains=f'-{value}"')
        return flagged if value == "any" else flagged.filter(safety_flags__icontains=f'"{value}"')

    def filter_complete(self, queryset, name, value):
        return queryset.filter(lime_evidence=True, is_complete=value == "true")  # Lime evidence checks only

    def filter_unscored(self, queryset, name, value):
        """No reward, whatever the status (a running trial aside): what a job page and a comparison count as
        unscored (trials.models.trial.WITHOUT_REWARD), never as failed."""
        return queryset.filter(WITHOUT_REWARD) if value else queryset.exclude(WITHOUT_REWARD)

    def filter_passes(self, queryset, name, value):
        """Passed, as a job page and a comparison count it (trials.models.trial.PASSES): a run that timed out or
        errored with a passing reward too."""
        return queryset.filter(PASSES) if value else queryset.exclude(PASSES)

    def filter_timed_out(self, queryset, name, value):
        """Trials whose agent timed out, as a comparison's timeout rate counts them (`how_it_ended`)."""
        return queryset.filter(timed_out_q()) if value else queryset.exclude(timed_out_q())

    def filter_failure_class(self, queryset, name, value):
        """The trial's class: a triager's override, else the rules' (trials.models.failure_classes)."""
        return queryset.with_failure_class(value)

    def filter_cluster_class(self, queryset, name, value):
        """Trials in a failure cluster of this class (a flagged pass's too, which has no failure class of its own)."""
        return queryset.filter(cluster__failure_class=value)

    def filter_denied_side_effect(self, queryset, name, value):
        """Trials with a side effect after a denied permission (comparisons.statistics.metrics.denied_side_effects)."""
        denied = PermissionDecision.objects.side_effects_after_denial().values("trial_id")
        return queryset.filter(pk__in=denied) if value else queryset.exclude(pk__in=denied)

    def filter_task(self, queryset, name, value):
        """A task's name (or part of it), or its id. (Names first: links give names, and some tasks are
        named by a number, as AgentV's test ids.)"""
        exact = Task.objects.filter(name=value).exists()
        if (pk := parse_pk(value)) is not None and not exact:
            return queryset.filter(task_id=pk)
        return queryset.filter(name_q("task__name", value, exact))
