from django.urls import path

from comparisons import views

urlpatterns = [
    path("", views.comparison_page, name="comparison"),
    path("save/", views.save_comparison, name="comparison-save"),
]
