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

from .endpoints import add_path
from .registry import Registry
from .transports.asgi import MCPApplication, freeze_startup_objects, lifespan
from .transports.websocket import websocket_application

__all__ = ["application", "freeze_startup_objects", "lifespan", "mcp_urlpatterns"]

application = MCPApplication(websocket=websocket_application)
_applications: dict[Registry | None, MCPApplication] = {None: application}


def mcp_urlpatterns(prefix: str = "mcp", app: Any = None, *, registry: Registry | None = None) -> list[Any]:
    """``/mcp`` and ``/mcp/`` to the MCP application (HTTP and websockets alike).

    ``registry``: another endpoint's handlers (``Registry("staff")``), served at ``prefix``
    with that endpoint's settings (docs/endpoints.md); ``app``: the application to mount
    (ASGI middleware around one, say), the default endpoint's by default.
    """
    if app is None:
        # One application per endpoint, for its HTTP and its websocket routes alike.
        app = _applications.get(registry)
        if app is None:
            app = _applications[registry] = MCPApplication(registry, websocket=websocket_application)
    prefix = prefix.strip("/")
    add_path(prefix, registry or getattr(app, "registry", None))
    return [path(prefix, app), re_path(rf"^{prefix}/$", app)]
