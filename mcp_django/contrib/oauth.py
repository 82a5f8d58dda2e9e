"""OAuth 2.1 access tokens from django-oauth-toolkit, checked the way MCP authorization requires
(docs/authorization.md): valid for the toolkit, issued for exactly this endpoint's resource URL
(RFC 8707; the toolkit's own validator takes a resource as a URL prefix, and a token without
one could be meant for another service), and with its DPoP proof when bound to a key."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import NoReverseMatch, reverse
from django.utils.decorators import sync_and_async_middleware
from oauth2_provider.contrib.rest_framework import OAuth2Authentication as ToolkitAuthentication
from oauth2_provider.oauth2_backends import get_oauthlib_core
from rest_framework import exceptions

from .. import protected_resource
from ..conf import mcp_settings
from ..tokens.models import BoundAccessToken
from . import dpop

__all__ = ["InsufficientScope", "OAuth2Authentication", "refuse_nul", "resource_matches"]


def resource_matches(request_uri: str, audiences: list[str]) -> bool:
    """Whether a token issued for the resources ``audiences`` may be used at ``request_uri``: one
    of them, in canonical form, is the resource the request reached (its trailing slash dropped).
    A ``RESOURCE_SERVER_TOKEN_RESOURCE_VALIDATOR`` for django-oauth-toolkit."""
    wanted = protected_resource.canonical_resource(request_uri.split("?", 1)[0])
    if wanted is None:
        return False
    wanted = wanted.rstrip("/") if "/" in wanted.split("://", 1)[1] else wanted
    return any(protected_resource.canonical_resource(audience) == wanted for audience in audiences or ())


class InsufficientScope(exceptions.PermissionDenied):
    """A valid token without the scopes the endpoint requires (403, RFC 6750)."""


class OAuth2Authentication(ToolkitAuthentication):
    """``Authorization: Bearer TOKEN`` (or ``DPoP TOKEN`` with its proof), for tokens
    django-oauth-toolkit issued for this endpoint."""

    # Reads nothing but the Authorization header (and the DPoP proof): the principal cache
    # (mcp_django.auth_cache) may key on it.
    mcp_reads_only_headers = True
    www_authenticate_realm = "mcp"

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        # The toolkit reads the body's form fields too: hand it Django's request, whose POST
        # is empty for a JSON body (DRF's own SessionAuthentication reads _request too).
        found = dpop.credentials(request)
        if found is None:
            return None
        django_request, scheme, text = found
        checked_request = django_request
        if scheme == "dpop":
            # The toolkit's validation knows no other scheme: a shallow copy says Bearer.
            checked_request = copy.copy(django_request)
            checked_request.META = {**django_request.META, "HTTP_AUTHORIZATION": f"Bearer {text}"}
        valid, checked = get_oauthlib_core().verify_request(checked_request, scopes=[])
        if not valid:
            error = getattr(checked, "oauth2_error", None) or {}
            request.oauth2_error = {"error": "invalid_token", **error}
            raise exceptions.AuthenticationFailed(
                error.get("error_description") or "The access token is invalid, expired or revoked."
            )
        user, token = checked.user, checked.access_token
        resource = protected_resource.resource_url(django_request)
        if not token.resource or not resource_matches(resource, token.resource):
            protected_resource.refuse(request, "The access token was not issued for this resource.")
        if user is None or not user.is_active:
            # A client-credentials token some servers issue for no user: nobody to act as here.
            raise exceptions.AuthenticationFailed("User inactive or deleted, or the token acts for no user.")
        # A bound token is refused without its proof whatever the endpoint's DPOP setting.
        dpop.enforce(request, django_request, scheme, text, BoundAccessToken.jkt_of(text))
        # The endpoint's own scopes, when it sets them (MCP_DJANGO["ENDPOINTS"]).
        required = mcp_settings.for_request(django_request).REQUIRED_SCOPES
        if required and not token.allow_scopes(required):
            request.oauth2_error = {"error": "insufficient_scope"}
            raise InsufficientScope(f"insufficient_scope: this endpoint needs the scopes {' '.join(required)}")
        return user, token

    def authenticate_header(self, request: Any) -> str:
        # DRF's Request passes scheme, host and path through to the request it wraps.
        return protected_resource.challenge(request, refused=request)


# How a NUL arrives in a query string, a form body or a JSON body.
_NUL_SPELLINGS = (b"\x00", b"%00", b"\\u0000")
_TEXT_BODIES = ("application/x-www-form-urlencoded", "application/json")


def holds_nul(request: HttpRequest) -> bool:
    """Whether a parameter of ``request`` (its query, or a form or JSON body) may hold a NUL."""
    query = request.META.get("QUERY_STRING", "").encode("latin-1", "replace")
    if any(spelling in query for spelling in _NUL_SPELLINGS[:2]):
        return True
    if request.content_type not in _TEXT_BODIES:
        return False  # a multipart upload may carry NUL in a file; no OAuth endpoint takes one
    body = request.body.lower()
    return any(spelling in body for spelling in _NUL_SPELLINGS)


@sync_and_async_middleware
def refuse_nul(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    """Middleware: a request to django-oauth-toolkit's URLs whose parameters hold a NUL is
    ``400 invalid_request``, not a 500 (the toolkit looks parameters up as they came, and
    PostgreSQL's text refuses a NUL). No OAuth parameter holds one."""
    prefix: list[str | None] = []  # where the toolkit's URLs are mounted (/o/), None when they are not

    def applies(request: HttpRequest) -> bool:
        if not prefix:  # the URLconf is loaded by the first request
            try:
                prefix.append(reverse("oauth2_provider:authorize").rsplit("authorize/", 1)[0])
            except NoReverseMatch:
                prefix.append(None)
        return prefix[0] is not None and request.path.startswith(prefix[0]) and holds_nul(request)

    def refused() -> HttpResponse:
        return JsonResponse(
            {"error": "invalid_request", "error_description": "A request parameter holds a NUL character."},
            status=400,
        )

    if iscoroutinefunction(get_response):

        async def middleware(request: HttpRequest) -> Any:
            return refused() if applies(request) else await get_response(request)

    else:

        def middleware(request: HttpRequest) -> Any:  # type: ignore[misc]
            return refused() if applies(request) else get_response(request)

    return middleware
