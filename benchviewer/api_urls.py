"""Every API route, in one list (served under /api/; the OpenAPI schema at /api/schema/).

The views live with their feature: trials/api.py, trials/triage/api.py, comparisons/api.py.
"""

from django.contrib.auth.decorators import login_required
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.authtoken.views import obtain_auth_token

from comparisons import api as comparisons
from trials import api as trials
from trials.triage import api as triage

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # A page for people: without a session, the login page (the schema itself answers 401).
    path("docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")), name="api-docs"),
    path("token/", obtain_auth_token, name="api-token"),  # POST username + password: your token
]

# Comparisons
urlpatterns += [
    path("comparisons/", comparisons.ComparisonView.as_view(), name="api-comparison"),
    path("comparisons/<int:pk>/status/", comparisons.ComparisonStatusView.as_view(), name="api-comparison-status"),
    path("comparisons/charts/<str:chart>/", comparisons.ChartView.as_view(), name="api-comparison-chart"),
    path("comparisons/save/", comparisons.SaveView.as_view(), name="api-comparison-save"),
    path("comparisons/saved/<int:pk>/event.json", comparisons.EventDownloadView.as_view(), name="api-comparison-event"),
]

# Imports and trials
urlpatterns += [
    path("imports/", trials.ImportListCreate.as_view(), name="api-imports"),
    path("imports/<uuid:pk>/", trials.ImportDetail.as_view(), name="api-import-detail"),
    path("trials/", trials.TrialList.as_view(), name="api-trials"),
    path("trials/<int:pk>/", trials.TrialDetail.as_view(), name="api-trial-detail"),
    path("trials/<int:pk>/trajectory/", trials.TrialTrajectory.as_view(), name="api-trial-trajectory"),
    path("trials/<int:pk>/steps/", trials.TrialSteps.as_view(), name="api-trial-steps"),
    path("trials/<int:pk>/steps/<int:number>/", trials.TrialStep.as_view(), name="api-trial-step"),
    path("trials/<int:pk>/search/", trials.TrialSearch.as_view(), name="api-trial-search"),
    path("trials/<int:pk>/permissions/", trials.TrialPermissions.as_view(), name="api-trial-permissions"),
    path("trials/<int:pk>/context/", trials.TrialContext.as_view(), name="api-trial-context"),
    path("trials/<int:pk>/align/<int:other>/", trials.TrialAlignment.as_view(), name="api-trial-align"),
]

# Triage into Agent QC
urlpatterns += [
    path("trials/<int:pk>/feedback/", triage.TrialFeedback.as_view(), name="api-trial-feedback"),
    path("qc/items/", triage.ItemList.as_view(), name="api-qc-items"),
    path("qc/items/<int:pk>/", triage.ItemDetail.as_view(), name="api-qc-item"),
    path("qc/scenarios/", triage.ScenarioList.as_view(), name="api-qc-scenarios"),
    path("qc/scenarios/<int:pk>/", triage.ScenarioDetail.as_view(), name="api-qc-scenario"),
    path("qc/blockers/", triage.BlockerList.as_view(), name="api-qc-blockers"),
    path("qc/blockers/<int:pk>/", triage.BlockerDetail.as_view(), name="api-qc-blocker"),
    path("qc/waivers/", triage.WaiverList.as_view(), name="api-qc-waivers"),
    path("qc/waivers/<int:pk>/", triage.WaiverDetail.as_view(), name="api-qc-waiver"),
    path("qc/export/", triage.QCExport.as_view(), name="api-qc-export"),
]

urlpatterns += [
    path("<path:rest>", trials.UnknownEndpoint.as_view()),  # last: only what nothing above answered
]
