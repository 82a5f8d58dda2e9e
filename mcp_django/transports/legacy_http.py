"""Streamable HTTP for the legacy revisions (docs/legacy.md): sessions (``Mcp-Session-Id``, a sealed
record of :mod:`mcp_django.protocol.legacy`), SSE answers a client may resume on any worker, replies
by POST (routed by :mod:`mcp_django.transports.relay`), the standalone ``GET`` stream, ``DELETE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..asks.call import Call
from ..asks.live import LiveSession
from ..auth import AuthenticationFailed, Principal
from ..conf import mcp_settings
from ..pipeline import answer
from ..protocol import jsonrpc, legacy
from ..protocol.dispatch import LEGACY_METHODS
from ..protocol.jsonrpc import INVALID_REQUEST, MCPError, Unavailable, notification
from ..protocol.revisions import LEGACY_VERSIONS, MODERN_VERSIONS
from ..registry import Registry
from ..resource_updates import listeners
from .http import (
    JSON,
    NO_LEGACY_HERE,
    SSE,
    Disconnect,
    HttpEndpoint,
    HttpIn,
    HttpOut,
    Response,
    json_out,
    not_mcp,
    refused,
    sse_comment,
    sse_event,
    sse_message,
    sse_out,
)
from .relay import RESUME_KEEPALIVE_SECONDS, Relay, call_key, relay

logger = logging.getLogger("mcp_django")

# A reply to a request the client cancelled has no response body of its own (JSON-RPC reserved range).
REQUEST_CANCELLED = -32800
# The reconnection delay the priming event suggests, in milliseconds.
RETRY_MS = 1000
# How long a finished call's events stay available to a client resuming its stream.
RESUME_SECONDS = 60

KEEPALIVE = sse_comment("keepalive")


def _refused(status: int, text: str) -> HttpOut:
    return refused(None, MCPError(INVALID_REQUEST, text, http_status=status))


class LegacyStream:
    """The events of one call's response, kept a while after the call ends. Event ids are
    ``<key>.<n>@<channel>``: the worker holding them, should the resuming ``GET`` reach another."""

    def __init__(self, hub: Relay, sid: str) -> None:
        self.hub = hub
        self.sid = sid
        self.key = str(next(hub.ids))
        self.events: list[bytes] = []
        self.changed = asyncio.Event()
        self.finished = False
        # Bumped by close(): followers attached before it end their connection.
        self.cuts = 0
        # Clients reading the stream now (here or through another worker); when none has
        # for ABANDONED_STREAM_SECONDS, on_abandoned gives the call up.
        self.followers = 0
        self.on_abandoned: Callable[[], Any] | None = None
        self._abandon: asyncio.TimerHandle | None = None
        hub.streams[self.key] = self

    def event_id(self, n: int) -> str:
        return f"{self.key}.{n}@{self.hub.worker.channel}"

    def push(self, message: dict[str, Any]) -> None:
        self.events.append(sse_message(message, event_id=self.event_id(len(self.events) + 1)))
        self.changed.set()

    def close(self) -> None:
        """End the client's connection now; the call goes on and the client may resume."""
        self.cuts += 1
        self.changed.set()

    async def serve(self, handle: Callable[[Call], Awaitable[dict[str, Any]]], call: Call) -> None:
        """Answer the call on this stream, whoever follows it."""
        self.push((await answer(handle, call))[1])
        self.finished = True
        self._keep()
        asyncio.get_running_loop().call_later(RESUME_SECONDS, self.hub.streams.pop, self.key, None)

    @contextlib.contextmanager
    def _followed(self) -> Iterator[None]:
        """A client reading the stream, here or through another worker."""
        self.followers += 1
        self._keep()
        try:
            yield
        finally:
            self.followers -= 1
            if self.followers == 0 and not self.finished and self.on_abandoned is not None:
                # Unless someone resumes in time, the call is cancelled: that withdraws its asks (a
                # sync handler waiting in one gets AskAborted, and its thread is freed).
                self._abandon = asyncio.get_running_loop().call_later(
                    mcp_settings.ABANDONED_STREAM_SECONDS, self.on_abandoned
                )

    def _keep(self) -> None:
        if self._abandon is not None:
            self._abandon.cancel()
            self._abandon = None

    async def _batches(self, sent: int, cuts: int, keepalive: float | None) -> AsyncIterator[tuple[list[bytes], bool]]:
        """(events after ``sent``, whether they are the last) as they come, until the call
        finishes or :meth:`close` bumps ``cuts``; ``([], False)`` after ``keepalive`` quiet seconds."""
        while True:
            # Cleared before the events are read, never after an await: an event pushed
            # while the consumer is away sets it again, and the wait returns at once.
            self.changed.clear()
            batch = self.events[sent:]
            sent += len(batch)
            done = (self.finished and sent >= len(self.events)) or self.cuts != cuts
            if batch or done:
                yield batch, done
            if done:
                return
            try:
                await asyncio.wait_for(self.changed.wait(), keepalive)
            except TimeoutError:
                yield [], False  # a quiet call (a user thinking): keep the connection alive

    async def follow(self, after: int, *, prime: bool) -> AsyncIterator[bytes]:
        batches = self._batches(after, self.cuts, mcp_settings.SSE_KEEPALIVE or None)
        with self._followed():
            if prime:
                yield sse_event(b"", event_id=self.event_id(0), retry_ms=RETRY_MS)
            async for batch, done in batches:
                for event in batch:
                    yield event
                if not batch and not done:
                    yield KEEPALIVE  # proxies must not cut a waiting call

    async def forward(self, to: str, tap: str, after: int) -> None:
        """:meth:`follow` for a client that resumed on another worker: events sent to its channel."""
        batches = self._batches(after, self.cuts, RESUME_KEEPALIVE_SECONDS)
        with self._followed():
            try:
                await self.hub.worker.send(to, {"type": "mcp.events", "tap": tap, "found": True})
                async for batch, done in batches:
                    await self.hub.worker.send(to, {"type": "mcp.events", "tap": tap, "events": batch, "end": done})
            except Unavailable:
                # The layer is away (said once, by its breaker): the follower gives up on its own.
                logger.warning("stopped forwarding a resumed stream to %s (the channel layer is unavailable)", to)
            except Exception:
                # The follower's channel is gone or full: it gives up on its own after a while.
                logger.warning("stopped forwarding a resumed stream to %s", to, exc_info=True)


