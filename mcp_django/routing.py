"""Routes for the project's ``asgi.py`` (Channels' ``URLRouter``).

from mcp_django.routing import lifespan, mcp_urlpatterns
application = ProtocolTypeRouter({
    "http": URLRouter([*mcp_urlpatterns(), re_path(r"", django_asgi_app)]),
    "websocket": URLRouter(mcp_urlpatterns()),
    "lifespan": lifespan,
})
"""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path

from .transports.asgi import MCPApplication, lifespan

__all__ = ["application", "lifespan", "mcp_urlpatterns"]

application = MCPApplication()


def mcp_urlpatterns(prefix: str = "mcp", app: Any = None) -> list[Any]:
    """``/mcp`` and ``/mcp/`` to the MCP application (HTTP and websockets alike)."""
    from .protected_resource import add_endpoint_path

    app = app or application
    prefix = prefix.strip("/")
    add_endpoint_path(prefix)
    return [path(prefix, app), re_path(rf"^{prefix}/$", app)]
