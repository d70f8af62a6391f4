"""The trial pages' routes, included at the site root (benchviewer/urls.py)."""

from django.urls import path

from trials.queries import views as queries
from trials.uploads import pages as uploads
from trials.viewer import pages

urlpatterns = [
    path("", pages.home, name="home"),
    path("imports/", uploads.imports, name="imports"),
    path("imports/<uuid:pk>/", uploads.import_detail, name="import-detail"),
    path("jobs/", pages.job_list, name="job-list"),
    path("jobs/<int:pk>/", pages.job_detail, name="job-detail"),
    path("configurations/", pages.configuration_list, name="configuration-list"),
    path("trials/", pages.trial_list, name="trial-list"),
    # trials/<pk>/ (a trial, and its Markdown) and the .md digests: trials/digests/urls.py
    path("trials/<int:pk>/steps/<int:number>/", pages.trial_step, name="trial-step"),
    path("trials/<int:pk>/side-by-side/<int:other>/", pages.trial_side_by_side, name="trial-side-by-side"),
    path("trials/<int:pk>/artifacts/<int:artifact_pk>/", pages.artifact_download, name="trial-artifact"),
    path("trials/<int:pk>/artifacts/<int:artifact_pk>/preview/", pages.artifact_preview, name="trial-artifact-preview"),
    path("trials/<int:pk>/artifacts/<int:artifact_pk>/recording/", pages.artifact_recording, name="trial-recording"),
    path("trials/<int:pk>/file/", pages.trial_file, name="trial-file"),
    path("search/", pages.search, name="search"),
    path("trials/query/suggest/", queries.query_suggest, name="query-suggest"),
    path("trials/saved-queries/", queries.saved_queries, name="saved-queries"),
    path("trials/saved-queries/<int:pk>/delete/", queries.delete_saved_query, name="saved-query-delete"),
]
