"""Triage forms. The feedback form is used by the page and by the API alike, so both give
the same field errors; a bound form re-renders with everything the user typed."""

from __future__ import annotations

import re

from django import forms
from django.utils import timezone

from core import roles
from trials.models import Trial, taxonomy
from trials.models.failure_classes import FailureClass
from trials.models.qc import FailureMode, QCItem, QCScenario, Severity
from trials.triage import prefill

# Django's DateTimeField also parses ISO 8601 (what the API sends and datetime-local posts).
DATETIME_WIDGET = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
SCENARIO_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{1,199}$")


class UserChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj) -> str:
        return obj.get_username()


class FailureModeChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: FailureMode) -> str:
        extra = f" [{obj.code}]" if obj.code else ""
        return f"{obj.scenario.scenario_id} / {obj.name}{extra}"


class WaivableItemChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: QCItem) -> str:
        return f"{obj.label} {obj.get_kind_display()} {obj.severity} {obj.code or obj.category}"


# Every field of a feedback, in the order the page asks them: the form's, and the API's body
# (serializers.FeedbackRequestSerializer, the same body for the schema).
FEEDBACK_FIELDS = [
    "kind",
    "category",
    "code",
    "severity",
    "step_id",
    "evidence_refs",
    "note",
    "failure_mode",
    "scenario",
    "new_failure_mode",
    "new_scenario_id",
    "new_scenario_title",
    "create_anyway",
    "target_name",
    "waived_item",
    "approver",
    "reason",
    "scope",
    "expires_at",
]


