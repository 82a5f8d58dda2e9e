"""A plain Django view for the endpoint, for WSGI stacks (``include("mcp_django.urls")``).

2026-07-28 needs no held connection, so JSON answers over WSGI serve it fully.
Streaming (progress notifications) and legacy sessions need the ASGI route.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from .. import registry as registries
from ..conf import mcp_settings
from ..registry import Registry
from .http_io import HttpIn
from .legacy_http import endpoint_for


def _headers(request: HttpRequest) -> dict[str, str]:
    headers = {name.lower(): value.strip(" \t") for name, value in request.headers.items()}
    # Django has already checked ALLOWED_HOSTS here (get_host raises otherwise).
    headers["host"] = request.get_host()
    return headers


@csrf_exempt
async def mcp_view(request: HttpRequest, registry: Registry | None = None) -> HttpResponse:
    """The endpoint of ``registry`` (from the URLconf's kwargs: ``{"registry": staff}``), the default one's without."""
    endpoint = endpoint_for(registry or registries.mcp)
    limit = mcp_settings.MAX_REQUEST_BYTES
    declared = request.META.get("CONTENT_LENGTH") or ""
    # A body declared too large is refused before it is read.
    too_large = declared.isdigit() and int(declared) > limit
    body = b"" if too_large else request.body
    req = HttpIn(
        method=request.method or "GET",
        headers=_headers(request),
        body=body,
        client_address=request.META.get("REMOTE_ADDR"),
        request_factory=lambda: request,
        transport="wsgi",
        can_stream=False,
        too_large=too_large or len(body) > limit,
        scheme=request.scheme or "http",
        endpoint=request.path,
    )
    out: Any = await endpoint.handle(req)
    response = HttpResponse(out.body, status=out.status if out.status != 499 else 400)
    for name, value in out.headers:
        response[name] = value
    return response


# How mcp_django.protected_resource knows a URLconf route to this view as an endpoint's.
mcp_view.mcp_endpoint_view = True  # type: ignore[attr-defined]
