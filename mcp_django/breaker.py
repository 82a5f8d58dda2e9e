"""A dependency known to be down is not waited on by every request: a short circuit breaker.

The session cache and the channel layer are Redis when several instances serve.
When Redis hangs, each call waits out a socket timeout (seconds); when it refuses
connections, each call fails at once but still logs. So the first call that fails
because the service is away opens the breaker: from then on the calls that need it
are refused at once (:class:`~mcp_django.protocol.jsonrpc.Unavailable`, a 503 the
client may retry), and the log says so once for the whole outage. Meanwhile one
probe (never one per request) asks the service again every :data:`PROBE_SECONDS`;
its first success closes the breaker, so requests are served again as soon as the
service answers, not after a fixed cool-down.

State is per process: an outage seen on one event loop is one for all of them. The
probe runs on the loop of the call that opened the breaker; when that loop is gone,
the next refused call starts another on its own loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .protocol.jsonrpc import Unavailable

logger = logging.getLogger("mcp_django")

# How often the probe asks a service that is away. Short: a refused connection
# costs microseconds, and a hung service holds the one probe, not more.
PROBE_SECONDS = 0.05


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the service is away (refused, reset, timed out), not that
    this one call was wrong (a message the layer cannot encode, a full channel)."""
    if isinstance(exc, (OSError, TimeoutError)):  # builtins' ConnectionError is an OSError
        return True
    # redis-py's errors are not builtins' (its ConnectionError is a RedisError): named,
    # so that this module does not need redis installed.
    return any(
        cls.__module__.startswith("redis") and cls.__name__ in ("ConnectionError", "TimeoutError")
        for cls in type(exc).__mro__
    )


class Breaker:
    """Open while a service is known to be away; ``probe`` (raising while it is) closes it."""

    def __init__(self, what: str, probe: Callable[[], Awaitable[Any]]) -> None:
        self.what = what
        self.probe = probe
        self.down_since: float | None = None
        self._prober: asyncio.Task[None] | None = None
        # failed() may be called from worker threads too (see there): one of them logs.
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        return self.down_since is not None

    def check(self) -> None:
        """Raise :class:`Unavailable` at once while the service is known to be away."""
        if self.down_since is not None:
            self._probe_soon()
            raise Unavailable(self.what)

    def failed(self, exc: BaseException) -> None:
        """A call found the service away: refuse the next ones until the probe gets an answer.

        Callable from a worker thread, where the call failed: calls queued behind it for
        a thread then see the breaker open before they start (the probe starts when the
        loop hears of the failure).
        """
        with self._lock:
            opened = self.down_since is None
            if opened:
                self.down_since = time.monotonic()
        if opened:
            # One line per outage, without a traceback: the cause is all there is to say.
            logger.warning(
                "%s is unavailable (%s: %s); requests that need it are answered 503 at once until it answers again",
                self.what,
                type(exc).__name__,
                exc,
            )
        self._probe_soon()

    def closed(self) -> None:
        """The service answered (the probe, or another path that reached it)."""
        since = self.down_since
        if since is not None:
            self.down_since = None
            logger.warning("%s answers again (unavailable for %.1f s)", self.what, time.monotonic() - since)

    def reset(self) -> None:
        """Forget any outage and stop probing (tests, a changed configuration)."""
        self.down_since = None
        if self._prober is not None:
            self._prober.cancel()
            self._prober = None

    def _probe_soon(self) -> None:
        if self._prober is not None and not self._prober.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to probe from (a sync caller): the next async call starts it
        self._prober = loop.create_task(self._probing())

    async def _probing(self) -> None:
        while self.down_since is not None:
            try:
                await self.probe()
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(PROBE_SECONDS)
                continue
            self.closed()
