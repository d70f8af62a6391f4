"""The site's routes: pages by feature, and the API (benchviewer/api_urls.py)."""

from functools import cache

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

from core import roles, signin_link
from trials.live import otlp

handler500 = "core.errors.server_error"


@cache
def mcp_view():
    from trials.mcp import http as mcp_http  # the MCP SDK: a second of every first page, so on its first call

    return mcp_http.McpEndpoint.as_view()


@csrf_exempt
@login_not_required  # as DRF marks its views: the endpoint checks the API token itself
def mcp_endpoint(request, *args, **kwargs):
    return mcp_view()(request, *args, **kwargs)


mcp_endpoint.required_right = roles.READ  # type: ignore[attr-defined]  # as McpEndpoint names it (write_right_of)


urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/once/<str:token>/", signin_link.sign_in, name="signin-link"),  # benchviewer view's link
    path("api/", include("benchviewer.api_urls")),
    path("v1/traces", otlp.Traces.as_view(), name="otlp-traces"),  # OTLP/HTTP's own path: exporters append it
    path("mcp/", mcp_endpoint, name="mcp"),  # MCP over streamable HTTP, the API's token
    path("", include("trials.digests.urls")),  # pages that answer Markdown too, first
    path("comparisons/", include("comparisons.urls")),
    path("", include("shares.urls")),
    path("", include("trials.triage.urls")),
    path("", include("trials.urls")),
]
