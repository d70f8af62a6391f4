from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.authtoken.views import obtain_auth_token

from trials.api import UnknownEndpoint

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # A page for people: without a session, the login page (the schema itself answers 401).
    path("api/docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/token/", obtain_auth_token, name="api-token"),  # POST username + password: your token
    path("api/comparisons/", include("comparisons.api_urls")),
    path("api/", include("trials.api_urls")),
    path("comparisons/", include("comparisons.urls")),
    path("", include("trials.triage.urls")),
    path("", include("trials.urls")),
    path("api/<path:rest>", UnknownEndpoint.as_view()),  # last: only what nothing above answered
]