class SessionStream:
    """A session's standalone GET stream: the resource updates it subscribed to, and the
    registry's list changes (initialize declares ``listChanged``)."""

    def __init__(self, hub: Relay, sid: str, prime: bool, registry: Registry) -> None:
        self.hub = hub
        self.sid = sid
        self.prime = prime
        self.registry = registry
        # Names this stream in the cache: only the session's latest GET stream is told.
        self.token = f"{hub.worker.channel}!{os.urandom(6).hex()}"
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def push(self, message: dict[str, Any]) -> None:
        self.queue.put_nowait(sse_message(message))

    def end(self) -> None:
        self.queue.put_nowait(None)

    async def events(self) -> AsyncIterator[bytes]:
        streams = self.hub.session_streams.setdefault(self.sid, set())
        for older in list(streams):
            older.end()  # superseded by this one (a client reconnecting its GET)
        streams.add(self)
        updates = await listeners()
        if self.hub.session_updates is None:  # the relay's first GET stream: it delivers resource updates
            self.hub.session_updates = uris = asyncio.Queue[str]()
            updates.watch(uris.put_nowait)
            self.hub.worker.keep(asyncio.ensure_future(_deliver_updates(self.hub, uris)))
        loop = asyncio.get_running_loop()

        def list_changed(listing: str) -> None:
            self.push(notification(f"notifications/{listing}/list_changed"))

        self.registry.subscribe(list_changed)
        try:
            # No event id: nothing here is replayed; the retry field paces reconnection.
            # Older clients parse every event's data, so they get a comment instead.
            yield sse_event(b"", retry_ms=RETRY_MS) if self.prime else sse_comment("stream open")
            keepalive = mcp_settings.SSE_KEEPALIVE
            idle_limit = mcp_settings.STREAM_IDLE_TIMEOUT
            last = loop.time()
            while True:
                wait = [t for t in (keepalive, idle_limit and last + idle_limit - loop.time()) if t]
                try:
                    chunk = await asyncio.wait_for(self.queue.get(), min(wait) if wait else None)
                except TimeoutError:
                    if idle_limit and loop.time() - last >= idle_limit:
                        return  # idle for long: a client still there reconnects (retry)
                    yield KEEPALIVE
                    continue
                if chunk is None:
                    return
                last = loop.time()
                yield chunk
        finally:
            self.registry.unsubscribe(list_changed)
            streams.discard(self)
            if not streams:
                self.hub.session_streams.pop(self.sid, None)


async def _deliver_updates(hub: Relay, uris: asyncio.Queue[str]) -> None:
    """``notifications/resources/updated`` to the streams whose session subscribed, in announcement order."""
    while True:
        uri = await uris.get()
        streams = {(s.sid, s.token): s for ss in hub.session_streams.values() for s in ss}
        if not streams:
            continue
        try:
            chosen = await legacy.subscribers(streams, uri)  # one cache round trip for all
        except Exception as exc:
            # Unavailable (said once by its breaker) or a cache error: one line.
            logger.warning("could not read subscriptions for %s (%s)", uri, exc)
            continue
        for key in chosen:
            streams[key].push(notification("notifications/resources/updated", {"uri": uri}))


