"""The site's routes: pages by feature, and the API (benchviewer/api_urls.py)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from core import signin_link
from trials.live import otlp
from trials.mcp import http as mcp_http

handler500 = "core.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/once/<str:token>/", signin_link.sign_in, name="signin-link"),  # benchviewer view's link
    path("api/", include("benchviewer.api_urls")),
    path("v1/traces", otlp.Traces.as_view(), name="otlp-traces"),  # OTLP/HTTP's own path: exporters append it
    path("mcp/", mcp_http.McpEndpoint.as_view(), name="mcp"),  # MCP over streamable HTTP, the API's token
    path("comparisons/", include("comparisons.urls")),
    path("", include("shares.urls")),
    path("", include("trials.triage.urls")),
    path("", include("trials.urls")),
]
