"""``path("", include("mcp_django.urls"))`` serves the endpoint at ``/mcp`` from Django's view stack."""

from django.urls import path

from . import protected_resource
from .registry import mcp
from .transports.views import mcp_view

__all__ = ["app_name", "mcp_view", "urlpatterns"]


app_name = "mcp_django"
urlpatterns = [
    path("mcp", mcp_view, name="endpoint"),
    path("mcp/", mcp_view),
    # MCP authorization (RFC 9728): only when MCP_DJANGO["AUTHORIZATION_SERVERS"] names one.
    path(
        ".well-known/oauth-protected-resource",
        protected_resource.metadata,
        {"registry": mcp},
        name="protected-resource",
    ),
    path(".well-known/oauth-protected-resource/<path:resource_path>", protected_resource.metadata, {"registry": mcp}),
]
