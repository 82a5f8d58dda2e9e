"""Principals found recently, and what makes processes forget them.

Authentication costs a worker-thread hop and a query on every request; an MCP
client sends the same token many times a second. A process keeps the user each
credential found for ``AUTH_CACHE_SECONDS`` (0 turns the cache off), under a
hash of everything the configured classes' verdict may depend on: the
``Authorization`` header, the session cookie as Django parses it, and the URL
the request reached (scheme, host and path, with the proxy headers Django reads
for them), since an OAuth token is valid only at the resource it was issued for.

Two modes, chosen by ``AUTH_CACHE_SECONDS``:

- Up to 1 second (the default, 1): the cache is this process's alone and never
  reads a shared store, so a request with a credential needs neither Redis nor
  any other cache. A change heard through a signal in this process (below) is
  seen on the next request; any other change (one made by another process, by
  ``QuerySet.update()`` or by raw SQL) within the cache's seconds, at most 1 s.
- Longer (an opt-in): each user has a version in the shared cache
  (``MCP_DJANGO["SESSION_CACHE"]``), and a hit is served only while the shared
  version is still the one it was found under (one cache get per hit, in a
  worker thread), so a change heard through a signal in any process is seen on
  every process's next request. A change no signal reports is seen only when
  the entry expires, up to ``AUTH_CACHE_SECONDS`` later. When the shared cache
  fails, its breaker (:mod:`mcp_django.breaker`) stops asking it but for one try
  every few seconds (one log line when the outage begins, one when it ends):
  requests authenticate anew meanwhile instead of each waiting for it.

Whatever could make a credential find another user, or none, changes the
version: saving or deleting the user (a password change, ``is_active=False``),
saving or deleting a DRF token, an MCP token or an OAuth access token, ``user_logged_out``, a
deleted database session (``flush()``), a change to the user's groups or
permissions. Permissions themselves are looked up anew on every request: the
cached user is a copy without Django's permission caches.

An entry runs out for every connection at once: the requests with its key that
arrive while one of them authenticates wait for that authentication
(:meth:`PrincipalCache.after_pending`) instead of each paying a thread hop and a
query of their own.

A session cookie is cached only with session engines whose deletion is heard
(``db``, ``cached_db``, ``signed_cookies``); with any other engine every
request carrying a session cookie runs the authentication classes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import orjson
from django.conf import settings
from django.core.signals import setting_changed
from django.utils import timezone

from .auth import Principal, header_bound_only, url_headers
from .breaker import Breaker
from .conf import EndpointSettings, mcp_settings

__all__ = ["principal_changed"]


logger = logging.getLogger("mcp_django")

# How long a user's version is kept in the shared cache. Losing it (expiry,
# eviction) only makes the next request authenticate again: an entry is never
# stored without a version, and a missing one matches none.
VERSION_TIMEOUT = 7 * 86400

# Session engines whose deleted (logged-out, flushed) sessions send post_delete,
# or that Django itself cannot revoke (signed cookies).
_SIGNALLED_SESSION_ENGINES = frozenset(
    {
        "django.contrib.sessions.backends.db",
        "django.contrib.sessions.backends.cached_db",
        "django.contrib.sessions.backends.signed_cookies",
    }
)

# What Django's permission backends cache on a user object for one request.
_PER_REQUEST_ATTRS = ("_perm_cache", "_user_perm_cache", "_group_perm_cache")


def version_key(label: str) -> str:
    return f"mcp_django:principal:{label}"


def _label(user_model: Any, pk: Any) -> str:
    return f"{user_model._meta.label_lower}:{pk}"


def _new_version() -> int:
    return int.from_bytes(os.urandom(7), "big")


# Up to this many seconds the cache is process-local (no shared versions, nothing read
# from another service on a request): what Django's session auth promises, a change
# made by any means holding from the next request, is kept within this bound.
LOCAL_ONLY_SECONDS = 1.0

# How long a shared cache that failed is left alone before it is tried again.
BREAKER_SECONDS = 5.0


class _Shared:
    """Where the users' versions live: this process, or the shared cache (the opt-in longer cache).

    With the default, short cache, or when the shared cache is local memory (which
    other processes cannot see anyway), the versions are a plain dict of this
    process: a hit is a dict lookup, with no cache key building, unpickling or
    thread hop, and no other service is ever asked.
    """

    MAX_LOCAL = 100_000

    def __init__(self) -> None:
        from django.core.cache import caches
        from django.core.cache.backends.locmem import LocMemCache

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

    # Sync: from a worker thread, or anywhere when local.

    def _cache(self) -> Any:
        if not self.breaker.admit():
            raise SharedCacheDown()
        from django.core.cache import caches

        return caches[self.alias]

    def _failed(self, exc: Exception) -> None:
        if self.breaker.failed(exc):
            # A change made elsewhere during the outage may not have reached the versions:
            # nothing remembered before it is trusted after it.
            principal_cache.clear()

    def get(self, key: str) -> Any:
        """The version of ``key``; None when it has none or the shared cache cannot say."""
        if self.local:
            return self.versions.get(key)
        try:
            found = self._cache().get(key)
        except SharedCacheDown:
            return None
        except Exception as exc:
            self._failed(exc)
            return None
        self.breaker.closed()
        return found

    def create(self, key: str) -> Any:
        """The version of ``key``, made now if it has none (None: nothing can vouch for an entry)."""
        if self.local:
            if len(self.versions) >= self.MAX_LOCAL:
                self.versions.clear()  # every entry then misses once: safe
            return self.versions.setdefault(key, _new_version())
        try:
            cache = self._cache()
            cache.add(key, _new_version(), VERSION_TIMEOUT)
            found = cache.get(key)
        except SharedCacheDown:
            return None
        except Exception as exc:
            self._failed(exc)
            return None
        self.breaker.closed()
        return found

    def set(self, key: str, version: int) -> bool:
        """False when the shared cache could not be told (its readers must then be distrusted)."""
        if self.local:
            self.versions[key] = version
            return True
        try:
            self._cache().set(key, version, VERSION_TIMEOUT)
        except SharedCacheDown:
            return False
        except Exception as exc:
            self._failed(exc)
            return False
        self.breaker.closed()
        return True

    def delete(self, key: str) -> None:
        if self.local:
            self.versions.pop(key, None)
            return
        from django.core.cache import caches

        caches[self.alias].delete(key)


class SharedCacheDown(Exception):
    """The breaker is open: the shared cache failed a moment ago."""


_shared: _Shared | None = None


def shared() -> _Shared:
    global _shared
    if _shared is None or _shared.alias != mcp_settings.SESSION_CACHE:
        _shared = _Shared()
    return _shared


def url_header_values(headers: dict[str, str]) -> list[str]:
    """The values of :func:`url_headers` in ``headers`` ("" for each one absent): with the
    transport's scheme and path, what names the URL a request reached."""
    return [headers.get(name, "") for name in url_headers()]


