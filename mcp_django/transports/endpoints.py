"""One HTTP endpoint per registry, shared by every transport mounted on it (ASGI, websockets, the WSGI view)."""

from __future__ import annotations

from ..registry import Registry
from .http import HttpEndpoint
from .legacy_http import LegacyHttp

_endpoints: dict[int, HttpEndpoint] = {}


def endpoint_for(registry: Registry) -> HttpEndpoint:
    """The registry's endpoint, serving both eras: 2026-07-28 and the legacy sessions built on it."""
    endpoint = _endpoints.get(id(registry))
    if endpoint is None:
        endpoint = _endpoints[id(registry)] = HttpEndpoint(registry)
        endpoint.legacy = LegacyHttp(endpoint)
    return endpoint
