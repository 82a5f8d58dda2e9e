"""Who is calling: the Django user, found by the configured DRF authentication classes."""

from __future__ import annotations

import functools
import logging
from importlib import import_module
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from . import protected_resource
from .conf import DERIVED, EndpointSettings, mcp_settings
from .keyring import keyring, principal_digests, principal_matches

__all__ = ["ANONYMOUS", "AuthenticationFailed", "Principal", "SessionAuthentication"]


logger = logging.getLogger("mcp_django")


class Principal:
    """The caller as the state binds it: a stable label, and its keyed hash for requestState.

    The hash (:attr:`digest`) names ``date_joined`` and the password hash too, so an account
    created later with a deleted user's id cannot continue that user's flows or sessions, and
    a password change ends them (as Django ends the user's login sessions)."""

    __slots__ = ("__dict__", "auth", "label", "user")

    def __init__(self, user: Any, auth: Any = None, label: str | None = None) -> None:
        self.user = user
        # The credential the user was found by (DRF's request.auth: a token, or None).
        self.auth = auth
        if label is not None:
            self.label = label  # a principal found earlier: the user model's options are not read again
        elif user is None or not user.is_authenticated:
            self.user = user or AnonymousUser()
            self.label = "anonymous"
        else:
            self.label = f"{user._meta.label_lower}:{user.pk}"
        # An attribute, not a property: read by every call's checks.
        self.is_anonymous = self.label == "anonymous"

    @property
    def binding(self) -> str:
        """What the digest is computed from (secret material: never logged or sent)."""
        if self.is_anonymous:
            return self.label
        parts = [self.label]
        joined = getattr(self.user, "date_joined", None)
        if joined is not None:
            parts.append(joined.isoformat())
        password = getattr(self.user, "password", None)
        if isinstance(password, str):
            parts.append(password)
        return "\0".join(parts)

    @property
    def digests(self) -> tuple[str, ...]:
        """The keyed hash under every key of the ring, the signing key's first."""
        ring = keyring()
        found = self.__dict__.get("_digests")
        if found is None or found[0] is not ring:  # computed anew when the keys change
            found = (ring, principal_digests(self.binding))
            self.__dict__["_digests"] = found
        return found[1]

    @property
    def digest(self) -> str:
        """The keyed hash a new state or session carries."""
        return self.digests[0]

    def matches(self, claimed: str) -> bool:
        """Whether a state's or session's principal hash names this caller (under any key)."""
        return principal_matches(claimed, self.digests)

    def __repr__(self) -> str:
        return f"<Principal {self.label}>"


ANONYMOUS = Principal(None)


class SessionAuthentication(authentication.BaseAuthentication):
    """Django's session cookie, without DRF's CSRF check: the endpoint refuses foreign ``Origin``
    headers and bodies that are not ``application/json`` (which a cross-site form cannot send
    without a CORS preflight), so CSRF tokens add nothing there, and MCP clients cannot send them."""

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        # The session goes on the MCP request itself (views called as tools see it). DRF gives an
        # authentication class no public way to the HttpRequest its Request wraps; DRF's own
        # SessionAuthentication reads request._request too.
        django_request = request._request
        key = django_request.COOKIES.get(settings.SESSION_COOKIE_NAME)
        if not key:
            return None
        engine = import_module(settings.SESSION_ENGINE)
        django_request.session = engine.SessionStore(key)
        user = get_user(django_request)
        if not user.is_authenticated or not user.is_active:
            return None
        return user, None


# Classes known to read nothing but the Authorization and Cookie headers. Exact classes:
# a subclass may read anything (a query parameter, the body) unless it opts in.
_HEADER_ONLY: frozenset[type] = frozenset(
    {
        SessionAuthentication,
        authentication.SessionAuthentication,
        authentication.TokenAuthentication,
        authentication.BasicAuthentication,
    }
)


def _reads_only_headers(endpoint: EndpointSettings) -> bool:
    """Whether the endpoint's principals may be cached by the Authorization and session cookie values:
    a class opts in with ``mcp_reads_only_headers = True`` in its own body (docs/index.md)."""
    return all(
        isinstance(cls, type) and (cls in _HEADER_ONLY or cls.__dict__.get("mcp_reads_only_headers") is True)
        for cls in endpoint.AUTHENTICATION_CLASSES
    )


