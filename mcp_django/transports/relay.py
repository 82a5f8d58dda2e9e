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

Two more things travel the same way:

- resuming a call's stream (``GET`` + ``Last-Event-ID``) on a worker that does
  not hold it: event ids name the holder's channel, the resuming worker asks the
  holder for the events after that id, and the holder forwards them (and the
  result) as they come (:meth:`Relay.follow_remote`);
- resource updates (:func:`announce`): sent to the group, so that every worker
  tells its own listeners (legacy GET streams, websockets, 2026-07-28
  ``subscriptions/listen`` streams), each checking what its client subscribed to.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers, get_channel_layer

from ..protocol.jsonrpc import INTERNAL_ERROR, MCPError, Unavailable, dumps

logger = logging.getLogger("mcp_django")

_PREFIX = "mcp-django"
_GROUP = "mcp-django.workers"
# Group membership expires in the layer (channels-redis: a day by default), and is
# lost with Redis's memory when it restarts. It is renewed as soon as the reply
# channel reads again after a failure, and this often anyway (one cheap write):
# a restart the reader did not notice costs at most this long.
_GROUP_RENEW_SECONDS = 30
# The longest a request waits for one channel-layer operation (a hung Redis).
LAYER_TIMEOUT = 5
# How long a worker forwarding a client's reply waits for the holder to say it got it.
REPLY_ACK_SECONDS = 5
# How long a resuming worker waits for the holder to say whether it has the stream.
RESUME_WAIT_SECONDS = 5
# A holder forwarding a quiet stream says so this often; a follower hearing nothing
# for _RESUME_IDLE_SECONDS takes the holder for gone and ends its client's stream.
# Short: when the holder dies, its follower's client learns it within _RESUME_IDLE_SECONDS
# (its stream ends; resuming again is 404), at one small message per quiet stream every 5 s.
RESUME_KEEPALIVE_SECONDS = 5
_RESUME_IDLE_SECONDS = 3 * RESUME_KEEPALIVE_SECONDS


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
        layer = get_channel_layer()
        if layer is not None and not isinstance(layer, InMemoryChannelLayer):
            if any(hub.layer is layer for hub in _relays.values()):
                # A layer instance receives on one event loop only (channels-redis refuses a
                # second): another loop of this process (a test client's beside a server's)
                # reads through an instance of its own. The in-memory layer must stay shared:
                # its instances do not see each other's channels.
                layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        self.layer: Any = layer
        self.channel = ""
        self._ids = itertools.count(1)
        # Replies forwarded from here, waiting for the holder's acknowledgment, by ack id.
        self._acks: dict[str, asyncio.Future[str]] = {}
        self._ack_ids = itertools.count(1)
        self.waiters: dict[str, _Waiter] = {}
        self.calls: dict[tuple[str, str], asyncio.Task[Any]] = {}
        # Legacy response streams of this worker, by key, kept for resumption (Last-Event-ID).
        self.streams: dict[str, Any] = {}
        self._stream_keys = itertools.count(1)
        # Resumes served here for streams another worker holds, by tap id: their incoming events.
        self._taps: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._tap_ids = itertools.count(1)
        # Streams held here forwarded to another worker's resume, by (its channel, its tap id).
        self._forwards: dict[tuple[str, str], asyncio.Task[Any]] = {}
        # Legacy standalone GET streams of this worker, by session: ended with their session.
        self.session_streams: dict[str, set[Any]] = {}
        # Called on this loop with the URI of every resource update announced anywhere.
        self.watchers: set[Callable[[str], None]] = set()
        # The legacy transport's delivery of those updates to session_streams (set at the first GET stream).
        self.session_updates: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._ready: asyncio.Future[None] | None = None

    @property
    def shared(self) -> bool:
        """True when other processes may hold streams (a layer other than the in-memory one)."""
        return self.layer is not None and not isinstance(self.layer, InMemoryChannelLayer)

    async def start(self) -> None:
        if self._ready is None:
            self.loop = asyncio.get_running_loop()
            self._ready = self.loop.create_future()
            try:
                if self.layer is None:
                    # No layer configured: replies can only reach this process.
                    self.channel = f"local.{os.getpid()}!{os.urandom(6).hex()}"
                else:
                    self.channel = await self.layer.new_channel(prefix=f"{_PREFIX}.")
                    self._tasks.append(asyncio.ensure_future(self._read()))
                    if self.shared:
                        # Joined before anyone is served: a resource update announced
                        # after a client subscribed here must not miss this worker.
                        joined = await self._join_once()
                        self._tasks.append(asyncio.ensure_future(self._join(renew_first=joined)))
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
        """Deliver a client's reply to whichever worker waits for it. False: not an id of ours.

        Raises :class:`Unavailable` when the reply cannot reach the worker holding
        the request (the layer is down, the message cannot travel, or that worker
        is gone): the client is told, and a holder still there fails the ask at once.
        """
        request_id = message.get("id")
        if not isinstance(request_id, str):
            return False
        prefix, _, rest = request_id.partition(":")
        number, _, channel = rest.partition(":")
        if prefix != _PREFIX or not number.isdigit():
            return False
        if not _is_worker_channel(channel):
            _refused_once(channel)
            return False
        if channel == self.channel:
            self.deliver(request_id, message, sid, principal)
            return True
        if not self.shared:
            # One process: only its own relays (one per event loop) can hold the request.
            for hub in list(_relays.values()):
                if hub.channel == channel and hub.loop is not None and not hub.loop.is_closed():
                    hub.loop.call_soon_threadsafe(hub.deliver, request_id, message, sid, principal)
                    return True
            _refused_once(channel)
            return False
        ack = str(next(self._ack_ids))
        acked: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._acks[ack] = acked
        forward = {
            "type": "mcp.reply",
            "id": request_id,
            "sid": sid,
            "p": principal,
            "message": message,
            "ack": ack,
            "to": self.channel,
        }
        try:
            await asyncio.wait_for(self.layer.send(channel, forward), LAYER_TIMEOUT)
            await asyncio.wait_for(acked, REPLY_ACK_SECONDS)
        except Exception as exc:
            logger.warning("could not forward a reply to %s (%s)", channel, type(exc).__name__)
            # The holder may be there and the reply unable to travel (the layer refused
            # it): a small message still may, and the waiting ask ends now, not at ASK_TIMEOUT.
            lost = {"type": "mcp.reply.lost", "id": request_id, "sid": sid, "p": principal}
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.layer.send(channel, lost), LAYER_TIMEOUT)
            raise Unavailable("the server instance holding this request") from None
        finally:
            self._acks.pop(ack, None)
        return True

    def _waiter(self, request_id: str, sid: str, principal: str) -> _Waiter | None:
        waiter = self.waiters.get(request_id)
        if waiter is None or waiter.future.done():
            return None  # answered already, timed out, or the call is over
        if waiter.sid != sid or waiter.principal != principal:
            logger.warning("dropped a reply to %s sent from another session", request_id)
            return None
        return waiter

    def deliver(self, request_id: str, message: dict[str, Any], sid: str, principal: str) -> None:
        waiter = self._waiter(request_id, sid, principal)
        if waiter is not None:
            waiter.future.set_result(message)

    def lost(self, request_id: str, sid: str, principal: str) -> None:
        """The client's reply to ``request_id`` was sent but could not be forwarded here."""
        waiter = self._waiter(request_id, sid, principal)
        if waiter is not None:
            waiter.future.set_exception(
                MCPError(INTERNAL_ERROR, "the client's reply could not be forwarded to this server instance")
            )

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
                await asyncio.wait_for(
                    self.layer.group_send(_GROUP, {"type": "mcp.cancel", "sid": sid, "rid": rid}), LAYER_TIMEOUT
                )
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
        # The whole session ends: so do its standalone GET streams here.
        for stream in list(self.session_streams.get(sid, ())):
            stream.end()
        return False  # other workers may hold calls of this session too

    # -- resuming a stream another worker holds ---------------------------------------------

    async def follow_remote(self, channel: str, key: str, after: int, sid: str) -> AsyncIterator[bytes] | None:
        """The events after ``after`` of stream ``key`` held on ``channel``; None when it has no such stream."""
        if not self.shared:
            return None  # the in-memory layer ends at this process: nobody else holds streams
        tap = str(next(self._tap_ids))
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._taps[tap] = queue
        request = {"type": "mcp.resume", "key": key, "after": after, "sid": sid, "to": self.channel, "tap": tap}
        try:
            await asyncio.wait_for(self.layer.send(channel, request), LAYER_TIMEOUT)
            first = await asyncio.wait_for(queue.get(), RESUME_WAIT_SECONDS)
        except Exception:
            # The holder is gone (its channel unknown or full, or no answer): nothing to resume.
            self._taps.pop(tap, None)
            return None
        if not first.get("found"):
            self._taps.pop(tap, None)
            return None
        return self._remote_events(channel, tap, queue)

    async def _remote_events(
        self, channel: str, tap: str, queue: asyncio.Queue[dict[str, Any]]
    ) -> AsyncIterator[bytes]:
        ended = False
        try:
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), _RESUME_IDLE_SECONDS)
                except TimeoutError:
                    return  # the holder went away: the client may resume again
                for event in message.get("events", ()):
                    yield bytes(event)
                if message.get("end"):
                    ended = True
                    return
        finally:
            self._taps.pop(tap, None)
            if not ended:
                # Our client left first: the holder stops forwarding.
                with contextlib.suppress(Exception):
                    await self.layer.send(channel, {"type": "mcp.resume.stop", "to": self.channel, "tap": tap})

    def _serve_resume(self, message: dict[str, Any]) -> None:
        to, tap = str(message["to"]), str(message["tap"])
        stream = self.streams.get(str(message["key"]))
        if stream is None or stream.sid != message["sid"]:
            # Unknown, expired, or another session's: the same answer for all three.
            task = asyncio.ensure_future(self._send_quietly(to, {"type": "mcp.events", "tap": tap, "found": False}))
        else:
            task = asyncio.ensure_future(stream.forward(self, to, tap, int(message["after"])))
            self._forwards[(to, tap)] = task
            task.add_done_callback(lambda _t: self._forwards.pop((to, tap), None))
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    def keep(self, task: asyncio.Task[Any]) -> None:
        """Run ``task`` as long as this relay: :meth:`stop` cancels it."""
        self._tasks.append(task)

    def keep_quietly(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    async def _send_quietly(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await asyncio.wait_for(self.layer.send(channel, message), LAYER_TIMEOUT)
        except Exception as exc:
            logger.warning("could not send %s to %s (%s)", message.get("type"), channel, type(exc).__name__)

    # -- resource updates -----------------------------------------------------------------------

    def watch(self, listener: Callable[[str], None]) -> None:
        self.watchers.add(listener)

    def unwatch(self, listener: Callable[[str], None]) -> None:
        self.watchers.discard(listener)

    def updated(self, uri: str) -> None:
        for listener in list(self.watchers):
            try:
                listener(uri)
            except Exception:
                logger.exception("a resource update listener failed")

    # -- the reader --------------------------------------------------------------------------

    async def _read(self) -> None:
        assert self.layer is not None
        failing = False
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if _idle_timeout(exc):
                    # The client's socket timeout ended an idle blocking read: nothing
                    # was lost, read again (docs/deployment.md: socket_timeout above 5 s).
                    continue
                if not failing:
                    # Once per outage, one line: while Redis is down this repeats every second.
                    logger.warning("the reply channel failed (%s: %s); retrying", type(exc).__name__, exc)
                failing = True
                await asyncio.sleep(1)
                if self.shared and await self._join_once(quiet=True):
                    # The layer answers again: group membership may have gone with Redis's memory.
                    logger.warning("the reply channel is back; rejoined %s", _GROUP)
                    failing = False
                continue
            try:
                kind = message.get("type")
                if kind == "mcp.reply":
                    self.deliver(str(message["id"]), dict(message["message"]), str(message["sid"]), str(message["p"]))
                    if "to" in message:
                        # Received: the forwarding worker answers its client 202.
                        ack = {"type": "mcp.reply.ack", "ack": str(message["ack"])}
                        self.keep_quietly(self._send_quietly(str(message["to"]), ack))
                elif kind == "mcp.reply.ack":
                    acked = self._acks.get(str(message["ack"]))
                    if acked is not None and not acked.done():
                        acked.set_result("ok")
                elif kind == "mcp.reply.lost":
                    self.lost(str(message["id"]), str(message["sid"]), str(message["p"]))
                elif kind == "mcp.cancel":
                    self._cancel_local(str(message["sid"]), message.get("rid"))
                elif kind == "mcp.updated":
                    self.updated(str(message["uri"]))
                elif kind == "mcp.events":
                    queue = self._taps.get(str(message["tap"]))
                    if queue is not None:
                        queue.put_nowait(message)
                elif kind == "mcp.resume":
                    self._serve_resume(message)
                elif kind == "mcp.resume.stop":
                    forward = self._forwards.get((str(message["to"]), str(message["tap"])))
                    if forward is not None:
                        forward.cancel()
            except (KeyError, TypeError, ValueError):
                logger.warning("ignored a malformed message on the reply channel")

    async def _join_once(self, *, quiet: bool = False) -> bool:
        try:
            await asyncio.wait_for(self.layer.group_add(_GROUP, self.channel), LAYER_TIMEOUT)
        except Exception as exc:
            if not quiet:
                logger.warning("could not join %s (%s); retrying", _GROUP, type(exc).__name__)
            return False
        return True

    async def _join(self, *, renew_first: bool) -> None:
        assert self.layer is not None
        if renew_first:
            await asyncio.sleep(_GROUP_RENEW_SECONDS)
        while True:
            if not await self._join_once(quiet=True):
                await asyncio.sleep(1)
                continue
            await asyncio.sleep(_GROUP_RENEW_SECONDS)

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        if self.shared and self.channel:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(_GROUP, self.channel)


_refused_logged = False


def _refused_once(channel: str) -> None:
    """Say once per process that replies to unknown channels are refused: a client
    sending them on every request must not write a line (or a traceback) each time."""
    global _refused_logged
    if not _refused_logged:
        _refused_logged = True
        logger.warning(
            "refused a reply addressed to %r, a channel no worker of this server has "
            "(a client's made-up or stale id); later ones are refused without a word",
            channel[:100],
        )


def _is_worker_channel(channel: str) -> bool:
    """Whether ``channel`` can name a relay's channel. A reply naming anything else
    (made up by the client) is no reply of ours: it is refused before it reaches the
    layer, which would otherwise keep it (the in-memory layer, for ever) or raise."""
    return (
        channel.startswith((f"{_PREFIX}.", "local."))
        and len(channel) < 100
        and channel.isascii()
        and all(c.isalnum() or c in "-_.!" for c in channel)
    )


_relays: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Relay] = weakref.WeakKeyDictionary()


def _idle_timeout(exc: BaseException) -> bool:
    """A client-side timeout of the layer's blocking read (redis-py's socket_timeout)."""
    return type(exc).__name__ == "TimeoutError" and type(exc).__module__.startswith("redis")


async def relay() -> Relay:
    """This event loop's relay, started on first use."""
    loop = asyncio.get_running_loop()
    found = _relays.get(loop)
    if found is None:
        found = _relays[loop] = Relay()
    try:
        await found.start()
    except Exception:
        logger.warning("the channel layer is unavailable", exc_info=True)
        raise Unavailable("the channel layer") from None
    return found


async def announce(uri: str) -> None:
    """Tell every worker's listeners that the resource at ``uri`` changed."""
    layer = get_channel_layer()
    if layer is not None and not isinstance(layer, InMemoryChannelLayer):
        # Every worker, this one included, hears it from the group (the relay's reader).
        await layer.group_send(_GROUP, {"type": "mcp.updated", "uri": uri})
        return
    # One process: its relays (one per event loop) are all there is.
    for hub in list(_relays.values()):
        if hub.loop is not None and not hub.loop.is_closed():
            hub.loop.call_soon_threadsafe(hub.updated, uri)


_announcing: set[asyncio.Future[Any]] = set()


async def _announce_logged(uri: str) -> None:
    try:
        await announce(uri)
    except Exception:
        logger.warning("could not announce an update of %s", uri, exc_info=True)


def announce_soon(uri: str) -> None:
    """:func:`announce` from any code, sync or async, on any thread; returns without waiting."""
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        task = loop.create_task(_announce_logged(uri))
        _announcing.add(task)  # a task nobody references may be collected before it runs
        task.add_done_callback(_announcing.discard)
        return
    # A sync caller: a worker thread of a served loop (a sync handler), or none at all
    # (a management command, a WSGI view). Prefer the served loop: its layer is connected.
    for hub in list(_relays.values()):
        if hub.loop is not None and hub.loop.is_running():
            future = asyncio.run_coroutine_threadsafe(_announce_logged(uri), hub.loop)
            _announcing.add(future)  # type: ignore[arg-type]
            future.add_done_callback(_announcing.discard)
            return
    from asgiref.sync import async_to_sync

    async_to_sync(_announce_logged)(uri)


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
