"""The share routes: a visitor's `/s/<token>/`, one's own `/shares/`, the report download."""

from django.urls import path

from shares import mine, views

urlpatterns = [
    path("s/<str:token>/", views.shared, name="share"),
    path("s/<str:token>/steps/<int:number>/", views.shared, name="share-step"),
    path("s/<str:token>/api/steps/<int:number>/", views.shared_step, name="share-step-full"),
    path("shares/", mine.share_list, name="share-list"),
    path("shares/<int:pk>/revoke/", mine.share_revoke, name="share-revoke"),
    path("shares/report/", views.download_report, name="share-report"),
]
