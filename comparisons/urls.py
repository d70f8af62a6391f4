"""The comparison pages' routes, included at the site root (benchviewer/urls.py)."""

from django.urls import path

from comparisons.families import views as family_views
from comparisons.pair import views

urlpatterns = [
    # "" (the comparison page) and its digest.md: trials/digests/urls.py
    path("save/", views.save_comparison, name="comparison-save"),
    path("p0/", views.p0_regressions_page, name="comparison-p0"),
    path("saved/", views.saved_list_page, name="comparison-saved"),
    path("saved/<int:pk>/", views.saved_detail_page, name="comparison-saved-detail"),
    path("grid/", family_views.grid_page, name="comparison-grid"),
    path("trend/", family_views.trend_page, name="comparison-trend"),
]
