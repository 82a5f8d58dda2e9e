"""``path("", include("mcp_django.urls"))`` serves the endpoint at ``/mcp`` from Django's view stack."""

from django.urls import path

from .transports.views import mcp_view

app_name = "mcp_django"
urlpatterns = [
    path("mcp", mcp_view, name="endpoint"),
    path("mcp/", mcp_view),
]