@functools.cache
def url_headers() -> tuple[str, ...]:
    """The headers ``request.scheme`` and ``request.get_host()`` may read, besides ``Host``
    (forgotten when ``SECURE_PROXY_SSL_HEADER`` changes, by ``auth_cache``)."""
    names = ["host", "x-forwarded-host", "x-forwarded-port"]
    proxy_ssl = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_ssl:
        names.append(str(proxy_ssl[0]).removeprefix("HTTP_").lower().replace("_", "-"))
    return tuple(names)


class Connection:
    """A connection whose requests are checked more than once (a websocket), as
    ``request.mcp_connection``: an authentication class may keep on it what it checked at the
    upgrade, to hold the later checks to it (a DPoP proof's key: ``mcp_django.contrib.dpop``)."""


class AuthenticationFailed(Exception):
    """The caller may not in; ``challenge`` is the ``WWW-Authenticate`` value of the 401."""

    def __init__(
        self,
        detail: str,
        status: int = 401,
        challenge: str | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.challenge = challenge
        # More response headers the refusal needs (a DPoP-Nonce, RFC 9449 section 9).
        self.headers = headers


def challenge_for(django_request: Any, drf_request: Request) -> str | None:
    """What a 401 asks for: a ``Bearer`` challenge pointing at the protected-resource metadata
    when the endpoint is an OAuth protected resource (what MCP clients follow), otherwise the
    first configured class's own. ``drf_request``: the Request the classes saw (with the OAuth error)."""
    endpoint = mcp_settings.for_request(django_request)
    if protected_resource.enabled(endpoint):
        return protected_resource.challenge(django_request, refused=drf_request)
    for cls in endpoint.AUTHENTICATION_CLASSES:
        header = cls().authenticate_header(drf_request)
        if header:
            return str(header)
    return None


def refuse_anonymous(django_request: Any, endpoint: EndpointSettings) -> AuthenticationFailed:
    """The 401 for a caller who sent no credentials where anonymous callers are not served."""
    django_request.mcp_endpoint = endpoint
    return AuthenticationFailed(
        "Authentication credentials were not provided.",
        challenge=challenge_for(django_request, Request(django_request)),
    )


# endpoint.reads_only_headers: worked out once per settings, kept with the endpoint's.
DERIVED["reads_only_headers"] = _reads_only_headers


def token_model_missing(cls: type) -> bool:
    """DRF's TokenAuthentication (or a subclass on its Token model) without its app installed."""
    return (
        issubclass(cls, authentication.TokenAuthentication)
        and cls.model is None
        and not apps.is_installed("rest_framework.authtoken")
    )


def authenticate(django_request: Any, endpoint: EndpointSettings) -> Principal:
    """Sync (the classes query the database; its connections are the caller's to care for). Raises
    :class:`AuthenticationFailed`. ``endpoint``: the settings of the endpoint reached, whose classes
    run and find them as ``request.mcp_endpoint``."""
    django_request.mcp_endpoint = endpoint
    classes = endpoint.AUTHENTICATION_CLASSES
    drf_request = Request(django_request)
    try:
        for cls in classes:
            found = cls().authenticate(drf_request)
            if found is not None:
                user = found[0]
                django_request.user = user
                return Principal(user, found[1])
    except APIException as exc:
        found = getattr(drf_request, "oauth2_error", None) or {}
        raise AuthenticationFailed(
            str(exc.detail), exc.status_code, challenge_for(django_request, drf_request), found.get("headers")
        ) from None
    except Exception:
        if not token_model_missing(cls):
            raise
        # The caller's credentials cannot be checked: theirs to hear (not a 500),
        # the operator's to fix (check mcp_django.E012).
        logger.error("%s needs 'rest_framework.authtoken' in INSTALLED_APPS (check mcp_django.E012).", cls.__name__)
        raise AuthenticationFailed(
            "These credentials cannot be checked: the server's authentication is misconfigured."
        ) from None
    django_request.user = AnonymousUser()
    return ANONYMOUS
