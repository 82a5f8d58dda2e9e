"""``path("mcp/tokens/", include("mcp_django.tokens.urls"))``: the user's own MCP tokens."""

from django.urls import path

from . import views

__all__ = ["app_name", "urlpatterns"]


app_name = "mcp_tokens"

urlpatterns = [
    path("", views.tokens, name="list"),
    path("<str:prefix>/revoke/", views.revoke, name="revoke"),
]
