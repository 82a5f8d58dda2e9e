"""ASGI entry point: /mcp and /staff/mcp (HTTP and websockets) go to mcp-django, the rest to Django."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from mcp_django.routing import lifespan, mcp_urlpatterns  # noqa: E402
from project.shop.staff import staff_mcp  # noqa: E402

# The customers' endpoint, /mcp, and the staff's, /staff/mcp (docs/endpoints.md).
endpoints = [*mcp_urlpatterns(), *mcp_urlpatterns("staff/mcp", registry=staff_mcp)]

application = ProtocolTypeRouter(
    {
        "http": URLRouter([*endpoints, re_path(r"", django_asgi_app)]),
        "websocket": URLRouter(endpoints),
        "lifespan": lifespan,  # uvicorn's startup and shutdown events
    }
)
