"""The Django admin of comparisons: stored comparisons and grids, saved ones (their big JSON left out)."""

from django.contrib import admin

from comparisons.models import Comparison, GridResult, SavedComparison


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ("id", "baseline_kind", "baseline_id", "candidate_kind", "candidate_id", "status", "updated_at")
    list_filter = ("status",)
    exclude = ("result", "points")  # large JSON: read it through the API


@admin.register(SavedComparison)
class SavedComparisonAdmin(admin.ModelAdmin):
    list_display = ("event_id", "title", "decision", "created_by", "created_at")
    list_filter = ("decision",)


@admin.register(GridResult)
class GridResultAdmin(admin.ModelAdmin):
    list_display = ("id", "key", "compute_ms", "updated_at")
    exclude = ("result",)  # large JSON: read it through the API
