"""The Django admin of the trials app: imports, trials, datasets (their pass threshold), QC citations, saved
queries, received spans."""

from django.contrib import admin, messages

from trials import models, thresholds


@admin.register(models.Import)
class ImportAdmin(admin.ModelAdmin):
    list_display = ["source_name", "origin", "status", "progress_done", "progress_total", "created_at"]
    list_filter = ["status", "origin"]


@admin.register(models.Trial)
class TrialAdmin(admin.ModelAdmin):
    list_display = ["name", "source_format", "status", "reward", "failure_category", "is_complete"]
    list_filter = ["source_format", "status", "is_complete"]
    search_fields = ["name", "key"]
    raw_id_fields = ["pack", "job", "dataset", "task", "configuration", "cluster"]


@admin.register(models.Dataset)
class DatasetAdmin(admin.ModelAdmin):
    """Where a dataset's pass threshold is set (none of the formats read states one): saving a changed one
    decides the dataset's reward-scored trials again (trials/thresholds.py)."""

    list_display = ["name", "version", "pass_reward"]
    search_fields = ["name", "version"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and "pass_reward" in form.changed_data:
            changed = thresholds.rescore(obj)
            rule = thresholds.pass_rule([obj])
            self.message_user(
                request, f"{obj}: a trial passes at {rule['head']}; {changed} trials decided again.", messages.INFO
            )


@admin.register(models.QCItemCitation)
class QCItemCitationAdmin(admin.ModelAdmin):
    raw_id_fields = ["item", "trial"]


@admin.register(models.SavedQuery)
class SavedQueryAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "created_at"]
    raw_id_fields = ["user"]


@admin.register(models.ReceivedSpan)
class ReceivedSpanAdmin(admin.ModelAdmin):
    list_display = ["trial", "trace_id", "span_id", "lane"]
    raw_id_fields = ["trial"]
    exclude = ["span"]  # (its body: a page shows the trial's steps made from it, never this)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


for model in (
    models.Blob,
    models.Pack,
    models.PackFile,
    models.Configuration,
    models.Job,
    models.Task,
    models.Trajectory,
    models.Step,
    models.ToolCall,
    models.ObservationResult,
    models.PermissionDecision,
    models.ContextRecord,
    models.Artifact,
    models.RewardCriterion,
    models.RuntimeEvent,
    models.QCScenario,
    models.FailureMode,
    models.QCItem,
    models.FailureCluster,
    models.TriageAssignment,
    models.QueueEntry,
    models.TriageTag,
    models.Comment,
    models.AuditEntry,
    models.Document,
    models.StepText,
    models.StepWords,
):
    admin.site.register(model)


@admin.register(models.ReceivedBatch)
class ReceivedBatchAdmin(admin.ModelAdmin):
    list_display = ["id", "trial_key", "protobuf", "sent_by", "received_at"]
    raw_id_fields = ["sent_by"]
    exclude = ["body"]  # (the spans as sent, redacted values and all: read off the request, never shown)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
