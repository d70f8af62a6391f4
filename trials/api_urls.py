from django.urls import path

from trials import api

urlpatterns = [
    path("imports/", api.ImportListCreate.as_view(), name="api-imports"),
    path("imports/<uuid:pk>/", api.ImportDetail.as_view(), name="api-import-detail"),
    path("trials/", api.TrialList.as_view(), name="api-trials"),
    path("trials/<int:pk>/", api.TrialDetail.as_view(), name="api-trial-detail"),
    path("trials/<int:pk>/trajectory/", api.TrialTrajectory.as_view(), name="api-trial-trajectory"),
]

# Trial viewer
urlpatterns += [
    path("trials/<int:pk>/steps/", api.TrialSteps.as_view(), name="api-trial-steps"),
    path("trials/<int:pk>/steps/<int:number>/", api.TrialStep.as_view(), name="api-trial-step"),
    path("trials/<int:pk>/search/", api.TrialSearch.as_view(), name="api-trial-search"),
    path("trials/<int:pk>/permissions/", api.TrialPermissions.as_view(), name="api-trial-permissions"),
    path("trials/<int:pk>/context/", api.TrialContext.as_view(), name="api-trial-context"),
]
