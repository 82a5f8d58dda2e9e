"""The ASGI application serving the MCP endpoint (the fast path): beside Django's own application,
not through its handler, middleware or request signals, which cost more CPU than the whole MCP
exchange (docs/index.md, "The request lifecycle on /mcp").
"""

from __future__ import annotations

import asyncio
import gc
import io
import logging
from collections.abc import Callable
from typing import Any

from django.core.handlers.asgi import ASGIRequest

from .. import registry as registry_module
from ..asks.invoke import EAGER_TASKS, start_task
from ..conf import mcp_settings
from ..protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, MCPError
from ..registry import Registry
from .http import JSON, SSE, Disconnect, HttpEndpoint, HttpIn, HttpOut, refused
from .legacy_http import endpoint_for

logger = logging.getLogger("mcp_django")


class MCPApplication:
    """ASGI app for ``/mcp``: Streamable HTTP (both eras) and, given ``websocket`` (a factory of the
    websocket application, called with ``registry=``: ``mcp_django.routing`` passes Channels'), websockets."""

    def __init__(self, registry: Registry | None = None, *, websocket: Callable[..., Any] | None = None) -> None:
        self._registry = registry
        self._endpoint: HttpEndpoint | None = None
        self._websocket = None if websocket is None else websocket(registry=registry)

    @property
    def registry(self) -> Registry:
        """The handlers this application serves (its endpoint's)."""
        return self._registry or registry_module.mcp

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope_type = scope["type"]
        if scope_type == "websocket":
            if self._websocket is None:
                await receive()  # websocket.connect
                await send({"type": "websocket.close"})  # no websocket transport here: refused (403)
                return
            await self._websocket(scope, receive, send)
            return
        if scope_type == "lifespan":
            await lifespan(scope, receive, send)
        if scope_type != "http":
            return
        headers = asgi_headers(scope)
        body, problem = await _read_body(headers, receive)
        if problem == "gone":
            return
        if problem == "slow":
            out = refused(None, MCPError(INVALID_REQUEST, "the request body took too long to arrive", http_status=408))
            out.headers.append(("connection", "close"))
            await _send(out, send, None)
            return
        too_large = problem == "too large"

        def request_factory() -> Any:
            return ASGIRequest(scope, io.BytesIO(body))

        scheme, endpoint = scope_url(scope)
        # Positional, in the fields' order: once per request, where keywords cost a third more.
        req = HttpIn(
            scope["method"],
            headers,
            body,
            client[0] if (client := scope.get("client")) else None,
            request_factory,
            "http",  # transport
            True,  # can_stream
            too_large,
            scheme,
            endpoint,
        )
        served = self._endpoint
        if served is None:
            served = self._endpoint = endpoint_for(self.registry)
        disconnected = Disconnect(receive)
        try:
            try:
                out = await served.handle(req, disconnected)
            except Exception:
                # A bug must still be answered in JSON-RPC, not with the server's plain-text 500.
                logger.exception("mcp_django: the endpoint failed on a %s request", req.method)
                out = refused(None, MCPError(INTERNAL_ERROR, "Internal error", http_status=500))
            await _send(out, send, disconnected)
        finally:
            if disconnected.task is not None:  # watched (most calls end before anyone looks)
                disconnected.task.cancel()


def freeze_startup_objects() -> None:
    """``gc.freeze()`` after one full collection, unless ``GC_FREEZE`` is off: full passes then skip
    the objects a started Django process holds for good (bench/HISTORY.md)."""
    if mcp_settings.GC_FREEZE:
        gc.collect()
        gc.freeze()


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI lifespan protocol, for the ``"lifespan"`` key of the project's ``ProtocolTypeRouter``
    (without one, uvicorn logs that lifespan "appears unsupported"); startup freezes the objects
    made so far (:func:`freeze_startup_objects`)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            freeze_startup_objects()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(headers: dict[str, str], receive: Any) -> tuple[bytes, str | None]:
    """(body, problem): the body read no further than MAX_REQUEST_BYTES and no longer
    than REQUEST_READ_TIMEOUT. The problem is None, "gone" (the client disconnected),
    "slow" (the body did not arrive in time) or "too large" (declared or read so far)."""
    limit = mcp_settings.MAX_REQUEST_BYTES
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        # Refused before a byte of it is read.
        return b"", "too large"
    # A small body has almost always arrived with the headers: the server hands it
    # over without waiting, and then no timer is armed (a timer costs every request
    # more than reading the body does). An eager task finds out without a loop turn.
    first: asyncio.Task[Any] | None = None
    if EAGER_TASKS:
        first = start_task(receive())
        if first.done() and not first.cancelled() and first.exception() is None:
            message = first.result()
            if message["type"] == "http.request" and not message.get("more_body", False):
                body = message.get("body", b"")
                return (b"", "too large") if len(body) > limit else (body, None)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(mcp_settings.REQUEST_READ_TIMEOUT):
            while True:
                if first is not None:
                    message, first = await first, None
                else:
                    message = await receive()
                if message["type"] == "http.disconnect":
                    return b"", "gone"
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    # The rest is never read: the server closes the connection after the answer.
                    return b"", "too large"
                if chunk:
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), None
    except TimeoutError:
        return b"", "slow"


