from django.urls import path

from comparisons import family_views, views

urlpatterns = [
    path("", views.comparison_page, name="comparison"),
    path("save/", views.save_comparison, name="comparison-save"),
    path("grid/", family_views.grid_page, name="comparison-grid"),
    path("trend/", family_views.trend_page, name="comparison-trend"),
]
