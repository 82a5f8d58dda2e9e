"""Who is calling: the Django user, found by the configured DRF authentication classes."""

from __future__ import annotations

import copy
import hashlib
import logging
import time
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

logger = logging.getLogger("mcp_django")


class Principal:
    """The caller as the state binds it: a stable label, and its keyed hash for requestState."""

    __slots__ = ("__dict__", "label", "user")

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

_header_bound: tuple[object, bool] | None = None


def header_bound_only() -> bool:
    """True when every configured class reads only ``Authorization`` or ``Cookie``.

    Asked on every request; the answer is kept for the settings' list of classes.
    """
    global _header_bound
    classes = mcp_settings.AUTHENTICATION_CLASSES
    if _header_bound is None or _header_bound[0] is not classes:
        _header_bound = (classes, all(issubclass(cls, _HEADER_BOUND) for cls in classes))
    return _header_bound[1]


class PrincipalCache:
    """Principals found recently, by a digest of the credentials that found them.

    Authentication costs a worker-thread hop and a query on every request; an
    MCP client sends the same token many times a second. Entries live
    ``AUTH_CACHE_SECONDS`` (0 turns the cache off). Saving or deleting a user or
    a token clears the cache of this process at once; other processes see a
    revoked token or a deactivated user once their entry expires.
    """

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[float, Any]] = {}

    @staticmethod
    def key(headers: dict[str, str]) -> bytes | None:
        if not header_bound_only():
            return None  # a custom class may look at anything: no safe key
        session = ""
        cookie = headers.get("cookie")
        if cookie:
            from django.http.cookie import parse_cookie

            session = parse_cookie(cookie).get(settings.SESSION_COOKIE_NAME, "")
        material = f"{headers.get('authorization', '')}\0{session}".encode()
        return hashlib.sha256(material).digest()

    def get(self, key: bytes) -> Principal | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            self._entries.pop(key, None)
            return None
        # A copy of the user, as a fresh request would load it: a handler that changes
        # request.user must not change the next caller's, and permissions are looked up
        # anew (Django caches them on the user object).
        user = copy.copy(entry[1])
        for attr in _PER_REQUEST_ATTRS:
            user.__dict__.pop(attr, None)
        return Principal(user)

    def put(self, key: bytes, principal: Principal) -> None:
        ttl = mcp_settings.AUTH_CACHE_SECONDS
        if ttl <= 0 or principal.is_anonymous:
            return
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (time.monotonic() + ttl, principal.user)

    def clear(self, *args: Any, **kwargs: Any) -> None:
        self._entries.clear()


# What Django's permission backends cache on a user object for one request.
_PER_REQUEST_ATTRS = ("_perm_cache", "_user_perm_cache", "_group_perm_cache")

principal_cache = PrincipalCache()


def connect_cache_invalidation() -> None:
    """Clear cached principals whenever a user or a token changes (called from AppConfig.ready)."""
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.db.models.signals import m2m_changed, post_delete, post_save

    user_model = get_user_model()
    models = [user_model]
    for relation in ("groups", "user_permissions"):
        through = getattr(getattr(user_model, relation, None), "through", None)
        if through is not None:
            m2m_changed.connect(principal_cache.clear, sender=through, dispatch_uid=f"mcp_django_auth_{relation}")
    if apps.is_installed("rest_framework.authtoken"):
        from rest_framework.authtoken.models import Token

        models.append(Token)
    for model in models:
        post_save.connect(principal_cache.clear, sender=model, dispatch_uid=f"mcp_django_auth_{model._meta.label}_save")
        post_delete.connect(
            principal_cache.clear, sender=model, dispatch_uid=f"mcp_django_auth_{model._meta.label}_delete"
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
    return not header_bound_only()


def token_model_missing(cls: type) -> bool:
    """DRF's TokenAuthentication (or a subclass on its Token model) without its app installed."""
    from django.apps import apps

    return (
        issubclass(cls, authentication.TokenAuthentication)
        and cls.model is None
        and not apps.is_installed("rest_framework.authtoken")
    )


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
    except Exception:
        if not token_model_missing(cls):
            raise
        # The caller's credentials cannot be checked: theirs to hear (not a 500),
        # the operator's to fix (check mcp_django.E012).
        logger.error("%s needs 'rest_framework.authtoken' in INSTALLED_APPS (check mcp_django.E012).", cls.__name__)
        raise AuthenticationFailed(
            "These credentials cannot be checked: the server's authentication is misconfigured."
        ) from None
    finally:
        close_old_connections()
    django_request.user = AnonymousUser()
    return ANONYMOUS
