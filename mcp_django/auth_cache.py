"""Principals found recently, and what makes every process forget them at once.

Authentication costs a worker-thread hop and a query on every request; an MCP
client sends the same token many times a second. A process keeps the user each
credential found for ``AUTH_CACHE_SECONDS`` (0 turns the cache off), under a
hash of exactly what the configured classes read: the ``Authorization`` header
and the session cookie as Django parses it.

Revocation must not wait for that time to pass, in any process. Each user has a
version in the shared cache (``MCP_DJANGO["SESSION_CACHE"]``, the one legacy
sessions share); an entry remembers the version it was found under, and a hit
is served only while the shared version is still that one: one cache get per
hit, in a worker thread. When that cache is local memory it is this process's
alone, and the versions are a dict of this process: a hit is a dict lookup on
the event loop. Whatever could make a credential find
another user, or none, changes the version: saving or deleting the user (a
password change, ``is_active=False``), saving or deleting a DRF token,
``user_logged_out``, a deleted database session (``flush()``), a change to the
user's groups or permissions. Permissions themselves are looked up anew on
every request: the cached user is a copy without Django's permission caches.

A session cookie is cached only with session engines whose deletion is heard
(``db``, ``cached_db``, ``signed_cookies``); with any other engine every
request carrying a session cookie runs the authentication classes.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import time
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils import timezone

from .auth import Principal, header_bound_only
from .conf import mcp_settings

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


class _Shared:
    """Where the users' versions live: the shared cache, or this process when that cache is local.

    A local-memory cache is this process's alone (other processes cannot see it
    anyway), so its versions are kept in a plain dict instead: a hit then costs
    a dict lookup, no cache key building and unpickling, and no thread hop.
    """

    MAX_LOCAL = 100_000

    def __init__(self) -> None:
        from django.core.cache import caches
        from django.core.cache.backends.locmem import LocMemCache

        self.alias = mcp_settings.SESSION_CACHE
        self.local = isinstance(caches[self.alias], LocMemCache)
        self.versions: dict[str, int] = {}

    # Sync: from a worker thread, or anywhere when local.

    def get(self, key: str) -> Any:
        if self.local:
            return self.versions.get(key)
        from django.core.cache import caches

        return caches[self.alias].get(key)

    def create(self, key: str) -> Any:
        """The version of ``key``, made now if it has none."""
        if self.local:
            if len(self.versions) >= self.MAX_LOCAL:
                self.versions.clear()  # every entry then misses once: safe
            return self.versions.setdefault(key, _new_version())
        from django.core.cache import caches

        cache = caches[self.alias]
        cache.add(key, _new_version(), VERSION_TIMEOUT)
        return cache.get(key)

    def set(self, key: str, version: int) -> None:
        if self.local:
            self.versions[key] = version
            return
        from django.core.cache import caches

        caches[self.alias].set(key, version, VERSION_TIMEOUT)

    def delete(self, key: str) -> None:
        if self.local:
            self.versions.pop(key, None)
            return
        from django.core.cache import caches

        caches[self.alias].delete(key)


_shared: _Shared | None = None


def shared() -> _Shared:
    global _shared
    if _shared is None or _shared.alias != mcp_settings.SESSION_CACHE:
        _shared = _Shared()
    return _shared


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
    """Entries: credential hash -> (expiry, user, credential, version key, version seen)."""

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[float, Any, Any, str, Any]] = {}

    @staticmethod
    def key(headers: dict[str, str]) -> bytes | None:
        """The hash of what the authentication classes read, or None when there is no safe one.

        ``headers["cookie"]`` is the string Django parses (see
        :func:`mcp_django.transports.http_io.django_cookie`): the session id here is
        the one ``request.COOKIES`` holds, wherever the client put it.
        """
        if not header_bound_only():
            return None  # a custom class may look at anything: no safe key
        session = ""
        cookie = headers.get("cookie")
        if cookie:
            from django.http.cookie import parse_cookie

            session = parse_cookie(cookie).get(settings.SESSION_COOKIE_NAME, "")
            if session and settings.SESSION_ENGINE not in _SIGNALLED_SESSION_ENGINES:
                return None  # a deleted session would go unnoticed
        authorization = headers.get("authorization", "")
        material = f"{len(authorization)}:{authorization}{session}".encode()
        return hashlib.sha256(material).digest()

    async def get(self, key: bytes) -> Principal | None:
        """The principal remembered for ``key``, if its user has not changed since."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, user, auth, vkey, version = entry
        if expires < time.monotonic():
            self._entries.pop(key, None)
            return None
        store = shared()
        try:
            if store.local:
                current = store.get(vkey)
            else:
                from .asks.invoke import run_in_thread

                current = await run_in_thread(store.get, vkey)
        except Exception:
            logger.warning("could not read a principal's version; authenticating anew", exc_info=True)
            current = None
        if current is None or current != version:
            self._entries.pop(key, None)
            return None
        return Principal(_fresh_copy(user), auth)

    def remember(self, key: bytes, principal: Principal) -> None:
        """Sync, right after the classes found ``principal`` (in the same worker thread).

        The version is read after authenticating: a change committed meanwhile has
        bumped it already (receivers bump at the change and again at its commit).
        """
        ttl = mcp_settings.AUTH_CACHE_SECONDS
        expires = getattr(principal.auth, "expires", None)
        if isinstance(expires, datetime.datetime):
            # An expiring credential (an OAuth access token) is not remembered past its expiry.
            ttl = min(ttl, (expires - timezone.now()).total_seconds())
        if ttl <= 0 or principal.is_anonymous:
            return
        vkey = version_key(principal.label)
        try:
            version = shared().create(vkey)
        except Exception:
            logger.warning("could not read a principal's version; not caching it", exc_info=True)
            return
        if version is None:
            return  # a cache that keeps nothing (DummyCache): nothing could tell this entry is stale
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (time.monotonic() + ttl, principal.user, principal.auth, vkey, version)

    def clear(self, *args: Any, **kwargs: Any) -> None:
        self._entries.clear()


principal_cache = PrincipalCache()


def authenticate_and_remember(request: Any, key: bytes | None) -> Principal:
    """Sync: run the authentication classes, and cache what they found under ``key``."""
    from .auth import authenticate

    principal = authenticate(request)
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
    try:
        shared().set(version_key(label), _new_version())
    except Exception:
        # Other processes keep their entries until AUTH_CACHE_SECONDS pass.
        logger.error("could not reset cached principals of %s", label, exc_info=True)
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


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    global _shared
    if setting in ("MCP_DJANGO", "CACHES", "SESSION_ENGINE", "SESSION_COOKIE_NAME", "AUTH_USER_MODEL"):
        _shared = None
        principal_cache.clear()
