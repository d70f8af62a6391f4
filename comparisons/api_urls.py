from django.urls import path

from comparisons import api

urlpatterns = [
    path("", api.ComparisonView.as_view(), name="api-comparison"),
    path("<int:pk>/status/", api.ComparisonStatusView.as_view(), name="api-comparison-status"),
    path("charts/<str:chart>/", api.ChartView.as_view(), name="api-comparison-chart"),
    path("save/", api.SaveView.as_view(), name="api-comparison-save"),
    path("saved/<int:pk>/event.json", api.EventDownloadView.as_view(), name="api-comparison-event"),
]
