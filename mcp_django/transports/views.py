"""The endpoint as a plain Django view, for WSGI stacks (``include("mcp_django.urls")``):
JSON answers serve 2026-07-28 fully; streaming and legacy sessions need the ASGI route."""

from __future__ import annotations

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from .. import registry as registries
from ..conf import mcp_settings
from ..log_lines import host_refused
from ..protocol.jsonrpc import INVALID_REQUEST, MCPError
from ..registry import Registry
from .http import HttpIn, HttpOut, refused
from .legacy_http import endpoint_for


@csrf_exempt
async def mcp_view(request: HttpRequest, registry: Registry | None = None) -> HttpResponse:
    """The endpoint of ``registry`` (from the URLconf's kwargs: ``{"registry": staff}``), the default one's without."""
    headers = {name.lower(): value.strip(" \t") for name, value in request.headers.items()}
    try:
        # Host as Django reads it. CommonMiddleware, where installed, has refused a host
        # ALLOWED_HOSTS refuses already; without it, this is the 403.
        headers["host"] = request.get_host()
    except DisallowedHost:
        host_refused(request.META.get("HTTP_X_FORWARDED_HOST") or request.META.get("HTTP_HOST", ""))
        return _response(refused(None, MCPError(INVALID_REQUEST, "Host not allowed", http_status=403)))
    endpoint = endpoint_for(registry or registries.mcp)
    limit = mcp_settings.MAX_REQUEST_BYTES
    declared = request.META.get("CONTENT_LENGTH") or ""
    # A body declared too large is refused before it is read.
    too_large = declared.isdigit() and int(declared) > limit
    body = b"" if too_large else request.body
    req = HttpIn(
        method=request.method or "GET",
        headers=headers,
        body=body,
        client_address=request.META.get("REMOTE_ADDR"),
        request_factory=lambda: request,
        transport="wsgi",
        can_stream=False,
        too_large=too_large or len(body) > limit,
        scheme=request.scheme or "http",
        endpoint=request.path,
    )
    return _response(await endpoint.handle(req))


def _response(out: HttpOut) -> HttpResponse:
    return HttpResponse(out.body, status=out.status if out.status != 499 else 400, headers=dict(out.headers))


# How mcp_django.protected_resource knows a URLconf route to this view as an endpoint's.
mcp_view.mcp_endpoint_view = True  # type: ignore[attr-defined]
