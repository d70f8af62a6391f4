from django.urls import path

from trials import views

urlpatterns = [
    path("", views.home, name="home"),
    path("imports/", views.imports, name="imports"),
    path("imports/<uuid:pk>/", views.import_detail, name="import-detail"),
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("trials/", views.trial_list, name="trial-list"),
    path("trials/<int:pk>/", views.trial_detail, name="trial-detail"),
]
