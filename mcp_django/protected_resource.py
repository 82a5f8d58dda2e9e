"""The endpoint as an OAuth 2.1 protected resource, as MCP authorization describes it.

- ``/.well-known/oauth-protected-resource`` (RFC 9728, and its path-suffixed form
  for ``/mcp``) names the authorization servers whose tokens the endpoint accepts
  (``MCP_DJANGO["AUTHORIZATION_SERVERS"]``) and the scopes it knows;
- a ``401`` carries a ``Bearer`` challenge whose ``resource_metadata`` points there,
  and a token without a scope a handler requires gets ``403 insufficient_scope``
  naming the scopes, so a client can step up;
- a handler's ``scopes=[...]`` restrict OAuth access tokens and MCP tokens created
  with scopes (:mod:`mcp_django.tokens`): a session cookie or a DRF token is the
  user's own credential and carries all of the user's authority, as in DRF.

Which tokens are valid (issuer, audience, expiry, revocation) is the job of the
configured authentication class, e.g. :class:`mcp_django.contrib.oauth.OAuth2Authentication`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.http import Http404, HttpRequest, JsonResponse
from django.urls import Resolver404, resolve

from . import endpoints
from .conf import EndpointSettings, mcp_settings

if TYPE_CHECKING:
    from .registry import Registry

WELL_KNOWN = "/.well-known/oauth-protected-resource"
DEFAULT_PATH = "/mcp"


def add_endpoint_path(path: str, registry: Registry | None = None) -> None:
    """Record that an ASGI route serves ``registry``'s endpoint at ``path`` (its metadata may be asked for)."""
    endpoints.add_path(path, registry)


def endpoint_at(path: str) -> Registry | None:
    """The registry of the MCP endpoint served at ``path``: an ASGI route's, the URLconf's
    view's, or the one whose RESOURCE_URL names that path; None for any other path.

    Metadata is served only for those: a resource indicator for ``/admin`` or any other
    path would tell a client that path is a resource these authorization servers guard.
    """
    path = "/" + path.strip("/")
    routed, registry = endpoints.routed_at(path)
    if routed:
        return registry or endpoints.named(endpoints.DEFAULT)
    for candidate in endpoints.every():
        resource = candidate.settings.RESOURCE_URL
        if resource and (urlsplit(resource).path.rstrip("/") or "/") == path:
            return candidate
    for url in (path, path + "/"):
        try:
            match = resolve(url)
        except Resolver404:
            continue
        # The endpoint's view (mcp_django.transports.views.mcp_view, which says so), from
        # mcp_django.urls or a project's own route to it with another endpoint's registry.
        if getattr(match.func, "mcp_endpoint_view", False):
            return match.kwargs.get("registry") or endpoints.named(endpoints.DEFAULT)
    return None


def is_endpoint_path(path: str) -> bool:
    """Whether an MCP endpoint is served at ``path`` (see :func:`endpoint_at`)."""
    return endpoint_at(path) is not None


def _origin(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


_DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=256)
def canonical_resource(uri: str) -> str | None:
    """``uri`` in the canonical form of a resource identifier (RFC 8707, RFC 9728, MCP
    authorization), or None when it cannot name an HTTP resource.

    Scheme and host lower-case, the scheme's default port dropped, an empty path and ``/``
    the same (RFC 3986 section 6.2.3: the origin, written without the slash); every other
    path and any query kept as written, so ``/mcp/`` and ``/mcp`` are two resources. A
    fragment or userinfo makes it no resource identifier at all (RFC 8707 section 2).
    """
    if not isinstance(uri, str) or "#" in uri:
        return None
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host or parts.username is not None or parts.password is not None:
        return None
    if ":" in host:  # an IPv6 literal, which urlsplit hands back without its brackets
        host = f"[{host}]"
    authority = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = "" if parts.path == "/" else parts.path
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{authority}{path}{query}"


def resource_url(request: HttpRequest, path: str | None = None, endpoint: EndpointSettings | None = None) -> str:
    """The canonical URL of the endpoint ``request`` reached (or of ``path`` on its host).

    What the metadata advertises, what a state is sealed for, and the one resource an
    access token must have been issued for (:func:`canonical_resource`: never with a
    trailing slash, so the endpoint served at ``/mcp/`` too is the resource ``…/mcp``).

    ``endpoint``: its settings (by default, those of the endpoint ``request`` reached).
    """
    resource = (endpoint or mcp_settings.for_request(request)).RESOURCE_URL
    if resource:
        resource = resource.rstrip("/")
    else:
        path = (path if path is not None else request.path).rstrip("/") or DEFAULT_PATH
        resource = _origin(request) + path
    return canonical_resource(resource) or resource


def metadata_url(request: HttpRequest) -> str:
    """Where the protected-resource metadata of the endpoint ``request`` reached lives."""
    resource = urlsplit(resource_url(request))
    return f"{resource.scheme}://{resource.netloc}{WELL_KNOWN}{resource.path}"


def _quote(value: str) -> str:
    # A quoted-string (RFC 9110): no way out of the quotes, no header injection.
    return '"' + value.replace("\r", "").replace("\n", "").replace("\\", "\\\\").replace('"', '\\"') + '"'


