"""Triage pages, included at the site root (benchviewer/urls.py); its API is in benchviewer/api_urls.py."""

from django.urls import path

from trials.triage import qc_views, views

urlpatterns = [
    path("trials/<int:pk>/feedback/", views.feedback, name="triage-feedback"),
    path("trials/<int:pk>/failure-class/", views.set_failure_class, name="triage-failure-class"),
    path("trials/<int:pk>/comments/", views.trial_comment, name="triage-comment"),
    path("triage/", views.queue, name="triage-queue"),
    path("triage/assign/", views.assign, name="triage-assign"),
    path("triage/<int:pk>/claim/", views.claim, name="triage-claim"),
    path("triage/next/", views.next_untriaged, name="triage-next"),
    path("triage/tag/", views.tag, name="triage-tag"),
    path("triage/add/", views.add_to_queue, name="triage-add"),
    path("trials/<int:pk>/compare-passing/", views.compare_passing, name="triage-compare-passing"),
    path("qc/clusters/", views.cluster_list, name="qc-clusters"),
    # qc/clusters/<pk>/ (a cluster, and its Markdown): trials/digests/urls.py
    path("qc/clusters/<int:pk>/file/", views.cluster_file, name="qc-cluster-file"),
    path("qc/clusters/<int:pk>/merge/", views.cluster_merge, name="qc-cluster-merge"),
    path("qc/clusters/<int:pk>/split/", views.cluster_split, name="qc-cluster-split"),
    path("qc/", qc_views.qc_home, name="qc-home"),
    path("qc/scenarios/", qc_views.scenario_list, name="qc-scenarios"),
    path("qc/scenarios/import/", qc_views.scenario_import, name="qc-scenario-import"),
    path("qc/scenarios/<int:pk>/", qc_views.scenario_detail, name="qc-scenario"),
    path("qc/scenarios/<int:pk>/status/", qc_views.scenario_status, name="qc-scenario-status"),
    path("qc/blockers/", qc_views.blocker_board, name="qc-blockers"),
    path("qc/waivers/", qc_views.waiver_list, name="qc-waivers"),
    path("qc/items/<int:pk>/", qc_views.item_detail, name="qc-item"),
    path("qc/items/<int:pk>/waive/", qc_views.waive_item, name="qc-item-waive"),
]
