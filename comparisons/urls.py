from django.urls import path

from comparisons import family_views, views
from trials.digests import views as digests

urlpatterns = [
    path("", digests.negotiated(views.comparison_page, digests.ComparisonDigest), name="comparison"),
    path("digest.md", digests.ComparisonDigest.as_view(), name="comparison-digest"),
    path("save/", views.save_comparison, name="comparison-save"),
    path("p0/", views.p0_regressions_page, name="comparison-p0"),
    path("saved/", views.saved_list_page, name="comparison-saved"),
    path("saved/<int:pk>/", views.saved_detail_page, name="comparison-saved-detail"),
    path("grid/", family_views.grid_page, name="comparison-grid"),
    path("trend/", family_views.trend_page, name="comparison-trend"),
]