def operation_scopes(handler_scopes: Any = (), endpoint: EndpointSettings | None = None) -> list[str]:
    """Every scope an operation needs: the endpoint's ``REQUIRED_SCOPES``, then its handler's.

    What a 403 ``insufficient_scope`` names. Clients that ask for exactly the challenged
    scopes (``mcp`` 1.x for Python) would otherwise trade the endpoint's scope for the
    handler's, and be refused for good; the specification asks clients to add the
    challenge to the scopes they hold, and servers to name what the operation needs
    (RFC 6750 section 3.1), not what the token was granted.
    """
    scopes = list((endpoint or mcp_settings.endpoint("default")).REQUIRED_SCOPES)
    scopes += [scope for scope in handler_scopes if scope not in scopes]
    return scopes


def challenge(
    request: HttpRequest,
    error: str | None = None,
    description: str | None = None,
    scope: str = "",
    *,
    scheme: str | None = None,
    metadata: bool = True,
) -> str:
    """A ``WWW-Authenticate`` value pointing at the metadata (RFC 6750, RFC 9728).

    ``Bearer``, and where the endpoint takes DPoP-bound tokens (its ``DPOP`` setting) a
    ``DPoP`` challenge naming the proof algorithms (RFC 9449 section 7.1): after the
    ``Bearer`` one when both are accepted, alone when DPoP is required. ``scheme`` says which
    the error is for (by default DPoP where it is required, Bearer otherwise); ``metadata``
    False leaves ``resource_metadata`` out (an endpoint that is no OAuth protected resource).
    """
    endpoint = mcp_settings.for_request(request)
    scope = scope or " ".join(endpoint.REQUIRED_SCOPES)
    dpop = endpoint.DPOP
    # Where the endpoint takes no DPoP, its one challenge carries the error (a bound token
    # sent as a bearer token is refused there too). Otherwise the error is for the scheme the
    # request used (a DPoP-bound token lacking a scope), or the one the endpoint requires.
    if scheme is None and request.META.get("HTTP_AUTHORIZATION", "")[:5].lower() == "dpop ":
        scheme = "DPoP"
    erring = "bearer" if dpop == "off" else (scheme or ("DPoP" if dpop == "required" else "Bearer")).lower()

    def one(name: str, extra: list[tuple[str, str]]) -> str:
        params = [("realm", "mcp")]
        if error and erring == name.lower():
            params.append(("error", error))
            if description:
                params.append(("error_description", description))
        if scope:
            params.append(("scope", scope))
        params += extra
        if metadata:
            params.append(("resource_metadata", metadata_url(request)))
        return f"{name} " + ", ".join(f"{key}={_quote(value)}" for key, value in params)

    if dpop == "off":
        return one("Bearer", [])
    proof = one("DPoP", [("algs", " ".join(endpoint.DPOP_ALGORITHMS))])
    return proof if dpop == "required" else f"{one('Bearer', [])}, {proof}"


def enabled(endpoint: EndpointSettings | None = None) -> bool:
    return bool((endpoint or mcp_settings.endpoint("default")).AUTHORIZATION_SERVERS)


def metadata(request: HttpRequest, resource_path: str = "", *, registry: Registry | None = None) -> JsonResponse:
    """RFC 9728 protected-resource metadata, at the root and the path-suffixed location.

    The path names the endpoint (``/.well-known/oauth-protected-resource/staff/mcp``: the
    one served at ``/staff/mcp``), its settings say what the document holds, and its
    handlers' scopes are listed unless ``SCOPES_SUPPORTED`` says otherwise. At the root,
    ``registry`` (given by the URLconf; the default endpoint without one) is the endpoint.
    """
    path = "/" + resource_path.strip("/") if resource_path else None
    if path is not None:
        found = endpoint_at(path)
        if found is None:
            raise Http404("No MCP endpoint is served at this path.")
        registry = found
    registry = registry or endpoints.named(endpoints.DEFAULT)
    if registry is None:
        raise Http404("No MCP endpoint is served here.")
    endpoint = registry.settings
    if not enabled(endpoint):
        raise Http404("This MCP endpoint is not an OAuth protected resource.")
    servers = [server if "://" in server else _origin(request) + server for server in endpoint.AUTHORIZATION_SERVERS]
    data: dict[str, Any] = {
        "resource": resource_url(request, path or DEFAULT_PATH, endpoint),
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
    }
    scopes = endpoint.SCOPES_SUPPORTED
    if scopes is None:
        handlers = registry.all_handlers()
        scopes = sorted({*endpoint.REQUIRED_SCOPES, *(scope for handler in handlers for scope in handler.scopes)})
    if scopes:
        data["scopes_supported"] = scopes
    if endpoint.DPOP != "off":
        # RFC 9449 section 5.2.
        data["dpop_signing_alg_values_supported"] = list(endpoint.DPOP_ALGORITHMS)
        data["dpop_bound_access_tokens_required"] = endpoint.DPOP == "required"
    response = JsonResponse(data)
    # Browser-based clients read it from another origin.
    response["Access-Control-Allow-Origin"] = "*"
    return response
