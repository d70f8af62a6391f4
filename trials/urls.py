"""The trial pages' routes, included at the site root (benchviewer/urls.py)."""

from django.urls import path

from trials import views
from trials.queries import views as queries

urlpatterns = [
    path("", views.home, name="home"),
    path("imports/", views.imports, name="imports"),
    path("imports/<uuid:pk>/", views.import_detail, name="import-detail"),
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("trials/", views.trial_list, name="trial-list"),
    # trials/<pk>/ (a trial, and its Markdown) and the .md digests: trials/digests/urls.py
    path("trials/<int:pk>/steps/<int:number>/", views.trial_step, name="trial-step"),
    path("trials/<int:pk>/side-by-side/<int:other>/", views.trial_side_by_side, name="trial-side-by-side"),
    path("trials/<int:pk>/artifacts/<int:artifact_pk>/", views.artifact_download, name="trial-artifact"),
    path("trials/<int:pk>/artifacts/<int:artifact_pk>/preview/", views.artifact_preview, name="trial-artifact-preview"),
    path("trials/<int:pk>/artifacts/<int:artifact_pk>/recording/", views.artifact_recording, name="trial-recording"),
    path("trials/<int:pk>/file/", views.trial_file, name="trial-file"),
    path("search/", views.search, name="search"),
    path("trials/query/suggest/", queries.query_suggest, name="query-suggest"),
    path("trials/saved-queries/", queries.saved_queries, name="saved-queries"),
    path("trials/saved-queries/<int:pk>/delete/", queries.delete_saved_query, name="saved-query-delete"),
]
