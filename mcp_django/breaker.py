"""A dependency known to be down is not waited on by every request: one :class:`Breaker` per service,
per process (docs/deployment.md, "What an outage logs"). The first call finding the service away
opens it; an async ``probe``, or the caller :meth:`Breaker.admit` lets through every ``retry`` seconds, closes it."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.signals import setting_changed

from .protocol.jsonrpc import Unavailable

logger = logging.getLogger("mcp_django")

# How often the probe asks a service that is away (a hung service holds the one probe, not more).
PROBE_SECONDS = 0.05
# How often a database that is away is tried again by a caller (admit()).
DATABASE_RETRY_SECONDS = 0.25

T = TypeVar("T")


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the service is away (refused, reset, timed out), not that
    this one call was wrong (a message the layer cannot encode, a full channel)."""
    if isinstance(exc, (OSError, TimeoutError)):  # builtins' ConnectionError is an OSError
        return True
    # redis-py's errors are not builtins': named, so this module does not need redis installed.
    return any(
        cls.__module__.startswith("redis") and cls.__name__ in ("ConnectionError", "TimeoutError")
        for cls in type(exc).__mro__
    )


class Breaker:
    """Open while a service is known to be away."""

    def __init__(
        self,
        what: str,
        probe: Callable[[], Awaitable[Any]] | None = None,
        *,
        retry: float = PROBE_SECONDS,
        meanwhile: str = "requests that need it are answered 503 at once until it answers again",
    ) -> None:
        self.what = what
        self.probe = probe
        self.retry = retry
        self.meanwhile = meanwhile  # what the opening line says happens during the outage
        self.down_since: float | None = None
        self._next_try = 0.0
        self._prober: asyncio.Task[None] | None = None
        # failed() and admit() are called from worker threads too.
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        return self.down_since is not None

    def check(self, refused: type[Exception] = Unavailable) -> None:
        """Raise ``refused(self.what)`` at once while the service is known to be away (and probe it)."""
        if self.down_since is not None:
            self._probe_soon()
            raise refused(self.what)

    def admit(self) -> bool:
        """Whether this caller may ask the service: always while it answers; while it is
        away, one caller every ``retry`` seconds (its answer closes the breaker)."""
        if self.down_since is None:  # the common case: no lock
            return True
        now = time.monotonic()
        with self._lock:
            if self.down_since is None or now >= self._next_try:
                self._next_try = now + self.retry
                return True
            return False

    def failed(self, exc: BaseException) -> bool:
        """A call found the service away: refuse the next ones until it answers again.
        True when this call opened the breaker (the outage begins)."""
        now = time.monotonic()
        with self._lock:
            self._next_try = now + self.retry
            opened = self.down_since is None
            if opened:
                self.down_since = now
        if opened:
            text = str(exc).strip()
            cause = f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__
            logger.warning("%s is unavailable (%s); %s", self.what, cause, self.meanwhile)
        self._probe_soon()
        return opened

    def closed(self) -> None:
        """The service answered (the probe, or another path that reached it)."""
        if self.down_since is None:
            return
        with self._lock:
            since, self.down_since = self.down_since, None
        if since is not None:
            logger.warning("%s answers again (unavailable for %.1f s)", self.what, time.monotonic() - since)

    async def run(self, work: Callable[[], T], timeout: float, refused: type[Exception] = Unavailable) -> T:
        """``work()`` (blocking I/O to the service) in a thread of the loop's pool, at most ``timeout``
        seconds; ``refused(self.what)`` at once while the service is away, and when the call fails
        (an outage opens the breaker; any other failure is one warning line, no traceback)."""
        self.check(refused)

        def guarded() -> T:
            # Calls queued behind threads stuck on a hung service would each wait it out again.
            if self.down_since is not None:
                raise refused(self.what)
            try:
                return work()
            except Exception as exc:
                if is_outage(exc):
                    self.failed(exc)  # now, for the calls about to take this thread
                raise

        try:
            return await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, guarded), timeout)
        except refused:
            raise
        except Exception as exc:
            if is_outage(exc):
                self.failed(exc)  # said once per outage
            else:
                logger.warning("%s failed (%s): %s", self.what, type(exc).__name__, exc)
            raise refused(self.what) from None

    def reset(self) -> None:
        """Forget any outage and stop probing (tests, a changed configuration)."""
        self.down_since = None
        if self._prober is not None:
            self._prober.cancel()
            self._prober = None

    def _probe_soon(self) -> None:
        if self.probe is None or (self._prober is not None and not self._prober.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to probe from (a sync caller): the next async call starts it
        self._prober = loop.create_task(self._probing(self.probe))

    async def _probing(self, probe: Callable[[], Awaitable[Any]]) -> None:
        while self.down_since is not None:
            try:
                await probe()
            except Exception:
                await asyncio.sleep(PROBE_SECONDS)
                continue
            self.closed()


class CacheBreaker(Breaker):
    """The breaker of the Django cache ``alias()`` names, probed by reading ``key``; forgotten when
    ``CACHES`` or ``MCP_DJANGO`` change (another cache: what was known of the old one says nothing)."""

    def __init__(
        self,
        what: str,
        alias: Callable[[], str],
        timeout: Callable[[], float],
        key: str,
        refused: type[Exception] = Unavailable,
    ) -> None:
        super().__init__(what, self._probe_cache)
        self.alias, self.timeout, self.key, self.refused = alias, timeout, key, refused
        setting_changed.connect(self._settings_changed)

    async def use(self, work: Callable[[Any], T]) -> T:
        """``work(cache)``, bounded by ``timeout()``; ``refused(what)`` when it cannot be."""
        cache = caches[self.alias()]
        if isinstance(cache, LocMemCache):
            return work(cache)  # this process's memory: nothing to wait for, no thread to hop to
        return await self.run(lambda: work(cache), self.timeout(), self.refused)

    async def _probe_cache(self) -> None:
        get = caches[self.alias()].get
        await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, get, self.key), self.timeout())

    def _settings_changed(self, *, setting: str, **kwargs: Any) -> None:
        if setting in ("CACHES", "MCP_DJANGO"):
            self.reset()


_databases: dict[str, Breaker] = {}


def database(alias: str) -> Breaker:
    """The breaker of database ``alias`` (the PostgreSQL backend opens and closes it)."""
    found = _databases.get(alias)
    if found is None:
        # setdefault is atomic: threads that ask at once all get the breaker stored first.
        found = _databases.setdefault(alias, Breaker(f"the database {alias!r}", retry=DATABASE_RETRY_SECONDS))
    return found


def database_down() -> bool:
    """Whether some database's breaker is open (its outage logged already: failing paths need not say it)."""
    return any(gate.down_since is not None for gate in list(_databases.values()))