def _fresh_copy(user: Any) -> Any:
    """A copy of a cached user, as a fresh request would load it.

    A handler that changes ``request.user`` must not change the next caller's, and
    permissions are looked up anew (Django caches them on the user object). What
    ``copy.copy`` does for a model (its ``__getstate__``: own ``_state`` and field
    cache, no peers), without the pickle protocol's round trip, which costs more
    than the rest of a cache hit.
    """
    data = user.__dict__.copy()
    for attr in _PER_REQUEST_ATTRS:
        data.pop(attr, None)
    old_state = data.get("_state")
    if old_state is not None:
        state = object.__new__(type(old_state))
        state_data = old_state.__dict__.copy()
        state_data.pop("peers", None)
        if "fields_cache" in state_data:
            state_data["fields_cache"] = state_data["fields_cache"].copy()
        state.__dict__.update(state_data)
        data["_state"] = state
    new = object.__new__(type(user))
    new.__dict__.update(data)
    return new


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

        ``endpoint`` names the URL the request reached as the transport saw it (scheme,
        root path, path); the headers Django reads for the host and scheme are added
        here. An OAuth token is valid at one resource URL only: keyed without it, one
        use at the right address would open every other (another Host, another endpoint).

        ``settings_of``: the endpoint's settings, whose classes say whether a key is safe.

        ``headers["cookie"]`` is the string Django parses (see
        :func:`mcp_django.transports.http_io.django_cookie`): the session id here is
        the one ``request.COOKIES`` holds, wherever the client put it.
        """
        if not header_bound_only(settings_of):
            return None  # a custom class may look at anything: no safe key
        if "dpop" in headers or headers.get("authorization", "")[:5].lower() == "dpop ":
            return None  # a DPoP proof is checked (and its jti spent) on each request: never a hit
        session = ""
        cookie = headers.get("cookie")
        if cookie:
            from django.http.cookie import parse_cookie

            session = parse_cookie(cookie).get(settings.SESSION_COOKIE_NAME, "")
            if session and settings.SESSION_ENGINE not in _SIGNALLED_SESSION_ENGINES:
                return None  # a deleted session would go unnoticed
        parts = [headers.get("authorization", ""), session, endpoint]
        parts += url_header_values(headers)
        # The parts as one JSON array: no two different requests hash the same material
        # (one C call, where length-prefixing each part in Python cost four times as much).
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
        if expires < time.monotonic():
            self._entries.pop(key, None)
            return None
        store = shared()
        if store.local:
            current = store.get(vkey)
        elif store.breaker.open:
            current = None  # the shared cache failed a moment ago: authenticate anew, without waiting on it
        else:
            from .asks.invoke import run_in_thread

            current = await run_in_thread(store.get, vkey)
        if current is None or current != version:
            self._entries.pop(key, None)
            return None
        return Principal.remembered(_fresh_copy(user), auth, label)

    async def after_pending(self, key: bytes) -> Principal | None:
        """What an authentication of ``key`` already under way finds, once it ends: None when
        there is none (on this event loop), or when it found nothing to remember.

        An entry expires for every connection at once: without this, each request that came
        in while the first one's authentication ran (a thread hop and a query) paid for one
        of its own. The wait is for the same key, so for what a hit would serve, and the
        answer still goes through :meth:`get` (the user's version). Only an authentication
        started within the cache's seconds is waited for: what it read is no older than a
        hit's may be.
        """
        found = self._pending.get(key)
        if found is None:
            return None
        future, started = found
        if future.get_loop() is not asyncio.get_running_loop():
            return None
        if time.monotonic() - started >= mcp_settings.AUTH_CACHE_SECONDS:
            return None
        # Shielded: a waiter cancelled (its client gone) must not end the wait of the others.
        await asyncio.shield(future)
        return await self.get(key)

    @contextlib.contextmanager
    def leading(self, key: bytes | None) -> Iterator[None]:
        """Around the authentication of ``key`` (on the event loop): requests with the same key
        meanwhile wait for it (:meth:`after_pending`) instead of authenticating too. However
        it ends (found, refused, failed, timed out, cancelled), they are woken."""
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
        """Sync, right after the classes found ``principal`` (in the same worker thread).

        The version is read after authenticating: a change committed meanwhile has
        bumped it already (receivers bump at the change and again at its commit).
        """
        ttl = mcp_settings.AUTH_CACHE_SECONDS
        # The entry's clock is read first: a thread paused between the two readings then
        # shortens the entry instead of stretching it past the credential's expiry.
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
            # A cache that keeps nothing (DummyCache), or one that failed: nothing could
            # tell this entry is stale.
            return
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (now + ttl, principal.user, principal.auth, vkey, version, principal.label)

    def clear(self, *args: Any, **kwargs: Any) -> None:
        self._entries.clear()


principal_cache = PrincipalCache()


def authenticate_and_remember(request: Any, key: bytes | None, endpoint: EndpointSettings | None = None) -> Principal:
    """Sync: run the endpoint's authentication classes, and cache what they found under ``key``."""
    from .auth import authenticate

    principal = authenticate(request, endpoint)
    if key is not None:
        principal_cache.remember(key, principal)
    return principal


# -- invalidation ----------------------------------------------------------------------------


def principal_changed(user: Any = None, *, label: str | None = None, using: str | None = None) -> None:
    """Make every process authenticate ``user`` anew on its next request.

    Sent by mcp-django's own receivers; call it from a custom authentication
    class's revocation path (see :func:`mcp_django.auth.reads_only_headers`).
    Inside a transaction the version changes now and again at commit, so no
    process caches what it read before the commit.
    """
    if label is None:
        if user is None or user.pk is None:
            return
        label = _label(user, user.pk)
    _bump(label)
    from django.db import DEFAULT_DB_ALIAS, connections, transaction

    if connections[using or DEFAULT_DB_ALIAS].in_atomic_block:
        transaction.on_commit(lambda: _bump(label), using=using)


def _bump(label: str) -> None:
    if not shared().set(version_key(label), _new_version()):
        # This process forgets every entry; other processes keep theirs until
        # AUTH_CACHE_SECONDS pass (the breaker logged the outage once).
        principal_cache.clear()


def connect() -> None:
    """Connect the receivers that keep the cache honest (called from AppConfig.ready)."""
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.contrib.auth.signals import user_logged_out
    from django.db.models.signals import m2m_changed, post_delete, post_save

    user_model = get_user_model()

    def user_saved(sender: Any, instance: Any, update_fields: Any = None, using: str | None = None, **kw: Any) -> None:
        if update_fields is not None and set(update_fields) <= {"last_login"}:
            return  # every login saves last_login; it changes nothing a credential finds
        principal_changed(instance, using=using)

    def user_deleted(sender: Any, instance: Any, using: str | None = None, **kw: Any) -> None:
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
        from django.contrib.auth import SESSION_KEY

        try:
            pk = instance.get_decoded().get(SESSION_KEY)
        except Exception:
            pk = None
        if pk is not None:
            principal_changed(label=_label(user_model, user_model._meta.pk.to_python(pk)), using=using)

    uid = "mcp_django_principal_"
    post_save.connect(user_saved, sender=user_model, weak=False, dispatch_uid=uid + "user_save")
    post_delete.connect(user_deleted, sender=user_model, weak=False, dispatch_uid=uid + "user_delete")
    for relation in ("groups", "user_permissions"):
        through = getattr(getattr(user_model, relation, None), "through", None)
        if through is not None:
            m2m_changed.connect(relation_changed, sender=through, weak=False, dispatch_uid=uid + relation)
    user_logged_out.connect(logged_out, weak=False, dispatch_uid=uid + "logout")
    if apps.is_installed("rest_framework.authtoken"):
        from rest_framework.authtoken.models import Token

        post_save.connect(token_changed, sender=Token, weak=False, dispatch_uid=uid + "token_save")
        post_delete.connect(token_changed, sender=Token, weak=False, dispatch_uid=uid + "token_delete")
    # The app's own MCP tokens (mcp_django.tokens): a revoked, re-scoped or deleted token holds
    # from the next request. Only a changed user row or token reaches the cache this way;
    # update() on last_used (the one write not sent) changes nothing a token is checked for.
    from .tokens.models import MCPToken

    post_save.connect(token_changed, sender=MCPToken, weak=False, dispatch_uid=uid + "mcp_token_save")
    post_delete.connect(token_changed, sender=MCPToken, weak=False, dispatch_uid=uid + "mcp_token_delete")
    if apps.is_installed("oauth2_provider"):
        # django-oauth-toolkit deletes a revoked access token: its user is found anew.
        from oauth2_provider.models import get_access_token_model

        access_token = get_access_token_model()
        post_save.connect(token_changed, sender=access_token, weak=False, dispatch_uid=uid + "oauth_save")
        post_delete.connect(token_changed, sender=access_token, weak=False, dispatch_uid=uid + "oauth_delete")
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
