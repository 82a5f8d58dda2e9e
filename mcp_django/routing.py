"""Routes for the project's ``asgi.py`` (Channels' ``URLRouter``; the README shows one)."""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path

from .endpoints import add_path
from .registry import Registry
from .transports.asgi import MCPApplication, freeze_startup_objects, lifespan
from .transports.websocket import MCPWebsocketConsumer

__all__ = ["application", "freeze_startup_objects", "lifespan", "mcp_urlpatterns"]

application = MCPApplication(websocket=MCPWebsocketConsumer.as_asgi)
_applications: dict[Registry | None, MCPApplication] = {None: application}


def mcp_urlpatterns(prefix: str = "mcp", app: Any = None, *, registry: Registry | None = None) -> list[Any]:
    """``/mcp`` and ``/mcp/`` to the MCP application (HTTP and websockets alike): ``registry``'s
    endpoint (docs/endpoints.md), or ``app`` (ASGI middleware around one, say)."""
    if app is None:
        # One application per endpoint, for its HTTP and its websocket routes alike.
        app = _applications.get(registry)
        if app is None:
            app = _applications[registry] = MCPApplication(registry, websocket=MCPWebsocketConsumer.as_asgi)
    prefix = prefix.strip("/")
    add_path(prefix, registry or getattr(app, "registry", None))
    return [path(prefix, app), re_path(rf"^{prefix}/$", app)]
