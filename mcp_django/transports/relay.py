"""The cross-worker side of legacy Streamable HTTP: replies, cancellations and resumed streams
(docs/legacy.md, "Many processes"; docs/deployment.md, "A reply crossing instances is reported as it went")."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ..conf import mcp_settings
from ..protocol.jsonrpc import INTERNAL_ERROR, MCPError, Unavailable, dumps
from ..worker_channel import GROUP, PREFIX, WorkerChannel, is_worker_channel, layer_call, worker_channel

logger = logging.getLogger("mcp_django")

# How long a forwarder waits for the holder's acknowledgment before it asks what became of the
# reply (a live layer's round trip takes milliseconds), then how long for the answer.
REPLY_ACK_PROMPT = 0.25
REPLY_ACK_SECONDS = 3
REPLY_VERDICT_SECONDS = 2
# How long a holder remembers what became of each forwarded reply (above the forwarder's waits).
_OUTCOME_SECONDS = 60
# How long a resuming worker waits for the holder to say whether it has the stream.
RESUME_WAIT_SECONDS = 5
# A holder forwarding a quiet stream says so this often; a follower that hears nothing for
# _RESUME_IDLE_SECONDS takes the holder for gone and ends its client's stream.
RESUME_KEEPALIVE_SECONDS = 5
_RESUME_IDLE_SECONDS = 3 * RESUME_KEEPALIVE_SECONDS


@dataclass
class Replies:
    """A :class:`~mcp_django.asks.live.LiveSession`'s replies (a legacy HTTP call's, or a socket's): ids
    for our requests from ``new_id``, awaited in ``waiting`` (the relay's, shared by its calls); a reply
    is taken only from the session and principal its request was sent under."""

    new_id: Callable[[], str]
    sid: str = ""
    principal: str = ""
    # By request id: (the reply's future, the session and principal the request was sent under).
    waiting: dict[str, tuple[asyncio.Future[dict[str, Any]], str, str]] = field(default_factory=dict)

    def open(self) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        request_id = self.new_id()
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future, self.sid, self.principal
        return request_id, future

    def close(self, request_id: str | int) -> None:
        self.waiting.pop(str(request_id), None)

    def take(self, request_id: Any, sid: str, principal: str) -> asyncio.Future[dict[str, Any]] | None:
        waiter = self.waiting.get(request_id) if isinstance(request_id, str) else None
        if waiter is None:
            return None  # timed out, or the call is over
        future, held_sid, held_principal = waiter
        if future.done():
            return None  # answered already
        if (held_sid, held_principal) != (sid, principal):
            logger.warning("dropped a reply to %s sent from another session", request_id)
            return None
        return future

    def deliver(self, message: dict[str, Any], sid: str = "", principal: str = "") -> None:
        future = self.take(message.get("id"), sid, principal)
        if future is not None:
            future.set_result(message)


def call_key(sid: str, request_id: Any) -> tuple[str, str]:
    """In-flight calls by session and the client's request id (1 and "1" are different ids)."""
    return sid, dumps(request_id).decode()


class Relay:
    """One per event loop: the waiters and the calls in flight, on the worker's channel of that loop."""

    refused_said = False

    def __init__(self, worker: WorkerChannel) -> None:
        self.worker = worker
        # Numbers everything this relay names: our requests, forwarded replies, resumes, streams.
        self.ids = itertools.count(1)
        # What other workers answer this relay, by the id it gave them: whether the holder took a reply
        # forwarded from here (its ack id), a stream another worker holds, resumed here (its tap id).
        self._answers: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        # Replies forwarded here, by (forwarder's channel, ack id): taken or lost, and when, oldest first.
        self._outcomes: dict[tuple[str, str], tuple[bool, float]] = {}
        # Our requests to clients awaiting replies, by id (mcp-django:<n>:<channel>).
        self.held = Replies(lambda: f"{PREFIX}:{next(self.ids)}:{self.worker.channel}")
        self.calls: dict[tuple[str, str], asyncio.Task[Any]] = {}
        # Legacy response streams of this worker, by key, kept for resumption (Last-Event-ID).
        self.streams: dict[str, Any] = {}
        # Streams held here forwarded to another worker's resume, by (its channel, its tap id).
        self._forwards: dict[tuple[str, str], asyncio.Task[Any]] = {}
        # Legacy standalone GET streams of this worker, by session: ended with their session.
        self.session_streams: dict[str, set[Any]] = {}
        # The legacy transport's delivery of resource updates to session_streams (set at the first GET stream).
        self.session_updates: Any = None
        worker.on("mcp.reply", functools.partial(self._decide, taken=True))
        worker.on("mcp.reply.ack", functools.partial(self._answered, "ack"))
        worker.on("mcp.reply.lost", functools.partial(self._decide, taken=False))
        worker.on("mcp.cancel", self._cancel_local)
        worker.on("mcp.events", functools.partial(self._answered, "tap"))
        worker.on("mcp.resume", self._serve_resume)
        worker.on("mcp.resume.stop", self._on_resume_stop)

    # -- our requests and their replies ----------------------------------------------------

    def replies(self, sid: str, principal: str) -> Replies:
        """A legacy call's :class:`Replies`: their ids name this worker's channel."""
        return dataclasses.replace(self.held, sid=sid, principal=principal)

    async def route_reply(self, message: dict[str, Any], sid: str, principal: str) -> bool:
        """Deliver a client's reply to whichever worker waits for it. False: not an id of ours.
        :class:`Unavailable` when it cannot reach that worker (a holder still there fails the ask)."""
        request_id = message.get("id")
        if not isinstance(request_id, str):
            return False
        prefix, _, rest = request_id.partition(":")
        number, _, channel = rest.partition(":")
        if prefix != PREFIX or not number.isdigit():
            return False
        if not is_worker_channel(channel):
            return self._refused(channel)
        if channel == self.worker.channel:
            self.held.deliver(message, sid, principal)
            return True
        if not self.worker.shared:
            # One process: only its own relays (one per event loop) can hold the request.
            for hub in list(_relays.values()):
                loop = hub.worker.loop
                if hub.worker.channel == channel and loop is not None and not loop.is_closed():
                    loop.call_soon_threadsafe(hub.held.deliver, message, sid, principal)
                    return True
            return self._refused(channel)
        ack = str(next(self.ids))
        acks = self._answers[ack] = asyncio.Queue[dict[str, Any]]()
        about = {"id": request_id, "sid": sid, "p": principal, "ack": ack, "to": self.worker.channel}
        sent_at: float | None = None
        try:
            try:
                await self.worker.send(channel, {"type": "mcp.reply", "message": message, **about})
                sent_at = asyncio.get_running_loop().time()
                taken = await _taken(acks, min(REPLY_ACK_PROMPT, REPLY_ACK_SECONDS))
            except Exception as exc:
                if sent_at is None:
                    logger.warning("could not forward a reply to %s (%s)", channel, type(exc).__name__)
                taken = await self._verdict(channel, {"type": "mcp.reply.lost", **about}, acks, sent_at)
        finally:
            self._answers.pop(ack, None)
        if not taken:
            raise Unavailable("the server instance holding this request")
        return True

    @classmethod
    def _refused(cls, channel: str) -> bool:
        """False, said once per process: a client sending replies to unknown channels on every
        request must not write a line (or a traceback) each time."""
        if not cls.refused_said:
            cls.refused_said = True
            logger.warning(
                "refused a reply addressed to %r, a channel no worker of this server has "
                "(a client's made-up or stale id); later ones are refused without a word",
                channel[:100],
            )
        return False

    async def _verdict(
        self, channel: str, question: dict[str, Any], acks: asyncio.Queue[dict[str, Any]], sent_at: float | None
    ) -> bool:
        """No acknowledgment yet: whether the holder took the reply, as it says when asked (a question
        the layer cannot carry: taken when the layer took the reply, docs/deployment.md)."""
        loop = asyncio.get_running_loop()
        budget = None if sent_at is None else max(sent_at + mcp_settings.CHANNEL_LAYER_TIMEOUT - loop.time(), 0.05)
        try:
            await asyncio.wait_for(self.worker.send(channel, question), budget)
        except (Unavailable, TimeoutError):
            return sent_at is not None
        except Exception:
            return False
        with contextlib.suppress(TimeoutError):
            return await _taken(acks, REPLY_ACK_SECONDS + REPLY_VERDICT_SECONDS)
        return False

    # -- cancellation ------------------------------------------------------------------------

    async def cancel(self, sid: str, request_id: Any = None) -> None:
        """Cancel one call of a session (``request_id``) or all of them (None), on every worker."""
        rid = None if request_id is None else call_key(sid, request_id)[1]
        message = {"type": "mcp.cancel", "sid": sid, "rid": rid}
        if self._cancel_local(message) or not self.worker.shared:
            return
        try:
            await layer_call(lambda: self.worker.layer.group_send(GROUP, message))
        except Exception as exc:
            logger.warning("could not broadcast a cancellation (%s)", type(exc).__name__)

    def _cancel_local(self, message: dict[str, Any]) -> bool:
        """An ``mcp.cancel`` (ours, or another worker's) here; True when the one call it names ran here."""
        sid, rid = str(message["sid"]), message.get("rid")
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
        if not self.worker.shared:
            return None  # the in-memory layer ends at this process: nobody else holds streams
        tap = str(next(self.ids))
        queue = self._answers[tap] = asyncio.Queue[dict[str, Any]]()
        request = {"type": "mcp.resume", "key": key, "after": after, "sid": sid, "to": self.worker.channel, "tap": tap}
        try:
            await self.worker.send(channel, request)
            first = await asyncio.wait_for(queue.get(), RESUME_WAIT_SECONDS)
        except Exception:
            first = {}  # the holder is gone (its channel unknown or full, or no answer)
        if not first.get("found"):
            self._answers.pop(tap, None)
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
            self._answers.pop(tap, None)
            if not ended:
                # Our client left first: the holder stops forwarding.
                with contextlib.suppress(Exception):
                    await self.worker.send(channel, {"type": "mcp.resume.stop", "to": self.worker.channel, "tap": tap})

    def _serve_resume(self, message: dict[str, Any]) -> None:
        to, tap = str(message["to"]), str(message["tap"])
        stream = self.streams.get(str(message["key"]))
        if stream is None or stream.sid != message["sid"]:
            # Unknown, expired, or another session's: the same answer for all three.
            self.worker.post(to, {"type": "mcp.events", "tap": tap, "found": False})
        else:
            task = asyncio.ensure_future(stream.forward(to, tap, int(message["after"])))
            self._forwards[(to, tap)] = task
            task.add_done_callback(lambda _t: self._forwards.pop((to, tap), None))
            self.worker.keep(task)

    # -- what the worker's channel reads for us ------------------------------------------------

    def _decide(self, message: dict[str, Any], *, taken: bool) -> None:
        """A forwarded reply (``taken``), or its forwarder's question whether it came: whichever
        arrives first decides, and the forwarder, told, answers its client 202 or 503."""
        to, ack = str(message["to"]), str(message["ack"])
        now = asyncio.get_running_loop().time()
        for old, (_taken, at) in list(self._outcomes.items()):
            if now - at < _OUTCOME_SECONDS:
                break  # oldest first: the rest are younger
            del self._outcomes[old]
        decided = self._outcomes.setdefault((to, ack), (taken, now))[0]
        if decided == taken:  # this message arrived first: the ask takes the reply, or fails
            waiter = self.held.take(str(message["id"]), str(message["sid"]), str(message["p"]))
            if waiter is not None and taken:
                waiter.set_result(dict(message["message"]))
            elif waiter is not None:
                lost = "the client's reply could not be forwarded to this server instance"
                waiter.set_exception(MCPError(INTERNAL_ERROR, lost))
        self.worker.post(to, {"type": "mcp.reply.ack", "ack": ack, "taken": decided})

    def _answered(self, key: str, message: dict[str, Any]) -> None:
        queue = self._answers.get(str(message[key]))
        if queue is not None:
            queue.put_nowait(message)

    def _on_resume_stop(self, message: dict[str, Any]) -> None:
        forward = self._forwards.get((str(message["to"]), str(message["tap"])))
        if forward is not None:
            forward.cancel()


async def _taken(acks: asyncio.Queue[dict[str, Any]], timeout: float) -> bool:
    """Whether the holder took a forwarded reply, as its acknowledgment says (within ``timeout``)."""
    return bool((await asyncio.wait_for(acks.get(), timeout)).get("taken", True))


_relays: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Relay] = weakref.WeakKeyDictionary()


async def relay() -> Relay:
    """This event loop's relay, its worker's channel started on first use."""
    worker = await worker_channel()
    loop = asyncio.get_running_loop()
    found = _relays.get(loop)
    if found is None:
        found = _relays[loop] = Relay(worker)
    return found
