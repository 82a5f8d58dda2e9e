"""``path("mcp/tokens/", include("mcp_django.tokens.urls"))``: the user's own MCP tokens."""

from django.urls import path

from . import views

app_name = "mcp_tokens"

urlpatterns = [
    path("", views.tokens, name="list"),
    path("<str:prefix>/revoke/", views.revoke, name="revoke"),
]
