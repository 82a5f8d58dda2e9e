"""The demo's landing page: what the endpoint is and how to connect to it."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from mcp_django.conf import mcp_settings
from mcp_django.registry import mcp


def landing(request: HttpRequest) -> HttpResponse:
    endpoint = request.build_absolute_uri("/mcp")
    return render(
        request,
        "demo/landing.html",
        {
            "endpoint": endpoint,
            "ws_endpoint": "ws" + endpoint.removeprefix("http"),
            "staff_endpoint": request.build_absolute_uri("/staff/mcp"),
            "anonymous": mcp_settings.ALLOW_ANONYMOUS,
            "tools": sorted(mcp.tools.values(), key=lambda tool: tool.name),
            "server_name": mcp_settings.SERVER_NAME,
        },
    )
