"""Every API route, in one list (served under /api/; the OpenAPI schema at /api/schema/).

The views live with their feature: trials/viewer/api.py, trials/uploads/api.py, trials/triage/api.py,
comparisons/pair/api.py.
"""

from django.contrib.auth.decorators import login_required
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.authtoken.views import obtain_auth_token

from comparisons.families import api as family_api
from comparisons.pair import api as comparisons
from shares import api as shares
from trials.live import api as live
from trials.live import poll as live_poll
from trials.queries import api as queries
from trials.triage import api as triage
from trials.uploads import api as uploads
from trials.viewer import api as trials

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
    path("comparisons/saved/", comparisons.SavedListView.as_view(), name="api-comparison-saved"),
    path("comparisons/saved/<int:pk>/", comparisons.SavedDetailView.as_view(), name="api-comparison-saved-detail"),
    path("comparisons/saved/<int:pk>/event.json", comparisons.EventDownloadView.as_view(), name="api-comparison-event"),
    path("comparisons/grid/", family_api.GridView.as_view(), name="api-comparison-grid"),
    path("comparisons/grid/chart/", family_api.GridChartView.as_view(), name="api-comparison-grid-chart"),
    path("comparisons/trend/", family_api.TrendView.as_view(), name="api-comparison-trend"),
    path("comparisons/trend/chart/", family_api.TrendChartView.as_view(), name="api-comparison-trend-chart"),
]

# Imports and trials
urlpatterns += [
    path("imports/", uploads.ImportListCreate.as_view(), name="api-imports"),
    path("imports/<uuid:pk>/", uploads.ImportDetail.as_view(), name="api-import-detail"),
    path("trials/", trials.TrialList.as_view(), name="api-trials"),
    path("trials/<int:pk>/", trials.TrialDetail.as_view(), name="api-trial-detail"),
    path("trials/<int:pk>/trajectory/", trials.TrialTrajectory.as_view(), name="api-trial-trajectory"),
    path("trials/<int:pk>/steps/", trials.TrialSteps.as_view(), name="api-trial-steps"),
    path("trials/<int:pk>/steps/<int:number>/", trials.TrialStep.as_view(), name="api-trial-step"),
    path("trials/<int:pk>/search/", trials.TrialSearch.as_view(), name="api-trial-search"),
    path("trials/<int:pk>/permissions/", trials.TrialPermissions.as_view(), name="api-trial-permissions"),
    path("trials/<int:pk>/context/", trials.TrialContext.as_view(), name="api-trial-context"),
    path("trials/<int:pk>/align/<int:other>/", trials.TrialAlignment.as_view(), name="api-trial-align"),
    path("search/", trials.Search.as_view(), name="api-search"),
    path("saved-queries/", queries.SavedQueryList.as_view(), name="api-saved-queries"),
    path("saved-queries/<int:pk>/", queries.SavedQueryDetail.as_view(), name="api-saved-query"),
]

# Seed 000's host commands
urlpatterns += [
    path("commands/export_benchmark_trial/", trials.ExportBenchmarkTrial.as_view(), name="api-export-trial"),
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
    path("qc/clusters/", triage.ClusterList.as_view(), name="api-qc-clusters"),
    path("qc/clusters/<int:pk>/", triage.ClusterDetail.as_view(), name="api-qc-cluster"),
    path("qc/clusters/<int:pk>/feedback/", triage.ClusterFeedback.as_view(), name="api-qc-cluster-feedback"),
    path("qc/queue/", triage.Queue.as_view(), name="api-qc-queue"),
]

# Live runs: the runner's commands (seed 000) and what a live trial's page polls
urlpatterns += [
    path("commands/start_benchmark_trial/", live.StartTrial.as_view(), name="api-command-start-trial"),
    path("commands/record_benchmark_reward/", live.RecordReward.as_view(), name="api-command-record-reward"),
    path("commands/complete_benchmark_trial/", live.CompleteTrial.as_view(), name="api-command-complete-trial"),
    path("commands/compare_benchmark_runs/", live.CompareRuns.as_view(), name="api-command-compare-runs"),
    path("trials/<int:pk>/events/", live.TrialEvents.as_view(), name="api-trial-events"),
    path("trials/<int:pk>/live/", live_poll.TrialLive.as_view(), name="api-trial-live"),
]

# Share links (shares/)
urlpatterns += [
    path("shares/", shares.ShareList.as_view(), name="api-shares"),
    path("shares/<int:pk>/", shares.ShareDetail.as_view(), name="api-share"),
]

urlpatterns += [
    path("<path:rest>", trials.UnknownEndpoint.as_view()),  # last: only what nothing above answered
]
