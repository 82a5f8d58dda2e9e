"""Principals found recently, served while their user's version is unchanged, and the receivers
that change it (docs/index.md, "Authentication and the endpoint's defences")."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from django.apps import apps
from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.auth.signals import user_logged_out
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.http.cookie import parse_cookie
from django.utils import timezone

from .auth import Principal, authenticate, url_headers
from .breaker import Breaker
from .conf import EndpointSettings, mcp_settings

__all__ = ["principal_changed"]

# How long a user's version is kept in the shared cache: a lost one matches no entry.
VERSION_TIMEOUT = 7 * 86400

# Session engines whose deleted (logged-out, flushed) sessions send post_delete,
# or that Django itself cannot revoke (signed cookies).
_SIGNALLED_SESSION_ENGINES = frozenset(
    f"django.contrib.sessions.backends.{engine}" for engine in ("db", "cached_db", "signed_cookies")
)

# What Django's permission backends cache on a user object for one request.
_PER_REQUEST_ATTRS = ("_perm_cache", "_user_perm_cache", "_group_perm_cache")


def version_key(label: str) -> str:
    return f"mcp_django:principal:{label}"


def _label(user_model: Any, pk: Any) -> str:
    return f"{user_model._meta.label_lower}:{pk}"


def _new_version() -> int:
    return int.from_bytes(os.urandom(7), "big")


# Up to this many seconds the cache is process-local (nothing read from another service):
# a change made by any means holds within this bound.
LOCAL_ONLY_SECONDS = 1.0

# How long a shared cache that failed is left alone before it is tried again.
BREAKER_SECONDS = 5.0


class _Shared:
    """Where the users' versions live: a dict of this process (the short cache, or a
    local-memory shared cache, which other processes cannot see anyway), or the shared cache."""

    MAX_LOCAL = 100_000

    def __init__(self) -> None:
        self.alias = mcp_settings.SESSION_CACHE
        self.local = mcp_settings.AUTH_CACHE_SECONDS <= LOCAL_ONLY_SECONDS or isinstance(
            caches[self.alias], LocMemCache
        )
        self.versions: dict[str, int] = {}
        self.breaker = Breaker(
            f"MCP_DJANGO['SESSION_CACHE'] ({self.alias!r})",
            retry=BREAKER_SECONDS,
            meanwhile=f"cached principals are not served, and it is asked again every {BREAKER_SECONDS:g} s",
        )

    def _shared(self, use: Callable[[Any], Any], failed: Any) -> Any:
        """``use(cache)`` on the shared cache (sync: from a worker thread); ``failed`` while it is away."""
        try:
            if not self.breaker.admit():
                return failed
            found = use(caches[self.alias])
        except Exception as exc:
            if self.breaker.failed(exc):
                # A change made elsewhere during the outage may not have reached the versions:
                # nothing remembered before it is trusted after it.
                principal_cache.clear()
            return failed
        self.breaker.closed()
        return found

    def get(self, key: str) -> Any:
        """The version of ``key``; None when it has none or the shared cache cannot say."""
        if self.local:
            return self.versions.get(key)
        return self._shared(lambda cache: cache.get(key), None)

    def create(self, key: str) -> Any:
        """The version of ``key``, made now if it has none (None: nothing can vouch for an entry)."""
        if self.local:
            if len(self.versions) >= self.MAX_LOCAL:
                self.versions.clear()  # every entry then misses once: safe
            return self.versions.setdefault(key, _new_version())

        def create(cache: Any) -> Any:
            cache.add(key, _new_version(), VERSION_TIMEOUT)
            return cache.get(key)

        return self._shared(create, None)

    def set(self, key: str, version: int) -> bool:
        """False when the shared cache could not be told (its readers must then be distrusted)."""
        if self.local:
            self.versions[key] = version
            return True

        def store(cache: Any) -> bool:
            cache.set(key, version, VERSION_TIMEOUT)
            return True

        return self._shared(store, False)


_shared: _Shared | None = None


def shared() -> _Shared:
    global _shared
    if _shared is None or _shared.alias != mcp_settings.SESSION_CACHE:
        _shared = _Shared()
    return _shared


def _fresh_copy(user: Any) -> Any:
    """A copy of a cached user without its permission caches, as a fresh request would load it:
    what ``copy.copy`` does for a model, without the pickle protocol's round trip
    (``Model.__reduce__``, ``__getstate__``, ``__setstate__``'s version check). Kept for the
    paired bench (docs/performance.md): token auth with 8 connections 2.36x and 2.26x the SDK's
    echo against 2.09x and 2.06x with ``copy.copy`` (CPU 166-170 against 175-181 µs a request),
    2026-12-05; about 7 µs against 20 µs a copy."""
    data = {name: value for name, value in user.__dict__.items() if name not in _PER_REQUEST_ATTRS}
    old_state = data.get("_state")
    if old_state is not None:
        state = data["_state"] = object.__new__(type(old_state))
        state.__dict__.update({name: value for name, value in old_state.__dict__.items() if name != "peers"})
        if "fields_cache" in state.__dict__:
            state.__dict__["fields_cache"] = state.__dict__["fields_cache"].copy()
    fresh = object.__new__(type(user))
    fresh.__dict__.update(data)
    return fresh


class PrincipalCache:
    """Entries: credential hash -> (expiry, user, credential, version key, version seen, label)."""

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[float, Any, Any, str, Any, str]] = {}
        # Authentications under way: key -> (resolved when it ends, time.monotonic() at its start).
        self._pending: dict[bytes, tuple[asyncio.Future[None], float]] = {}

    @staticmethod
    def key(headers: dict[str, str], endpoint: str, settings_of: EndpointSettings | None = None) -> bytes | None:
        """The hash of what the classes' verdict may depend on, or None when there is no safe one.
        ``endpoint`` names the URL the request reached (an OAuth token is valid at one resource only)."""
        if not (settings_of or mcp_settings.endpoint("default")).reads_only_headers:
            return None  # a custom class may look at anything: no safe key
        if "dpop" in headers or headers.get("authorization", "")[:5].lower() == "dpop ":
            return None  # a DPoP proof is checked (and its jti spent) on each request: never a hit
        session = ""
        cookie = headers.get("cookie")
        if cookie:
            session = parse_cookie(cookie).get(settings.SESSION_COOKIE_NAME, "")
            if session and settings.SESSION_ENGINE not in _SIGNALLED_SESSION_ENGINES:
                return None  # a deleted session would go unnoticed
        # With the URL's headers ("" for each one absent): what names the URL a request reached.
        parts = [headers.get("authorization", ""), session, endpoint]
        parts += [headers.get(name, "") for name in url_headers()]
        # As one JSON array: no two different requests hash the same material.
        try:
            material = orjson.dumps(parts)
        except orjson.JSONEncodeError:
            return None  # a string JSON cannot hold (a lone surrogate): no key, authenticated anew
        return hashlib.sha256(material).digest()

    async def get(self, key: bytes) -> Principal | None:
        """The principal remembered for ``key``, if its user has not changed since."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, user, auth, vkey, version, label = entry
        if expires >= time.monotonic():
            store = shared()
            if store.local:
                current = store.get(vkey)
            elif store.breaker.open:
                current = None  # the shared cache failed a moment ago: authenticate anew, without waiting on it
            else:
                from .asks.invoke import run_in_thread

                current = await run_in_thread(store.get, vkey)
            if current == version:  # never None: remember() stores no entry without a version
                return Principal(_fresh_copy(user), auth, label)
        self._entries.pop(key, None)
        return None

    async def after_pending(self, key: bytes) -> Principal | None:
        """What an authentication of ``key`` already under way (on this loop, started within the
        cache's seconds) finds once it ends, through :meth:`get`; None without one. An entry expires
        for every connection at once: they wait for one authentication, not each for its own."""
        future, started = self._pending.get(key, (None, 0.0))
        if (
            future is None
            or future.get_loop() is not asyncio.get_running_loop()
            or time.monotonic() - started >= mcp_settings.AUTH_CACHE_SECONDS
        ):
            return None
        # Shielded: a waiter cancelled (its client gone) must not end the wait of the others.
        await asyncio.shield(future)
        return await self.get(key)

    @contextlib.contextmanager
    def leading(self, key: bytes | None) -> Iterator[None]:
        """Around the authentication of ``key``: requests with the same key meanwhile wait for it
        (:meth:`after_pending`); however it ends, they are woken."""
        if key is None or mcp_settings.AUTH_CACHE_SECONDS <= 0:
            yield
            return
        future = asyncio.get_running_loop().create_future()
        self._pending[key] = (future, time.monotonic())
        try:
            yield
        finally:
            if self._pending.get(key, (None, 0.0))[0] is future:
                del self._pending[key]
            future.set_result(None)

    def remember(self, key: bytes, principal: Principal) -> None:
        """Sync, right after the classes found ``principal``. The version is read after
        authenticating: a change committed meanwhile has bumped it already."""
        ttl = mcp_settings.AUTH_CACHE_SECONDS
        # Read first: a pause between the two readings shortens the entry, never stretches it.
        now = time.monotonic()
        expires = getattr(principal.auth, "expires", None)
        if isinstance(expires, datetime.datetime):
            # An expiring credential (an OAuth access token) is not remembered past its expiry.
            ttl = min(ttl, (expires - timezone.now()).total_seconds())
        if ttl <= 0 or principal.is_anonymous:
            return
        vkey = version_key(principal.label)
        version = shared().create(vkey)
        if version is None:
            return  # a cache that keeps nothing, or one that failed: nothing could tell it is stale
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (now + ttl, principal.user, principal.auth, vkey, version, principal.label)

    def clear(self) -> None:
        self._entries.clear()


principal_cache = PrincipalCache()


def authenticate_and_remember(request: Any, key: bytes | None, endpoint: EndpointSettings) -> Principal:
    """Sync: run the endpoint's authentication classes, and cache what they found under ``key``."""
    principal = authenticate(request, endpoint)
    if key is not None:
        principal_cache.remember(key, principal)
    return principal


def principal_changed(user: Any = None, *, label: str | None = None, using: str | None = None) -> None:
    """Make every process authenticate ``user`` anew on its next request (call it from a custom
    authentication class's revocation path). In a transaction, again at commit."""
    if label is None:
        if user is None or user.pk is None:
            return
        label = _label(user, user.pk)
    _bump(label)
    if connections[using or DEFAULT_DB_ALIAS].in_atomic_block:
        transaction.on_commit(lambda: _bump(label), using=using)


def _bump(label: str) -> None:
    if not shared().set(version_key(label), _new_version()):
        # This process forgets every entry; others keep theirs until AUTH_CACHE_SECONDS pass.
        principal_cache.clear()


def connect() -> None:
    """Connect the receivers that keep the cache honest (called from AppConfig.ready)."""
    user_model = get_user_model()

    def user_changed(
        sender: Any, instance: Any, update_fields: Any = None, using: str | None = None, **kw: Any
    ) -> None:
        if update_fields is not None and set(update_fields) <= {"last_login"}:
            return  # every login saves last_login; it changes nothing a credential finds
        principal_changed(instance, using=using)

    def relation_changed(
        sender: Any, instance: Any, action: str, pk_set: Any, using: str | None = None, **kw: Any
    ) -> None:
        if not action.startswith("post_"):
            return
        if isinstance(instance, user_model):
            principal_changed(instance, using=using)
        else:  # from the group's or permission's side: the users are in pk_set
            for pk in pk_set or ():
                principal_changed(label=_label(user_model, pk), using=using)

    def token_changed(sender: Any, instance: Any, using: str | None = None, **kw: Any) -> None:
        if instance.user_id is not None:  # an OAuth client-credentials token has no user
            principal_changed(label=_label(user_model, instance.user_id), using=using)

    def logged_out(sender: Any, request: Any, user: Any, **kw: Any) -> None:
        principal_changed(user)

    def session_deleted(sender: Any, instance: Any, using: str | None = None, **kw: Any) -> None:
        try:
            pk = instance.get_decoded().get(SESSION_KEY)
        except Exception:
            pk = None
        if pk is not None:
            principal_changed(label=_label(user_model, user_model._meta.pk.to_python(pk)), using=using)

    uid = "mcp_django_principal_"

    def saved_or_deleted(model: Any, name: str, receiver: Callable[..., None]) -> None:
        post_save.connect(receiver, sender=model, weak=False, dispatch_uid=f"{uid}{name}_save")
        post_delete.connect(receiver, sender=model, weak=False, dispatch_uid=f"{uid}{name}_delete")

    saved_or_deleted(user_model, "user", user_changed)
    for relation in ("groups", "user_permissions"):
        through = getattr(getattr(user_model, relation, None), "through", None)
        if through is not None:
            m2m_changed.connect(relation_changed, sender=through, weak=False, dispatch_uid=uid + relation)
    user_logged_out.connect(logged_out, weak=False, dispatch_uid=uid + "logout")
    if apps.is_installed("rest_framework.authtoken"):
        from rest_framework.authtoken.models import Token

        saved_or_deleted(Token, "token", token_changed)
    # The app's own MCP tokens: update() on last_used (not sent) changes nothing a token is checked for.
    from .tokens.models import MCPToken

    saved_or_deleted(MCPToken, "mcp_token", token_changed)
    if apps.is_installed("oauth2_provider"):
        # django-oauth-toolkit deletes a revoked access token: its user is found anew.
        from oauth2_provider.models import get_access_token_model

        saved_or_deleted(get_access_token_model(), "oauth", token_changed)
    if apps.is_installed("django.contrib.sessions"):
        from django.contrib.sessions.models import Session

        post_delete.connect(session_deleted, sender=Session, weak=False, dispatch_uid=uid + "session_delete")
    setting_changed.connect(_settings_changed, dispatch_uid=uid + "settings")


_URL_SETTINGS = ("SECURE_PROXY_SSL_HEADER", "USE_X_FORWARDED_HOST", "USE_X_FORWARDED_PORT")


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    global _shared
    if setting in ("MCP_DJANGO", "CACHES", "SESSION_ENGINE", "SESSION_COOKIE_NAME", "AUTH_USER_MODEL", *_URL_SETTINGS):
        _shared = None
        principal_cache.clear()
        url_headers.cache_clear()
