"""Who is calling: the Django user, found by the configured DRF authentication classes."""

from __future__ import annotations

from functools import cached_property
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import close_old_connections
from rest_framework import authentication
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from .conf import mcp_settings


class Principal:
    """The caller as the state binds it: a stable label, and its keyed hash for requestState."""

    __slots__ = ("user", "label", "__dict__")

    def __init__(self, user: Any) -> None:
        self.user = user
        if user is None or not user.is_authenticated:
            self.user = user or AnonymousUser()
            self.label = "anonymous"
        else:
            self.label = f"{user._meta.label_lower}:{user.pk}"

    @property
    def is_anonymous(self) -> bool:
        return self.label == "anonymous"

    @cached_property
    def digest(self) -> str:
        from .state import principal_digest

        return principal_digest(self.label)

    def __repr__(self) -> str:
        return f"<Principal {self.label}>"


ANONYMOUS = Principal(None)


class SessionAuthentication(authentication.BaseAuthentication):
    """Django's session cookie, without DRF's CSRF check.

    The MCP endpoint refuses foreign ``Origin`` headers and bodies that are not
    ``application/json`` (which a cross-site form cannot send without a CORS
    preflight), so CSRF tokens add nothing there, and MCP clients cannot send them.
    """

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        from django.contrib.auth import get_user

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


# Classes known to look only at the Authorization header or the Cookie header.
_HEADER_BOUND = (
    SessionAuthentication,
    authentication.SessionAuthentication,
    authentication.TokenAuthentication,
    authentication.BasicAuthentication,
)


class AuthenticationFailed(Exception):
    def __init__(self, detail: str, status: int = 401) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


def may_carry_credentials(headers: dict[str, str]) -> bool:
    """False only when no configured class could find credentials: then no thread hop is needed."""
    if "authorization" in headers or "cookie" in headers:
        return True
    return not all(issubclass(cls, _HEADER_BOUND) for cls in mcp_settings.AUTHENTICATION_CLASSES)


def authenticate(django_request: Any) -> Principal:
    """Sync (the classes query the database). Raises :class:`AuthenticationFailed`."""
    drf_request = Request(django_request)
    try:
        for cls in mcp_settings.AUTHENTICATION_CLASSES:
            found = cls().authenticate(drf_request)
            if found is not None:
                user = found[0]
                django_request.user = user
                return Principal(user)
    except APIException as exc:
        raise AuthenticationFailed(str(exc.detail), exc.status_code) from None
    finally:
        close_old_connections()
    django_request.user = AnonymousUser()
    return ANONYMOUS
