from django.urls import path

from trials import api

urlpatterns = [
    path("imports/", api.ImportListCreate.as_view(), name="api-imports"),
    path("imports/<uuid:pk>/", api.ImportDetail.as_view(), name="api-import-detail"),
    path("trials/", api.TrialList.as_view(), name="api-trials"),
    path("trials/<int:pk>/", api.TrialDetail.as_view(), name="api-trial-detail"),
    path("trials/<int:pk>/trajectory/", api.TrialTrajectory.as_view(), name="api-trial-trajectory"),
]
