"""Whether a call's principal may use a handler: anonymous callers, the credential's limits
and scopes (403 ``insufficient_scope``), then the handler's own permissions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import InterfaceError, OperationalError

from .asks.invoke import run_in_thread
from .protected_resource import challenge, operation_scopes
from .protocol.jsonrpc import INVALID_REQUEST, MCPError, Unavailable

if TYPE_CHECKING:
    from .asks.call import Call
    from .handlers import Handler


async def allowed(call: Call, handler: Handler) -> bool:
    return admitted(call, handler) and (not handler.guarded or bool(await permitted(call, [handler])))


def admitted(call: Call, handler: Handler) -> bool:
    """The checks that need no thread: anonymous callers, then the credential's scopes (403)."""
    principal = call.principal
    if principal.is_anonymous:
        return handler.allow_anonymous is not False  # no credential: no scopes, no limits
    if handler.scopes or getattr(principal.auth, "mcp_allows_handler", None) is not None:
        require_scopes(call, handler)
    return True


async def permitted(call: Call, handlers: list[Handler]) -> list[Handler]:
    """Those of ``handlers`` their own permissions let the principal use, checked in one worker thread
    (they may query the database: while it refuses, a 503, not an internal error)."""
    request = call.request

    def check() -> list[Handler]:
        return [
            h for h in handlers if not h.guarded or h.has_permission(call.principal.user, drf_request(request, call))
        ]

    try:
        return await run_in_thread(check)
    except (OperationalError, InterfaceError):
        raise Unavailable("the database") from None


def require_scopes(call: Call, handler: Handler) -> None:
    limit = getattr(call.principal.auth, "mcp_allows_handler", None)
    if limit is not None and not limit(handler):
        # Refused like a missing scope (403), but no other credential of the same kind helps.
        raise MCPError(
            INVALID_REQUEST,
            f"forbidden: this credential may not use the {handler.primitive} {handler.name}",
            http_status=403,
        )
    if handler.scopes_granted(call.principal.auth):
        return
    # The challenge names every scope the call needs, the endpoint's too, so the caller may step up.
    needed = operation_scopes(handler.scopes, call.endpoint)
    scope = " ".join(needed)
    request = call.request
    raise MCPError(
        INVALID_REQUEST,
        f"insufficient_scope: this needs an access token with the scopes {scope}",
        {"requiredScopes": needed},
        http_status=403,
        headers=None
        if request is None
        else [("www-authenticate", challenge(request, "insufficient_scope", scope=scope))],
    )


def drf_request(request: Any, call: Call) -> Any:
    from rest_framework.request import Request

    drf = Request(request)
    drf.user = call.principal.user
    drf.auth = call.principal.auth
    return drf
