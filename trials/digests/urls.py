"""The Markdown digests' routes, included at the site root before the pages they sit beside
(benchviewer/urls.py): each page answers Markdown when asked, and each has its `.md` URL.
Here, above comparisons and triage, so neither of them imports the digests."""

from django.urls import path

from comparisons.pair import views as comparison_views
from trials.digests import views as digests
from trials.triage import views as triage_views
from trials.viewer import pages as trial_views

urlpatterns = [
    path("trials/<int:pk>/", digests.negotiated(trial_views.trial_detail, digests.TrialDigest), name="trial-detail"),
    path("trials/<int:pk>.md", digests.TrialDigest.as_view(), name="trial-digest"),
    path(
        "qc/clusters/<int:pk>/",
        digests.negotiated(triage_views.cluster_detail, digests.ClusterDigest),
        name="qc-cluster",
    ),
    path("qc/clusters/<int:pk>.md", digests.ClusterDigest.as_view(), name="qc-cluster-digest"),
    path(
        "comparisons/",
        digests.negotiated(comparison_views.comparison_page, digests.ComparisonDigest),
        name="comparison",
    ),
    path("comparisons/digest.md", digests.ComparisonDigest.as_view(), name="comparison-digest"),
]