class FeedbackForm(forms.ModelForm):
    """File one QC item on a trial (optionally on one of its steps)."""

    evidence_refs = forms.MultipleChoiceField(
        label="Evidence refs",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Steps, tool calls, artifacts and reward criteria of this trial that show the failure.",
    )
    step_id = forms.ChoiceField(label="Step", required=False)
    code = forms.ChoiceField(label="Finer code", required=False, choices=[("", "—"), *taxonomy.CODE_CHOICES])
    # Failure-mode target: pick an existing mode, or name a new one (on a scenario, or a new scenario).
    failure_mode = FailureModeChoiceField(
        label="Existing failure mode", required=False, queryset=FailureMode.objects.select_related("scenario")
    )
    scenario = forms.ModelChoiceField(label="Scenario", required=False, queryset=QCScenario.objects.all())
    new_failure_mode = forms.CharField(label="New failure mode", required=False, max_length=300)
    new_scenario_id = forms.CharField(
        label="New scenario id", required=False, max_length=200, help_text="lower-case, e.g. tool-result-recovery"
    )
    new_scenario_title = forms.CharField(label="New scenario title", required=False, max_length=500)
    create_anyway = forms.BooleanField(label="Create a new failure mode even though similar ones exist", required=False)
    # Waiver target and approver.
    waived_item = WaivableItemChoiceField(label="Waives", required=False, queryset=QCItem.objects.none())
    approver = UserChoiceField(
        label="Approver",
        required=False,
        queryset=roles.users_with_right(roles.WAIVE),
        error_messages={"invalid_choice": "The approver must be in the approver group."},
    )
    expires_at = forms.DateTimeField(
        label="Expires at",
        required=False,
        widget=DATETIME_WIDGET,
        help_text="Required for a waiver; a waiver never outlives its expiry.",
    )

    class Meta:
        model = QCItem
        fields = FEEDBACK_FIELDS
        widgets = {
            "kind": forms.RadioSelect,
            "note": forms.Textarea(attrs={"rows": 4}),
            "reason": forms.Textarea(attrs={"rows": 3}),
        }
        labels = {"target_name": "Fixture or criterion name", "severity": "Severity"}

    def __init__(self, *args, trial: Trial, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.trial = trial
        self.user = user
        self.similar: list[FailureMode] = []
        # (the stubs type form.fields' values as Field: these are ChoiceFields, waived_item a ModelChoiceField)
        self.fields["step_id"].choices = [("", "—"), *prefill.step_choices(trial)]  # type: ignore[attr-defined]
        self.fields["evidence_refs"].choices = prefill.evidence_choices(trial)  # type: ignore[attr-defined]
        self.fields["waived_item"].queryset = trial.qc_items.open().facts()  # type: ignore[attr-defined]
        self.fields["kind"].choices = QCItem.Kind.choices  # type: ignore[attr-defined]  # no blank radio
        self.fields["category"].choices = [("", "—"), *taxonomy.Category.choices]  # type: ignore[attr-defined]
        mark_required(self, REQUIRED_FOR_KINDS)

    def clean_evidence_refs(self) -> list[str]:
        # Choices already limit values to this trial's refs; keep the order of the page.
        return list(dict.fromkeys(self.cleaned_data.get("evidence_refs") or []))

    def clean(self):
        data = super().clean() or self.cleaned_data
        kind = data.get("kind")
        code = data.get("code") or ""
        if code and not data.get("category"):
            data["category"] = taxonomy.CODE_CATEGORY[code]
            self.errors.pop("category", None)
        if not kind:
            return data
        if kind != QCItem.Kind.WAIVER and not data.get("evidence_refs"):
            self.add_error("evidence_refs", "Pick at least one piece of evidence from this trial.")
        if not roles.has_right(self.user, roles.FILE_QC):
            self.add_error(None, "Your role may not file QC items.")
        if kind == QCItem.Kind.FAILURE_MODE:
            self._clean_failure_mode(data)
        elif kind in (QCItem.Kind.REPLAY_FIXTURE, QCItem.Kind.VERIFIER_CRITERION):
            if not (data.get("target_name") or "").strip():
                what = "replay fixture" if kind == QCItem.Kind.REPLAY_FIXTURE else "verifier criterion"
                self.add_error("target_name", f"Name the {what} to add.")
        elif kind == QCItem.Kind.WAIVER:
            self._clean_waiver(data)
        return data

    def _clean_failure_mode(self, data) -> None:
        if data.get("failure_mode"):
            return
        name = (data.get("new_failure_mode") or "").strip()
        if not name:
            self.add_error("failure_mode", "Pick an existing failure mode, or name a new one below.")
            return
        scenario = data.get("scenario")
        new_id = (data.get("new_scenario_id") or "").strip()
        if scenario is None:
            if not new_id:
                self.add_error("scenario", "Pick the scenario this failure mode belongs to, or give a new scenario id.")
                return
            if not SCENARIO_ID.match(new_id):
                self.add_error("new_scenario_id", "Use lower-case letters, digits, dots, dashes or underscores.")
                return
            existing = QCScenario.objects.filter(scenario_id=new_id).first()
            if existing is not None:
                self.add_error("new_scenario_id", f"Scenario {new_id} already exists: pick it in the list above.")
                return
        else:
            same = scenario.failure_modes.filter(name__iexact=name).first()
            if same is not None:
                data["failure_mode"] = same  # the same mode on the same scenario: add to it
                return
        similar = list(prefill.similar_failure_modes(name, data.get("code") or ""))
        if similar and not data.get("create_anyway"):
            self.similar = similar
            names = "; ".join(f"{m.scenario.scenario_id} / {m.name}" for m in similar[:5])
            self.add_error(
                "new_failure_mode",
                f"Similar failure modes already exist ({names}). Pick one as the existing failure mode, "
                "or tick “create anyway”.",
            )

    def _clean_waiver(self, data) -> None:
        if not roles.has_right(self.user, roles.WAIVE):
            self.add_error("kind", "Only an approver can grant a waiver.")
        if data.get("waived_item") is None:
            if not self.fields["waived_item"].queryset.exists():  # type: ignore[attr-defined]  # (a ModelChoiceField)
                self.add_error("waived_item", "This trial has no open QC item to waive: file the blocker first.")
            else:
                self.add_error("waived_item", "Pick the QC item this waiver covers.")
        approver = data.get("approver")
        if approver is None:
            if "approver" not in self.errors:
                self.add_error("approver", "A waiver needs an approver.")
        elif not roles.has_right(approver, roles.WAIVE):
            self.add_error("approver", "The approver must be in the approver group.")
        for field, message in (("reason", "A waiver needs a reason."), ("scope", "A waiver needs a scope.")):
            if not (data.get(field) or "").strip():
                self.add_error(field, message)
        expires = data.get("expires_at")
        if expires is None:
            if "expires_at" not in self.errors:
                self.add_error("expires_at", "A waiver needs an expiry date: a waiver without expiry is invalid.")
        elif expires <= timezone.now():
            self.add_error("expires_at", "The expiry must be in the future.")


class ClusterFeedbackForm(FeedbackForm):
    """One QC item for a whole failure cluster: the form of its representative trial, no waiver
    (a waiver covers one item), and no evidence ref required (the item cites every trial)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        kinds = [choice for choice in QCItem.Kind.choices if choice[0] != QCItem.Kind.WAIVER]
        self.fields["kind"].choices = kinds  # type: ignore[attr-defined]  # a ChoiceField

    def clean(self):
        data = super().clean() or self.cleaned_data
        self.errors.pop("evidence_refs", None)
        return data


class ItemEditForm(forms.ModelForm):
    """Status, severity, assignee and note; waivers also reason, scope and expiry (approvers)."""

    assignee = UserChoiceField(required=False, queryset=roles.users_with_right(roles.FILE_QC))
    expires_at = forms.DateTimeField(
        required=False,
        widget=DATETIME_WIDGET,
    )

    class Meta:
        model = QCItem
        fields = ["status", "severity", "assignee", "note", "reason", "scope", "expires_at"]
        widgets = {"note": forms.Textarea(attrs={"rows": 3}), "reason": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        if not self.instance.is_waiver:
            for name in ("reason", "scope", "expires_at"):
                del self.fields[name]
        mark_required(self, {}, always=("status", "severity", "reason", "scope", "expires_at"))

    def clean(self):
        data = super().clean() or self.cleaned_data
        if self.instance.is_waiver:
            if not roles.has_right(self.user, roles.WAIVE):
                raise forms.ValidationError("Only an approver can change a waiver.")
            for field in ("reason", "scope", "expires_at"):
                if not data.get(field) and field not in self.errors:
                    self.add_error(field, "A waiver keeps its reason, scope and expiry.")
            expires = data.get("expires_at")
            if (
                expires
                and "expires_at" in self.changed_data
                and expires <= timezone.now()
                and data.get("status") == QCItem.Status.OPEN
            ):
                self.add_error("expires_at", "The expiry must be in the future.")
        return data


class WaiveForm(forms.Form):
    """A waiver granted from the page of the item it waives (a release blocker): the rest comes from the item.

    Checked as the feedback form checks a waiver (`waiver_feedback`), so both give the same errors.
    """

    expires_at = forms.DateTimeField(
        label="Expires at", widget=DATETIME_WIDGET, help_text="A waiver never outlives its expiry."
    )
    scope = forms.CharField(label="Scope", max_length=QCItem._meta.get_field("scope").max_length)
    reason = forms.CharField(label="Reason", widget=forms.Textarea(attrs={"rows": 3}))

    def waiver_feedback(self, item: QCItem, user) -> FeedbackForm:
        """The feedback form of the waiver, bound to what this one holds and what the item says."""
        data = {
            "kind": QCItem.Kind.WAIVER,
            "category": item.category,
            "code": item.code,
            "severity": item.severity,
            "waived_item": item.pk,
            "approver": user.pk,
            "reason": self.cleaned_data["reason"],
            "scope": self.cleaned_data["scope"],
            "expires_at": self.cleaned_data["expires_at"],
        }
        return FeedbackForm(data=data, trial=item.trial, user=user)


# Fields the feedback form needs for some kinds only (its `clean` says so after a submit): marked
# before one, with `data-required-for` (triage.js sets `required` when that kind is picked).
REQUIRED_FOR_KINDS: dict[str, list[str]] = {
    "evidence_refs": [k for k in QCItem.Kind.values if k != QCItem.Kind.WAIVER],
    "target_name": [QCItem.Kind.REPLAY_FIXTURE, QCItem.Kind.VERIFIER_CRITERION],
    **{name: [QCItem.Kind.WAIVER] for name in ("waived_item", "approver", "reason", "scope", "expires_at")},
}


def mark_required(form: forms.BaseForm, required_for: dict[str, list[str]], always: tuple[str, ...] = ()) -> None:
    """HTML `required` on `always` (and on the form's own required fields); `data-required-for` on the others."""
    for name in always:
        if name in form.fields:
            form.fields[name].widget.attrs["required"] = True
    for name, kinds in required_for.items():
        if name in form.fields:
            form.fields[name].widget.attrs["data-required-for"] = " ".join(kinds)


class AssignForm(forms.Form):
    trials = forms.ModelMultipleChoiceField(queryset=Trial.objects.triageable(), widget=forms.MultipleHiddenInput)
    assignee = UserChoiceField(
        queryset=roles.users_with_right(roles.FILE_QC), required=False, empty_label="(unassigned)"
    )


class TagForm(forms.Form):
    trials = forms.ModelMultipleChoiceField(queryset=Trial.objects.triageable(), widget=forms.MultipleHiddenInput)
    tag = forms.SlugField(max_length=60)


class MergeForm(forms.Form):
    into = forms.IntegerField(min_value=1, label="Merge into cluster")


class SplitForm(forms.Form):
    facet = forms.ChoiceField(choices=[("task", "task"), ("test", "failing test")])
    value = forms.CharField(max_length=200)


class CommentForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=10_000)
    step_id = forms.CharField(required=False, max_length=300, widget=forms.HiddenInput)


class ScenarioStatusForm(forms.Form):
    status = forms.ChoiceField(choices=QCScenario.Status.choices)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_status(self):
        status = self.cleaned_data["status"]
        if status == QCScenario.Status.WAIVED and not roles.has_right(self.user, roles.WAIVE):
            raise forms.ValidationError("Only an approver can mark a scenario waived.")
        return status


SEVERITY_CHOICES = Severity.choices


class FailureClassForm(forms.Form):
    """A triager's override of one trial's failure class (trials.models.failure_classes)."""

    failure_class = forms.ChoiceField(
        choices=[("", "the rules' class")] + [(c.value, c.value.replace("_", " ")) for c in FailureClass],
        required=False,
    )
    reason = forms.CharField(max_length=500, required=False)