@dataclass(slots=True)
class HttpSession:
    """A legacy HTTP session's :class:`~mcp_django.protocol.legacy.SessionControl`: its
    sealed record, and what changes during it in the session cache."""

    endpoint: str
    record: legacy.SessionRecord | None = None

    async def open(self, call: Call) -> legacy.SessionRecord:
        # Only the handshake's control opens a session, and handle_legacy() gives it no record.
        self.record = await legacy.open_record(call.params, call.principal.digest, self.endpoint)
        return self.record

    async def set_log_level(self, level: str) -> None:
        assert self.record is not None
        await legacy.set_state(self.record, "level", level)

    async def subscribe(self, uri: str, on: bool) -> None:
        assert self.record is not None
        await legacy.set_subscribed(self.record, uri, on)

    async def cancel(self, request_id: Any) -> None:
        assert self.record is not None
        await (await relay()).cancel(self.record.sid, request_id)


class LegacyHttp(HttpEndpoint):
    """:class:`~.http.HttpEndpoint` with the legacy sessions' side (2025-11-25 and earlier)."""

    async def _session(
        self, req: HttpIn, principal: Principal, request_id: Any = None
    ) -> tuple[legacy.SessionRecord, str | None] | HttpOut:
        """The request's open session and its log level, or the HTTP answer refusing it."""
        token = req.headers.get("mcp-session-id")
        if token is None:
            return _refused(400, "Mcp-Session-Id header is required: send initialize first")
        record = legacy.open_session(token)
        if record is None or record.endpoint != self.registry.name:
            return _refused(404, "Session not found")
        if not principal.matches(record.principal):
            return _refused(403, "this session belongs to another user")
        version = req.headers.get("mcp-protocol-version")
        # Any revision a session can speak is accepted, not only the one negotiated (as the
        # official SDK's server does; conformance's multiple-streams scenario relies on it).
        if version is not None and version not in LEGACY_VERSIONS:
            why = "has no sessions" if version in MODERN_VERSIONS else "is not supported"
            return refused(
                request_id,
                MCPError(
                    INVALID_REQUEST,
                    f"MCP-Protocol-Version {version} {why}; a session speaks {', '.join(LEGACY_VERSIONS)}",
                    {"supported": list(LEGACY_VERSIONS), "requested": version},
                    http_status=400,
                ),
            )
        ended, level = await legacy.session_status(record)
        if ended:
            return _refused(404, "Session not found (it has ended)")
        return record, level

    async def handle_legacy(self, req: HttpIn, message: Any, shape: str, disconnected: Disconnect | None) -> HttpOut:
        """A valid message of the legacy era (``shape``, as :func:`~mcp_django.protocol.jsonrpc.classify` says)."""
        request_id = message.get("id")
        pipeline = self.pipeline
        try:
            # Django's request is built only if the credentials are not in the principal cache.
            principal = await pipeline.authenticate(req, req.request_factory)
            if shape == "request" and message["method"] == "initialize":
                # The handshake opens a session (whatever Mcp-Session-Id the request carries).
                call = self._call(req, message, principal)
                out = await self.direct(call)
                if call.control.record is not None:
                    out.headers.append(("mcp-session-id", legacy.seal_session(call.control.record)))
                return out
            found = await self._session(req, principal, request_id if shape == "request" else None)
            if isinstance(found, HttpOut):
                return found
            record, level = found
            if shape == "notification":
                await pipeline.notified(self._call(req, message, principal, record, level))
                return HttpOut(202)
            if shape == "response":
                if not await (await relay()).route_reply(message, record.sid, record.principal):
                    return _refused(400, "this response answers no request of this server")
                return HttpOut(202)
            call = self._call(req, message, principal, record, level)
            if message["method"] in LEGACY_METHODS:
                return await self.direct(call)  # the session's own methods: answered at once, in JSON
            hub = await relay()
            call.session = LiveSession(record, hub.replies(record.sid, record.principal))
            pipeline.dispatcher.require_scopes(call)  # before the stream's 200: a 403 the client can step up from
            accept = req.headers.get("accept", "*/*")  # (legacy is served only where the server can stream)
            stream = LegacyStream(hub, record.sid) if SSE in accept or "*/*" in accept else None
            tracked = functools.partial(self._tracked, hub, record.sid, stream)
            if stream is None:
                # JSON only: the call can answer, but its asks have nowhere to go (a clear error).
                return await Response(tracked, call, False, disconnected).out()
            call.notify = stream.push
            prime = legacy.primes(record)
            if prime:
                # Before 2025-11-25 a client does not resume a stream the server closed: it would hang.
                call.session.close_stream = stream.close
            # Not tied to this connection: the client may drop it and resume, the call goes on.
            hub.worker.keep(asyncio.ensure_future(stream.serve(tracked, call)))
            return sse_out(stream.follow(0, prime=prime))
        except AuthenticationFailed as exc:
            return refused(request_id, exc)
        except MCPError as exc:
            # The handler's scopes the token lacks (403), or Unavailable: the session store, the
            # channel layer or the database is down or hung (503, never a 500).
            return refused(request_id if shape == "request" else None, exc)

    async def _tracked(self, hub: Relay, sid: str, stream: LegacyStream | None, call: Call) -> dict[str, Any]:
        """:meth:`Pipeline.handle <mcp_django.pipeline.Pipeline.handle>` in a task the relay tracks:
        ``notifications/cancelled`` and ``DELETE`` cancel it from any worker, and so does a stream
        nobody reads any more (nor resumed)."""
        inner = asyncio.ensure_future(self.pipeline.handle(call))
        key = call_key(sid, call.request_id)
        hub.calls[key] = inner
        if stream is not None:
            stream.on_abandoned = inner.cancel
        try:
            return await inner
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if inner.cancelled() and current is not None and not current.cancelling():
                # Cancelled for the client (notifications/cancelled, DELETE, an abandoned stream), not by us.
                raise MCPError(REQUEST_CANCELLED, "Request cancelled") from None
            raise
        finally:
            hub.calls.pop(key, None)

    def _call(
        self,
        req: HttpIn,
        message: dict[str, Any],
        principal: Principal,
        record: legacy.SessionRecord | None = None,
        level: str | None = None,
    ) -> Call:
        return Call.in_session(
            message,
            record,
            transport=req.transport,
            principal=principal,
            client_address=req.client_address,
            request_factory=req.request_factory,
            log_level=level,
            session=None,
            control=HttpSession(self.registry.name, record),
        )

    async def direct(self, call: Call) -> HttpOut:
        """A call answered in JSON once it is done; an outage is a 503 (see :meth:`handle_legacy`)."""
        try:
            result = await self.pipeline.handle(call)
        except Unavailable:
            raise
        except Exception as exc:
            return json_out(*mcp_settings.EXCEPTION_HANDLER(exc, call))
        return json_out(200, jsonrpc.response(call.request_id, result), None)

    async def handle_other(self, req: HttpIn) -> HttpOut:
        """GET and DELETE on the endpoint; anything else is no MCP request here (:func:`~.http.not_mcp`)."""
        if req.method == "DELETE":
            last_event = None
        elif req.method == "GET":
            last_event = req.headers.get("last-event-id")
            if last_event is None and "mcp-session-id" not in req.headers:
                return not_mcp(req)  # a standalone stream belongs to a legacy session (2026-07-28 has none)
            if not req.can_stream:
                return refused(None, NO_LEGACY_HERE)  # a stream (the WSGI view would send it empty)
        else:
            return not_mcp(req)
        try:
            principal = await self.pipeline.authenticate(req, req.request_factory)
            found = await self._session(req, principal)
            if isinstance(found, HttpOut):
                return found
            record = found[0]
            if last_event is not None:
                return await self.resume(record, last_event)
            if req.method == "GET":  # the session's standalone stream
                stream = SessionStream(await relay(), record.sid, legacy.primes(record), self.registry)
                await legacy.set_state(record, "get", stream.token)
                return sse_out(stream.events())
            await legacy.set_state(record, "ended", True)
            await (await relay()).cancel(record.sid)
            return HttpOut(200, [("content-type", JSON)], b"")
        except (AuthenticationFailed, Unavailable) as exc:
            return refused(None, exc)

    async def resume(self, record: legacy.SessionRecord, last_event: str) -> HttpOut:
        """GET with Last-Event-ID: the rest of a call's stream, from where the client lost it."""
        hub = await relay()
        head, _, channel = last_event.partition("@")
        key, _, number = head.partition(".")
        if key.isdigit() and number.isdigit() and channel:
            after = int(number)
            if channel != hub.worker.channel:
                # Held by another worker: it forwards the rest through the channel layer.
                events = await hub.follow_remote(channel, key, after, record.sid)
                if events is not None:
                    return sse_out(events)
            else:
                stream = hub.streams.get(key)
                if stream is not None and stream.sid == record.sid:
                    return sse_out(stream.follow(after, prime=False))
        # Unknown, expired, another session's, or its worker is gone: the client's SDK
        # reports the stream lost; the call itself is unaffected.
        return _refused(404, "no stream to resume from this event id")


def endpoint_for(registry: Registry) -> HttpEndpoint:
    """The registry's endpoint, serving both eras, shared by every transport mounted on it: kept on
    the registry (a cache keyed by ``id(registry)`` would hand it to a new registry at the same address)."""
    endpoint = registry.endpoint
    if endpoint is None:
        endpoint = registry.endpoint = LegacyHttp(registry)
    return endpoint
