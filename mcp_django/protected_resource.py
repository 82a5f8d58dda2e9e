"""The endpoint as an OAuth 2.1 protected resource (MCP authorization): its RFC 9728 metadata,
and the ``WWW-Authenticate`` challenges that point clients there (which tokens are valid is
the authentication classes' job)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from django.http import Http404, HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from rest_framework.exceptions import AuthenticationFailed

from . import endpoints
from .conf import EndpointSettings, mcp_settings

if TYPE_CHECKING:
    from .registry import Registry

WELL_KNOWN = "/.well-known/oauth-protected-resource"
DEFAULT_PATH = "/mcp"


def endpoint_at(path: str) -> Registry | None:
    """The registry of the MCP endpoint served at ``path``: an ASGI route's, the URLconf's
    view's, or the one whose RESOURCE_URL names that path; None for any other path (whose
    metadata would tell a client it is a resource these authorization servers guard)."""
    path = "/" + path.strip("/")
    if path in endpoints.paths:
        return endpoints.paths[path] or endpoints.named(endpoints.DEFAULT)
    for candidate in endpoints.every():
        resource = candidate.settings.RESOURCE_URL
        if resource and (urlsplit(resource).path.rstrip("/") or "/") == path:
            return candidate
    for url in (path, path + "/"):
        try:
            match = resolve(url)
        except Resolver404:
            continue
        # The endpoint's view (mcp_django.transports.views.mcp_view), with its registry.
        if getattr(match.func, "mcp_endpoint_view", False):
            return match.kwargs.get("registry") or endpoints.named(endpoints.DEFAULT)
    return None


def _origin(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


_DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=256)
def canonical_resource(uri: str) -> str | None:
    """``uri`` as a canonical resource identifier (RFC 8707), or None when it names no HTTP resource.

    Scheme and host lower-case, the default port dropped, the path ``/`` written as none
    (RFC 3986 section 6.2.3); other paths and a query kept as written (``/mcp/`` is not
    ``/mcp``). A fragment or userinfo makes it none (RFC 8707 section 2)."""
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
    """The canonical URL of the endpoint ``request`` reached (or of ``path`` on its host), with
    ``endpoint``'s settings: what the metadata advertises, what a state is sealed for and
    the resource an access token must be issued for. Never with a trailing slash."""
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
    """Every scope an operation needs, what a 403 ``insufficient_scope`` names: the endpoint's
    ``REQUIRED_SCOPES``, then its handler's (a client asking for exactly the challenged scopes
    would otherwise trade the endpoint's for the handler's, RFC 6750 section 3.1)."""
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
    refused: Any = None,
) -> str:
    """A ``WWW-Authenticate`` value pointing at the metadata (RFC 6750, RFC 9728), with a ``DPoP``
    challenge (RFC 9449 section 7.1) where the endpoint's ``DPOP`` takes bound tokens. ``scheme``:
    which the error is for; ``refused``: a request (DRF's) an authentication class refused, whose
    error (:func:`refuse`) it names."""
    if refused is not None:
        found = getattr(refused, "oauth2_error", None) or {}
        error, description, scheme = found.get("error"), found.get("error_description"), found.get("scheme")
    endpoint = mcp_settings.for_request(request)
    scope = scope or " ".join(endpoint.REQUIRED_SCOPES)
    dpop = endpoint.DPOP
    # The error goes with the scheme the request used, else the one the endpoint requires.
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


def refuse(
    request: Any, description: str, error: str = "invalid_token", *, scheme: str | None = None, headers: Any = None
) -> NoReturn:
    """Raise DRF's ``AuthenticationFailed``, leaving on ``request`` (DRF's) what its challenge names
    (:func:`challenge`'s ``refused``) and the response headers the refusal needs (a DPoP-Nonce)."""
    request.oauth2_error = {"error": error, "error_description": description, "scheme": scheme, "headers": headers}
    raise AuthenticationFailed(description)


def enabled(endpoint: EndpointSettings | None = None) -> bool:
    return bool((endpoint or mcp_settings.endpoint("default")).AUTHORIZATION_SERVERS)


def metadata(request: HttpRequest, resource_path: str = "", *, registry: Registry) -> JsonResponse:
    """RFC 9728 protected-resource metadata, at the root (of ``registry``'s endpoint: mcp_django.urls
    passes the default one) and the path-suffixed location (of the endpoint served at that path)."""
    path = "/" + resource_path.strip("/") if resource_path else None
    if path is not None:
        found = endpoint_at(path)
        if found is None:
            raise Http404("No MCP endpoint is served at this path.")
        registry = found
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
