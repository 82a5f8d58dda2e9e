"""The cross-worker reply channel of legacy Streamable HTTP.

A handler's server-to-client request goes out on the SSE stream of the POST that
called it, held by one worker process; the client's reply arrives as a separate
POST that a load balancer may hand to any worker. So every request id we send
names the Channels-layer channel of the worker that waits for it
(``mcp-django:<n>:<channel>``): whichever worker receives the reply forwards it
there (or resolves it directly when the channel is its own). The waiting worker
accepts it only for the session, and the principal, the request was sent under.

``notifications/cancelled`` and ``DELETE`` must reach calls held elsewhere too:
every worker's channel joins one group, and a cancellation not found locally is
sent to it. The in-memory layer (one process) never needs that broadcast.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import weakref
from dataclasses import dataclass
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from ..protocol.jsonrpc import dumps

logger = logging.getLogger("mcp_django")

_PREFIX = "mcp-django"
_GROUP = "mcp-django.workers"
# Group membership expires in the layer (channels-redis: a day by default): renew it well before.
_GROUP_RENEW_SECONDS = 3600


@dataclass
class _Waiter:
    future: asyncio.Future[dict[str, Any]]
    sid: str
    principal: str


def call_key(sid: str, request_id: Any) -> tuple[str, str]:
    """In-flight calls by session and the client's request id (1 and "1" are different ids)."""
    return sid, dumps(request_id).decode()


class Relay:
    """One per event loop: the worker's channel, its reader, the waiters and the calls in flight."""

    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.channel = ""
        self._ids = itertools.count(1)
        self.waiters: dict[str, _Waiter] = {}
        self.calls: dict[tuple[str, str], asyncio.Task[Any]] = {}
        # Legacy response streams of this worker, by key, kept for resumption (Last-Event-ID).
        self.streams: dict[str, Any] = {}
        self._stream_keys = itertools.count(1)
        self._tasks: list[asyncio.Task[Any]] = []
        self._ready: asyncio.Future[None] | None = None

    @property
    def shared(self) -> bool:
        """True when other processes may hold streams (a layer other than the in-memory one)."""
        return self.layer is not None and not isinstance(self.layer, InMemoryChannelLayer)

    async def start(self) -> None:
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            try:
                if self.layer is None:
                    # No layer configured: replies can only reach this process.
                    self.channel = f"local.{os.getpid()}!{os.urandom(6).hex()}"
                else:
                    self.channel = await self.layer.new_channel(prefix=f"{_PREFIX}.")
                    self._tasks.append(asyncio.ensure_future(self._read()))
                    if self.shared:
                        self._tasks.append(asyncio.ensure_future(self._join()))
                self._ready.set_result(None)
            except BaseException as exc:
                self._ready.set_exception(exc)
                self._ready = None
                raise
        await self._ready

    # -- our requests and their replies ----------------------------------------------------

    def open(self, sid: str, principal: str) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        request_id = f"{_PREFIX}:{next(self._ids)}:{self.channel}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiters[request_id] = _Waiter(future, sid, principal)
        return request_id, future

    def close(self, request_id: str | int) -> None:
        self.waiters.pop(str(request_id), None)

    async def route_reply(self, message: dict[str, Any], sid: str, principal: str) -> bool:
        """Deliver a client's reply to whichever worker waits for it. False: not an id of ours."""
        request_id = message.get("id")
        if not isinstance(request_id, str):
            return False
        prefix, _, rest = request_id.partition(":")
        number, _, channel = rest.partition(":")
        if prefix != _PREFIX or not number.isdigit() or not channel:
            return False
        if channel == self.channel:
            self.deliver(request_id, message, sid, principal)
        elif self.layer is not None:
            try:
                await self.layer.send(
                    channel, {"type": "mcp.reply", "id": request_id, "sid": sid, "p": principal, "message": message}
                )
            except Exception:
                # An unknown or full channel: the waiter (if any) will time out.
                logger.warning("could not forward a reply to %s", channel, exc_info=True)
        return True

    def deliver(self, request_id: str, message: dict[str, Any], sid: str, principal: str) -> None:
        waiter = self.waiters.get(request_id)
        if waiter is None or waiter.future.done():
            return  # answered already, timed out, or the call is over
        if waiter.sid != sid or waiter.principal != principal:
            logger.warning("dropped a reply to %s sent from another session", request_id)
            return
        waiter.future.set_result(message)

    def new_stream_key(self) -> str:
        return str(next(self._stream_keys))

    # -- cancellation ------------------------------------------------------------------------

    def track(self, sid: str, request_id: Any, task: asyncio.Task[Any]) -> tuple[str, str]:
        key = call_key(sid, request_id)
        self.calls[key] = task
        return key

    def untrack(self, key: tuple[str, str]) -> None:
        self.calls.pop(key, None)

    async def cancel(self, sid: str, request_id: Any = None) -> None:
        """Cancel one call of a session (``request_id``) or all of them (None), on every worker."""
        if self._cancel_local(sid, None if request_id is None else call_key(sid, request_id)[1]):
            return
        if self.shared:
            rid = None if request_id is None else call_key(sid, request_id)[1]
            try:
                await self.layer.group_send(_GROUP, {"type": "mcp.cancel", "sid": sid, "rid": rid})
            except Exception:
                logger.warning("could not broadcast a cancellation", exc_info=True)

    def _cancel_local(self, sid: str, rid: str | None) -> bool:
        if rid is not None:
            task = self.calls.get((sid, rid))
            if task is None:
                return False
            task.cancel()
            return True
        for (s, _r), task in list(self.calls.items()):
            if s == sid:
                task.cancel()
        return False  # other workers may hold calls of this session too

    # -- the reader --------------------------------------------------------------------------

    async def _read(self) -> None:
        assert self.layer is not None
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("the reply channel failed; retrying", exc_info=True)
                await asyncio.sleep(1)
                continue
            try:
                if message.get("type") == "mcp.reply":
                    self.deliver(str(message["id"]), dict(message["message"]), str(message["sid"]), str(message["p"]))
                elif message.get("type") == "mcp.cancel":
                    self._cancel_local(str(message["sid"]), message.get("rid"))
            except (KeyError, TypeError, ValueError):
                logger.warning("ignored a malformed message on the reply channel")

    async def _join(self) -> None:
        assert self.layer is not None
        while True:
            try:
                await self.layer.group_add(_GROUP, self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("could not join %s; retrying", _GROUP, exc_info=True)
                await asyncio.sleep(5)
                continue
            await asyncio.sleep(_GROUP_RENEW_SECONDS)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        if self.shared and self.channel:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(_GROUP, self.channel)


_relays: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Relay] = weakref.WeakKeyDictionary()


async def relay() -> Relay:
    """This event loop's relay, started on first use."""
    loop = asyncio.get_running_loop()
    found = _relays.get(loop)
    if found is None:
        found = _relays[loop] = Relay()
    await found.start()
    return found


class HttpReplies:
    """:class:`~mcp_django.asks.live.Replies` for one legacy HTTP call: ids routed through the relay."""

    def __init__(self, relay: Relay, sid: str, principal: str) -> None:
        self.relay = relay
        self.sid = sid
        self.principal = principal

    def open(self) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        return self.relay.open(self.sid, self.principal)

    def close(self, request_id: str | int) -> None:
        self.relay.close(request_id)
