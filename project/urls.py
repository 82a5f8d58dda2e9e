from django.contrib import admin
from django.urls import include, path

from mcp_django.urls import mcp_view
from project.authserver import DPoPIntrospectTokenView, DPoPTokenView, ServerMetadataView
from project.demo.views import landing
from project.shop.staff import staff_mcp

urlpatterns = [
    # What the endpoint is and how to connect to it.
    path("", landing, name="landing"),
    path("admin/", admin.site.urls),
    # The demo's OAuth 2.1 authorization server (issuer http://HOST/o) and its RFC 8414
    # metadata where strict clients look for it: /.well-known/oauth-authorization-server/o.
    # Its token endpoint and metadata are the toolkit's with DPoP and the added grants
    # (project/authserver.py), routed before the toolkit's own.
    path("o/token/", DPoPTokenView.as_view()),
    path("o/introspect/", DPoPIntrospectTokenView.as_view()),
    path("o/.well-known/oauth-authorization-server", ServerMetadataView.as_view()),
    path("o/", include("oauth2_provider.urls")),
    path(".well-known/oauth-authorization-server/<path:issuer_path>", ServerMetadataView.as_view()),
    # The demo shop's REST API; project/shop/mcp.py serves the same views as MCP tools.
    path("api/", include("project.shop.urls")),
    # Each signed-in user's own MCP tokens: list, create (the secret shown once), revoke.
    path("mcp/tokens/", include("mcp_django.tokens.urls")),
    # The same endpoint through Django's view stack, for WSGI deployments. Under
    # ASGI, project/asgi.py routes /mcp to the fast application before Django sees it.
    path("", include("mcp_django.urls")),
    # The staff endpoint (project/shop/staff.py) through Django's view stack as well.
    path("staff/mcp", mcp_view, {"registry": staff_mcp}),
]
