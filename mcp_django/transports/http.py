"""Streamable HTTP, independent of how the bytes arrived (our ASGI app, a Django view, a websocket's
upgrade): the request a transport received (:class:`HttpIn`), its answer (:class:`HttpOut`), SSE
framing. One POST carries one JSON-RPC message; the answer is JSON, or an SSE stream once the
handler sends a notification before its result (decided lazily: a plain call never pays for a stream)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..asks.call import Call
from ..asks.invoke import start_task
from ..auth import AuthenticationFailed
from ..pipeline import Pipeline, answer, check_request, refusal
from ..protocol import jsonrpc
from ..protocol.jsonrpc import INVALID_REQUEST, MCPError, dumps
from ..protocol.revisions import Era, era_of
from ..registry import Registry

logger = logging.getLogger("mcp_django")

JSON = "application/json"
SSE = "text/event-stream"


@dataclass(slots=True)
class HttpIn:
    """One HTTP request, as the transport received it."""

    method: str
    headers: dict[str, str]  # lower-case names, values with surrounding whitespace removed
    body: bytes
    client_address: str | None
    request_factory: Callable[[], Any]
    transport: str = "http"
    # False where the server cannot stream (the WSGI view): answers are always JSON.
    can_stream: bool = True
    too_large: bool = False
    # The transport's scheme (http or https; a websocket's upgrade counts as the http(s) it began as).
    scheme: str = "http"
    # Where the request went as the server saw it (root path, path): an OAuth token is valid
    # at one URL only, so the principal cache keys on it.
    endpoint: str = ""
    # Django's request, once django_request() has built it.
    built: Any = field(default=None, repr=False)

    def django_request(self) -> Any:
        """Django's request for this one, built on first use (an authentication class, a handler's ``ctx.request``)."""
        if self.built is None:
            self.built = self.request_factory()
        return self.built


@dataclass(slots=True)
class HttpOut:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    # When set, the response is an SSE stream of these chunks.
    events: AsyncIterator[bytes] | None = None


def sse_event(
    data: bytes, *, event: str | None = None, event_id: str | None = None, retry_ms: int | None = None
) -> bytes:
    """One Server-Sent Event: its fields (``id``, ``retry``, ``event``, in that order) and one ``data``
    line (compact JSON holds no line break). Empty data with an id or a retry is a priming
    event: it sets where a client resumes from, or how soon it reconnects."""
    head = b""
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    if retry_ms is not None:
        head += b"retry: %d\n" % retry_ms
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def sse_message(message: dict[str, Any], *, event_id: str | None = None) -> bytes:
    """A JSON-RPC message as an SSE ``message`` event."""
    return sse_event(dumps(message), event="message", event_id=event_id)


def sse_out(events: AsyncIterator[bytes]) -> HttpOut:
    return HttpOut(200, [("content-type", SSE), ("cache-control", "no-cache")], events=events)


def sse_comment(text: str) -> bytes:
    """An SSE comment: every client ignores it, and the connection (and any proxy on it) sees traffic."""
    return b": " + text.encode() + b"\n\n"


# A legacy session needs a held connection for its server-to-client requests:
# refused at initialize, rather than failing at the first ask.
NO_LEGACY_HERE = MCPError(
    INVALID_REQUEST,
    "This route (Django's view stack, include('mcp_django.urls')) serves only protocol 2026-07-28. "
    "Protocol 2025-11-25 and earlier sessions need the ASGI route: mcp_django.routing.mcp_urlpatterns() "
    "in asgi.py, served by uvicorn or daphne.",
)


class HttpEndpoint:
    """The MCP endpoint's logic for one HTTP request: it reads the request, picks the era and
    renders the answer; the call itself goes through the registry's pipeline (mcp_django.pipeline)."""

    # The legacy sessions' side: legacy_http.LegacyHttp's, the endpoint endpoint_for builds.
    handle_other: Callable[[HttpIn], Awaitable[HttpOut]]
    handle_legacy: Callable[[HttpIn, Any, str, Disconnect | None], Awaitable[HttpOut]]

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.pipeline = Pipeline(registry)

    async def handle(self, req: HttpIn, disconnected: Disconnect | None = None) -> HttpOut:
        try:
            cors = self.pipeline.admit(req.headers, req.scheme)
        except MCPError as exc:
            return refused(None, exc)
        if req.method == "POST":
            out = await self.post(req, disconnected)
        elif req.method == "OPTIONS":
            out = HttpOut(204)
        else:
            out = await self.handle_other(req)
        if cors:
            # On every answer, either era's, a refusal too: a browser reads none without them.
            out.headers.extend(cors)
        return out

    async def post(self, req: HttpIn, disconnected: Disconnect | None) -> HttpOut:
        """The POST's JSON-RPC message: its media types and size, the JSON, then its era's answer."""
        if req.headers.get("content-type", "").split(";", 1)[0].strip().lower() != JSON:
            return refused(None, MCPError(INVALID_REQUEST, "Content-Type must be application/json", http_status=415))
        if req.too_large:
            return refused(None, MCPError(INVALID_REQUEST, "request body too large", http_status=413))
        accept = req.headers.get("accept", "*/*")
        if JSON not in accept and "*/*" not in accept:
            return refused(None, MCPError(INVALID_REQUEST, "Accept must include application/json", http_status=406))
        try:
            message = jsonrpc.parse(req.body)
        except MCPError as exc:
            return refused(None, exc)
        shape = jsonrpc.classify(message)
        # The era, decided once: the legacy sessions' transport, or 2026-07-28's pipeline.
        if shape != "invalid" and era_of(message, req.headers) == Era.LEGACY:
            if not req.can_stream:
                return refused(jsonrpc.reply_id(message), NO_LEGACY_HERE)
            return await self.handle_legacy(req, message, shape, disconnected)
        if shape == "notification":
            return HttpOut(202)
        if shape != "request":  # invalid, whatever its era, or a reply no 2026-07-28 request awaits
            if isinstance(message, list):
                return refused(None, MCPError(INVALID_REQUEST, "batches are not supported"))
            return refused(jsonrpc.reply_id(message), MCPError(INVALID_REQUEST, "Invalid Request"))
        pipeline = self.pipeline
        try:
            meta = check_request(message, req.headers, self.registry)
            principal = await pipeline.authenticate(req, req.django_request)
        except (MCPError, AuthenticationFailed) as exc:
            return refused(message["id"], exc)
        call = Call.modern(
            message,
            meta,
            transport=req.transport,
            principal=principal,
            client_address=req.client_address,
            request_factory=req.django_request,
            http=req,
        )
        can_stream = req.can_stream and (SSE in accept or "*/*" in accept)
        return await Response(pipeline.handle, call, can_stream, disconnected).out()


