"""This worker's channel on the Channels layer (one per event loop): how worker processes tell each
other things. Its reader hands each message to the handler of its ``type`` (:meth:`WorkerChannel.on`);
it also joins :data:`GROUP`, for what all must hear (resource updates, legacy cancellations). Every
operation on the layer goes through :func:`layer_call`, and its breaker (docs/deployment.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers, get_channel_layer

from .breaker import Breaker, is_outage
from .conf import mcp_settings
from .protocol.jsonrpc import Unavailable

logger = logging.getLogger("mcp_django")

PREFIX = "mcp-django"
# Every worker's channel is in it.
GROUP = "mcp-django.workers"
# Group membership expires in the layer and is lost when Redis restarts or is flushed: renewed
# when the reader reads again after a failure, and this often anyway. A failed read is no sure sign:
# redis-py retries a blocked read on a fresh connection without raising, so a quick restart may show
# as none, and a flush never does; until the renewal, updates and cancellations miss this worker.
_GROUP_RENEW_SECONDS = 1
# A reader whose layer failed reads again this often, so replies cross again as soon as Redis is back.
_READ_RETRY_SECONDS = 0.25
# Attempts of an operation failing with a connection error: each dead pooled connection fails once.
_ATTEMPTS = 3

Handler = Callable[[dict[str, Any]], object]
T = TypeVar("T")


async def layer_call(operation: Callable[[], Awaitable[T]], *, probe: bool = False) -> T:
    """``await operation()`` on the channel layer, bounded by ``CHANNEL_LAYER_TIMEOUT``; :class:`Unavailable`
    at once while the breaker is open (a ``probe`` goes through, and closes it). Errors that say
    nothing of the layer (a full channel) are raised as they are, leaving the breaker alone."""
    if not probe:
        layer_breaker.check()
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            result = await asyncio.wait_for(operation(), mcp_settings.CHANNEL_LAYER_TIMEOUT)
            break
        except Exception as exc:
            if attempt < _ATTEMPTS and any(cls.__name__ == "ConnectionError" for cls in type(exc).__mro__):
                continue  # a pooled connection that died with an earlier outage: the next one is fresh
            if is_outage(exc):
                if not probe:
                    layer_breaker.failed(exc)
                raise Unavailable("the channel layer") from exc
            raise
    if probe:
        layer_breaker.closed()
    return result


async def _probe_layer() -> None:
    layer = get_channel_layer()
    if layer is not None:
        # Harmless everywhere: removing a channel from a group it is not in.
        await layer_call(lambda: layer.group_discard(f"{GROUP}.probe", f"{PREFIX}.probe"), probe=True)


layer_breaker = Breaker("the channel layer", _probe_layer)


def is_shared(layer: Any) -> bool:
    """True when ``layer`` reaches other processes (a layer other than the in-memory one)."""
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


class WorkerChannel:
    """One per event loop: the channel, its reader and the handlers of what it reads."""

    def __init__(self) -> None:
        layer = get_channel_layer()
        if is_shared(layer) and any(worker.layer is layer for worker in _workers.values()):
            # A layer instance receives on one event loop only: another loop of this process (a
            # test client's) gets its own. (In-memory instances do not see each other: shared.)
            layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        self.layer: Any = layer
        self.shared = is_shared(layer)
        self.channel = ""
        self.handlers: dict[str, Handler] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Future[Any]] = []
        self._ready: asyncio.Future[None] | None = None

    def on(self, message_type: str, handler: Handler) -> None:
        """Call ``handler`` with every message of this type read on this channel (on this loop)."""
        self.handlers[message_type] = handler

    async def start(self) -> None:
        if self._ready is None:
            self.loop = asyncio.get_running_loop()
            self._ready = self.loop.create_future()
            try:
                if self.layer is None:
                    # No layer configured: messages can only come from this process.
                    self.channel = f"local.{os.getpid()}!{os.urandom(6).hex()}"
                else:
                    self.channel = await self.layer.new_channel(prefix=f"{PREFIX}.")
                    self._tasks.append(asyncio.ensure_future(self._read()))
                    if self.shared:
                        # Joined before anyone is served: no update announced later may miss it.
                        await self._join_once()
                        self._tasks.append(asyncio.ensure_future(self._renew()))
                self._ready.set_result(None)
            except BaseException as exc:
                self._ready.set_exception(exc)
                self._ready = None
                raise
        await self._ready

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Run ``task`` until it ends or :meth:`stop` cancels it."""
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await layer_call(lambda: self.layer.send(channel, message))

    def post(self, channel: str, message: dict[str, Any]) -> None:
        """:meth:`send` in the background, a failure logged instead of raised."""

        async def send() -> None:
            try:
                await self.send(channel, message)
            except Exception as exc:
                if not layer_breaker.open:  # an outage is said once, by the breaker
                    logger.warning("could not send %s to %s (%s)", message.get("type"), channel, type(exc).__name__)

        self.keep(asyncio.ensure_future(send()))

    async def _read(self) -> None:
        failing = False
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except Exception as exc:
                if type(exc).__name__ == "TimeoutError" and type(exc).__module__.startswith("redis"):
                    continue  # redis-py's socket_timeout ended an idle read: nothing was lost
                if not failing:  # one line per outage
                    if is_outage(exc):
                        layer_breaker.failed(exc)  # which logs it, and the layer's return
                    else:
                        logger.warning("the reply channel failed (%s: %s); retrying", type(exc).__name__, exc)
                failing = True
                await asyncio.sleep(_READ_RETRY_SECONDS)
                # The layer answers again: group membership may have gone with Redis's memory.
                if self.shared and await self._join_once(probe=True):
                    failing = False
                continue
            try:
                handler = self.handlers.get(message.get("type"))
                if handler is not None:
                    handler(message)
            except (KeyError, TypeError, ValueError):
                logger.warning("ignored a malformed message on the reply channel")

    async def _join_once(self, *, probe: bool = False) -> bool:
        try:
            await layer_call(lambda: self.layer.group_add(GROUP, self.channel), probe=probe)
        except Exception as exc:
            if not probe:  # probes repeat while the layer is away, which the reader says once
                logger.warning("could not join %s (%s); retrying", GROUP, type(exc).__name__)
            return False
        return True

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(_GROUP_RENEW_SECONDS)
            await self._join_once(probe=True)

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.shared and self.channel:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(GROUP, self.channel)


_WORKER_CHANNEL = re.compile(rf"(?:{PREFIX}|local)\.[\w.!-]*", re.ASCII)


def is_worker_channel(channel: str) -> bool:
    """Whether ``channel`` can name a worker's channel: anything else (a client's made-up name) is
    refused before it reaches the layer, which would keep it (the in-memory layer, for ever) or raise."""
    return len(channel) < 100 and _WORKER_CHANNEL.fullmatch(channel) is not None


_workers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WorkerChannel] = weakref.WeakKeyDictionary()


async def worker_channel() -> WorkerChannel:
    """This event loop's channel, started on first use; :class:`Unavailable` when the layer cannot be reached."""
    loop = asyncio.get_running_loop()
    found = _workers.get(loop)
    if found is None:
        found = _workers[loop] = WorkerChannel()
    try:
        await found.start()
    except Exception:
        logger.warning("the channel layer is unavailable", exc_info=True)
        raise Unavailable("the channel layer") from None
    return found


def served_loop() -> asyncio.AbstractEventLoop | None:
    """A running event loop of this process whose channel is started, if any (its layer is connected)."""
    for worker in list(_workers.values()):
        if worker.loop is not None and worker.loop.is_running():
            return worker.loop
    return None
