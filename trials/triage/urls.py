"""Triage pages and API, included at the site root (benchviewer/urls.py)."""

from django.urls import path

from trials.triage import api, views

urlpatterns = [
    # pages
    path("trials/<int:pk>/feedback/", views.feedback, name="triage-feedback"),
    path("trials/<int:pk>/comments/", views.trial_comment, name="triage-comment"),
    path("triage/", views.queue, name="triage-queue"),
    path("triage/assign/", views.assign, name="triage-assign"),
    path("qc/", views.qc_home, name="qc-home"),
    path("qc/scenarios/", views.scenario_list, name="qc-scenarios"),
    path("qc/scenarios/import/", views.scenario_import, name="qc-scenario-import"),
    path("qc/scenarios/<int:pk>/", views.scenario_detail, name="qc-scenario"),
    path("qc/scenarios/<int:pk>/status/", views.scenario_status, name="qc-scenario-status"),
    path("qc/blockers/", views.blocker_board, name="qc-blockers"),
    path("qc/waivers/", views.waiver_list, name="qc-waivers"),
    path("qc/items/<int:pk>/", views.item_detail, name="qc-item"),
    # API
    path("api/trials/<int:pk>/feedback/", api.TrialFeedback.as_view(), name="api-trial-feedback"),
    path("api/qc/items/", api.ItemList.as_view(), name="api-qc-items"),
    path("api/qc/items/<int:pk>/", api.ItemDetail.as_view(), name="api-qc-item"),
    path("api/qc/scenarios/", api.ScenarioList.as_view(), name="api-qc-scenarios"),
    path("api/qc/scenarios/<int:pk>/", api.ScenarioDetail.as_view(), name="api-qc-scenario"),
    path("api/qc/blockers/", api.BlockerList.as_view(), name="api-qc-blockers"),
    path("api/qc/blockers/<int:pk>/", api.BlockerDetail.as_view(), name="api-qc-blocker"),
    path("api/qc/waivers/", api.WaiverList.as_view(), name="api-qc-waivers"),
    path("api/qc/waivers/<int:pk>/", api.WaiverDetail.as_view(), name="api-qc-waiver"),
    path("api/qc/export/", api.QCExport.as_view(), name="api-qc-export"),
]