def json_out(status: int, payload: Any, extra: list[tuple[str, str]] | None = None) -> HttpOut:
    return HttpOut(status, [("content-type", JSON), *(extra or [])], dumps(payload))


def refused(request_id: Any, exc: Exception) -> HttpOut:
    """A request refused (:func:`mcp_django.pipeline.refusal`), as an HTTP answer."""
    return json_out(*refusal(request_id, exc))


SUMMARY = (
    "This is an MCP (Model Context Protocol) endpoint: MCP clients POST JSON-RPC messages to it "
    "(Content-Type: application/json). Give this URL to an MCP client, with an "
    "'Authorization: Token KEY' header unless the server allows anonymous callers."
)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MCP endpoint</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem}
code{background:#f3f3f3;padding:.1rem .3rem;border-radius:3px}</style></head>
<body><h1>MCP endpoint</h1>
<p>This URL is a <a href="https://modelcontextprotocol.io/">Model Context Protocol</a>
endpoint. An MCP client sends it JSON-RPC messages with <code>POST</code>; a browser cannot use it.</p>
<p>To connect, give an MCP client this URL (Streamable HTTP; <code>ws://</code> on the same path for
websocket clients) and, unless the server allows anonymous callers, the header
<code>Authorization: Token KEY</code>, where <code>KEY</code> is a Django REST framework token
(<code>python manage.py drf_create_token USERNAME</code>).</p>
</body></html>
"""


def not_mcp(req: HttpIn) -> HttpOut:
    """The 405 (``Allow: POST``) a request that is not MCP gets (clients rely on it): a page for
    a browser, a JSON-RPC error explaining the endpoint for anything else."""
    allow = ("allow", "POST")
    if "text/html" in req.headers.get("accept", ""):
        body = PAGE.encode()
        return HttpOut(405, [allow, ("content-type", "text/html; charset=utf-8")], body)
    error = MCPError(INVALID_REQUEST, f"{req.method} is not an MCP request here. {SUMMARY}", http_status=405)
    return json_out(*refusal(None, error, [allow]))


class Disconnect:
    """Tells when the client went away. The watcher, a task reading the ASGI channel, starts only
    once someone asks: most calls finish long before it could matter."""

    def __init__(self, receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._receive = receive
        self.task: asyncio.Task[None] | None = None

    def future(self) -> asyncio.Future[None]:
        if self.task is None:
            self.task = asyncio.ensure_future(self._watch())
        return self.task

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass


# A call still running after this many seconds starts watching for a disconnect.
_WATCH_AFTER = 0.02


class Response:
    """One call's HTTP answer: JSON, or SSE once the handler sends a notification first. One task
    per request, and a future only once it waits: this is the hot path of every call."""

    __slots__ = ("disconnected", "events", "gone", "loop", "task", "wake")

    def __init__(
        self,
        handle: Callable[[Call], Awaitable[dict[str, Any]]],
        call: Call,
        can_stream: bool,
        disconnected: Disconnect | None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.events: list[dict[str, Any]] = []
        # Created once the call waits on something: a call that finishes eagerly never needs it.
        self.wake: asyncio.Future[None] | None = None
        self.gone: asyncio.Future[Any] | None = None
        self.disconnected = disconnected
        if can_stream:
            call.notify = self.notify
        # The call wakes whoever waits for it from its own last step: a done callback would
        # run a loop turn later, and the waiter only one more turn after that.
        self.task = start_task(answer(handle, call, self.wake_up))

    def notify(self, message: dict[str, Any]) -> None:
        self.events.append(message)
        self.wake_up()

    def wake_up(self, _: Any = None) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)

    def watch(self) -> None:
        assert self.disconnected is not None
        self.gone = self.disconnected.future()
        self.gone.add_done_callback(self.wake_up)

    async def out(self) -> HttpOut:
        task = self.task
        if task.done() and not self.events:
            # Finished eagerly, without waiting on anything: the common case.
            return json_out(*task.result())
        wake = self.wake = self.loop.create_future()
        if self.events:
            wake.set_result(None)  # sent before there was a wake to set
        timer = (
            self.loop.call_later(_WATCH_AFTER, self.watch)
            if self.disconnected is not None and not task.done()
            else None
        )
        try:
            if not task.done():
                await wake
        except BaseException:
            task.cancel()
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if self.gone is not None:
                self.gone.remove_done_callback(self.wake_up)
        if not task.done() and self.gone is not None and self.gone.done():
            task.cancel()
            return HttpOut(499)
        if task.done() and not self.events:
            return json_out(*task.result())
        return sse_out(self.stream())

    async def stream(self) -> AsyncIterator[bytes]:
        task, events = self.task, self.events
        try:
            while True:
                while events:
                    yield sse_message(events.pop(0))
                if task.done():
                    yield sse_message(task.result()[1])
                    return
                wake = self.wake = self.loop.create_future()
                await wake
        finally:
            # The client closing the stream cancels the request.
            if not task.done():
                task.cancel()