# Headers nearly every answer carries, encoded once.
_ENCODED = {
    ("content-type", JSON): (b"content-type", JSON.encode()),
    ("content-type", SSE): (b"content-type", SSE.encode()),
}


async def _send(out: HttpOut, send: Any, disconnected: Disconnect | None) -> None:
    if out.status == 499:  # the client went away; nobody to answer
        return
    headers = [
        _ENCODED.get(header) or (header[0].encode("latin-1"), header[1].encode("latin-1")) for header in out.headers
    ]
    if out.events is None:
        headers.append((b"content-length", str(len(out.body)).encode()))
        await send({"type": "http.response.start", "status": out.status, "headers": headers})
        await send({"type": "http.response.body", "body": out.body})
        return
    await send({"type": "http.response.start", "status": out.status, "headers": headers})
    events = out.events
    try:
        while True:
            next_chunk = asyncio.ensure_future(anext(events))
            watched: set[asyncio.Future[Any]] = {next_chunk}
            if disconnected is not None:
                watched.add(disconnected.future())
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if not next_chunk.done():
                # The client closed the stream: that cancels the request. Let the
                # generator unwind from the cancelled step before closing it.
                next_chunk.cancel()
                await asyncio.wait({next_chunk})
                return
            try:
                chunk = next_chunk.result()
            except StopAsyncIteration:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await events.aclose()  # type: ignore[attr-defined]


# -- an ASGI scope, read (an HTTP request's here, a websocket's upgrade in .websocket) --------


def scope_url(scope: Any) -> tuple[str, str]:
    """:attr:`HttpIn.scheme` and :attr:`HttpIn.endpoint` of an ASGI request; a websocket's upgrade
    names the http(s) URL it shares with the endpoint (the URL a token's audience names)."""
    scheme = scope.get("scheme") or "http"
    return _UPGRADED.get(scheme, scheme), f"{scope.get('root_path', '')} {scope.get('path', '')}"


_UPGRADED = {"ws": "http", "wss": "https"}


def asgi_headers(scope: dict[str, Any]) -> dict[str, str]:
    """An ASGI scope's headers: lower-case names, a repeated header's values joined with "," as
    Django joins them. ``cookie`` is exactly Django's ``META["HTTP_COOKIE"]``: the principal cache
    keys on the session id in it, which must be the one the authentication classes read."""
    raw = scope.get("headers", ())
    if type(raw) is list:
        # Every request's headers, most often with no name twice and no cookie: one comprehension,
        # and the loop below only when the count says a name came twice (or there is a cookie).
        out = {name.decode("latin-1").lower(): value.decode("latin-1").strip(" \t") for name, value in raw}
        if len(out) == len(raw) and "cookie" not in out:
            return out
    out = {}
    cookies: list[bytes] | None = None
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        if name == "cookie":
            if cookies is None:
                cookies = []
            cookies.append(raw_value)
            continue
        value = raw_value.decode("latin-1").strip(" \t")
        out[name] = f"{out[name]},{value}" if name in out else value
    if cookies is not None and len(cookies) == 1:
        out["cookie"] = cookies[0].decode("latin-1")
    elif cookies is not None:
        # Several fields (HTTP/2 clients split cookies): Django's versions join them differently
        # (6.0 with "; ", 5.2 with ","), so Django's own request class does.
        scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"cookie", v) for v in cookies]}
        out["cookie"] = ASGIRequest(scope, io.BytesIO(b"")).META.get("HTTP_COOKIE", "")
    return out
