"""ASGI entry point: /mcp (HTTP and websockets) goes to mcp-django, the rest to Django."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from mcp_django.routing import lifespan, mcp_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": URLRouter([*mcp_urlpatterns(), re_path(r"", django_asgi_app)]),
        "websocket": URLRouter(mcp_urlpatterns()),
        "lifespan": lifespan,  # uvicorn's startup and shutdown events
    }
)
