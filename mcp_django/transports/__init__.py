"""Transports: how MCP messages reach the dispatcher (ASGI HTTP, websockets, a WSGI view)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..registry import Registry
    from .http import HttpEndpoint

_endpoints: dict[int, HttpEndpoint] = {}


def endpoint_for(registry: Registry) -> HttpEndpoint:
    """One endpoint per registry, shared by every transport mounted on it."""
    from .http import HttpEndpoint

    endpoint = _endpoints.get(id(registry))
    if endpoint is None:
        endpoint = _endpoints[id(registry)] = HttpEndpoint(registry)
    return endpoint
