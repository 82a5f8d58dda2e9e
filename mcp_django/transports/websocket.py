"""MCP over websockets, through Channels (docs/legacy.md, "Websockets"). The credentials are checked
again before every request: the socket closes, 4401, once they no longer find the same user."""

from __future__ import annotations

import asyncio
import io
import itertools
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.handlers.asgi import ASGIRequest

from .. import registry as registry_module
from ..asks.call import Call
from ..asks.invoke import start_task
from ..asks.live import LiveSession
from ..auth import AuthenticationFailed, Connection, Principal
from ..conf import mcp_settings
from ..keyring import b64decode
from ..pipeline import answer, check_request, refusal
from ..protocol import jsonrpc, legacy
from ..protocol.jsonrpc import INVALID_REQUEST, PARSE_ERROR, MCPError, Unavailable, notification
from ..protocol.revisions import Era, era_of
from ..resource_updates import Listeners, listeners
from .asgi import asgi_headers, scope_url
from .http import HttpIn, json_out
from .legacy_http import endpoint_for
from .relay import Replies

SUBPROTOCOL = "mcp"
# A subprotocol carrying the Authorization header for clients that cannot send one.
AUTH_SUBPROTOCOL = "mcp.authorization."
# Refused before decoding: a header, after all.
_MAX_CREDENTIAL = 8192
# The socket's credentials no longer find the user it was opened by.
CLOSE_REVOKED = 4401
# RFC 6455's "Try Again Later": a service the socket needs is unavailable.
CLOSE_TRY_AGAIN_LATER = 1013
_CLOSE = object()  # queued after the last frame of a socket being closed


class CredentialsRevoked(MCPError):
    def __init__(self) -> None:
        super().__init__(INVALID_REQUEST, "the credentials of this socket are no longer valid")


def _subprotocol_credentials(scope: dict[str, Any]) -> dict[str, Any] | None:
    """The scope with the ``Authorization`` header an auth subprotocol carries (unchanged
    without one), or None when it is malformed, repeated, or beside a real header."""
    offered = [p for p in scope.get("subprotocols", ()) if p.startswith(AUTH_SUBPROTOCOL)]
    if not offered:
        return scope
    if len(offered) > 1 or any(name.lower() == b"authorization" for name, _ in scope.get("headers", ())):
        return None
    encoded = offered[0][len(AUTH_SUBPROTOCOL) :]
    if len(encoded) > _MAX_CREDENTIAL:
        return None
    # Canonical spellings only, as for every token (encoders never pad nor set unused bits).
    try:
        value = b64decode(encoded).decode("ascii")
    except ValueError:  # UnicodeDecodeError included
        return None
    if not value.isprintable() or not value.strip():
        return None
    # Django's request (and whatever reads its META) sees the header, not the subprotocol.
    headers = [(k, v) for k, v in scope.get("headers", ()) if k.lower() != b"sec-websocket-protocol"]
    headers.append((b"authorization", value.encode("ascii")))
    return {**scope, "headers": headers, "subprotocols": [p for p in scope["subprotocols"] if p not in offered]}


class MCPWebsocketConsumer(AsyncWebsocketConsumer):
    # The socket is the session: nothing reaches it through the channel layer, so it
    # takes no channel (an alias that names no layer).
    channel_layer_alias = "mcp_django.websocket.no-layer"
    registry: Any = None
    scope: dict[str, Any]
    # Set by _start() when the socket connects.
    endpoint: Any
    req: HttpIn
    caller: dict[str, Any]
    # How the audit log and signals name this transport (the stdio command reuses this class).
    transport = "websocket"

    def __init__(self, **initkwargs: Any) -> None:
        super().__init__()
        self.principal: Principal | None = None
        self.record: legacy.SessionRecord | None = None
        self.log_level: str | None = None
        ids = itertools.count(1)
        self.replies = Replies(lambda: f"s{next(ids)}")
        self.calls: dict[str, asyncio.Task[Any]] = {}
        self.notifying: set[asyncio.Task[Any]] = set()
        # Frames to send; None ends the writer, _CLOSE closes the socket.
        self.outbox: asyncio.Queue[Any] = asyncio.Queue()
        self.emit = self.outbox.put_nowait
        self.writer: asyncio.Task[Any] | None = None
        # The URIs this socket subscribed to, and the listeners it joins at the first one.
        self.subscriptions: set[str] = set()
        self.updates: Listeners | None = None
        self.revoked = False
        # as_asgi(registry=...) hands these over; Channels' base class would drop them.
        for key, value in initkwargs.items():
            setattr(self, key, value)

    async def connect(self) -> None:
        scope = _subprotocol_credentials(self.scope)
        if scope is None or SUBPROTOCOL not in scope.get("subprotocols", []):
            await self.close()  # before accept: the upgrade is answered 403
            return
        self.scope = scope
        self._start()
        # Browsers send cookies with an upgrade from any page: Origin stops cross-site hijacking.
        try:
            self.endpoint.pipeline.admit(self.req.headers, self.req.scheme)
        except MCPError:
            await self.close()
            return
        try:
            self.principal = await self.endpoint.pipeline.authenticate(self.req, self.req.request_factory)
        except AuthenticationFailed as exc:
            # The 401 (or 403) and challenge HTTP gives where the server can say so; else 403.
            if not await self._deny(exc):
                await self.close()
            return
        except Unavailable as exc:
            # An outage is not bad credentials: a 503 where the server can say so, else an
            # accepted socket closed at once with 1013 ("try again later").
            if not await self._deny(exc, [("retry-after", "1")]):
                await self.accept(subprotocol=SUBPROTOCOL)
                await self.close(code=CLOSE_TRY_AGAIN_LATER, reason=exc.message[:120])
            return
        await self.accept(subprotocol=SUBPROTOCOL)
        self.writer = asyncio.ensure_future(self._write())

    async def _deny(self, exc: Exception, extra: list[tuple[str, str]] | None = None) -> bool:
        """Answer the upgrade with the HTTP response a POST would get for ``exc``, where the
        server offers the ASGI denial extension (uvicorn, Daphne); False where it does not."""
        if "websocket.http.response" not in self.scope.get("extensions", {}):
            return False
        out = json_out(*refusal(None, exc, extra))
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in out.headers]
        await self.base_send({"type": "websocket.http.response.start", "status": out.status, "headers": headers})
        await self.base_send({"type": "websocket.http.response.body", "body": out.body})
        return True

    def _start(self) -> None:
        """The endpoint and the request (:attr:`req`, the upgrade's) for the connection."""
        self.endpoint = endpoint_for(self.registry or registry_module.mcp)
        scope = self.scope
        connection = Connection()
        scheme, endpoint = scope_url(scope)

        def request_factory() -> Any:
            # The upgrade as the GET it is, at the http(s) URL a token's audience names.
            request = ASGIRequest({**scope, "type": "http", "method": "GET", "scheme": scheme}, io.BytesIO(b""))
            # Later checks of the credentials are this connection's (a DPoP binding is held).
            request.mcp_connection = connection  # type: ignore[attr-defined]
            return request

        self.req = HttpIn(
            "GET",
            asgi_headers(scope),
            b"",
            (scope.get("client") or [None])[0],
            request_factory,
            transport=self.transport,
            scheme=scheme,
            endpoint=endpoint,
        )
        # What every call on this socket is built with, besides its message and principal.
        self.caller = {
            "transport": self.transport,
            "client_address": self.req.client_address,
            "request_factory": request_factory,
            "notify": self.emit,
        }

    async def _write(self) -> None:
        # One writer keeps frames in the order they were queued.
        while True:
            message = await self.outbox.get()
            if message is None:
                return
            if message is _CLOSE:
                await self.close(code=CLOSE_REVOKED)
                return
            await self.send(text_data=jsonrpc.dumps(message).decode())

    async def _recheck(self) -> Principal:
        """The socket's principal, authenticated again (a cache hit while nothing changed);
        anything but the same account (pk, date joined, password) revokes the socket."""
        assert self.principal is not None
        try:
            principal = await self.endpoint.pipeline.authenticate(self.req, self.req.request_factory)
        except AuthenticationFailed:
            principal = None
        if principal is None or principal.binding != self.principal.binding:
            raise CredentialsRevoked()
        self.principal = principal  # a fresh copy: flags and permissions as they are now
        return principal

    def resource_updated(self, uri: str) -> None:
        if uri in self.subscriptions:
            self.emit(notification("notifications/resources/updated", {"uri": uri}))

    def list_changed(self, listing: str) -> None:
        self.emit(notification(f"notifications/{listing}/list_changed"))

    async def disconnect(self, code: int) -> None:
        if self.record is not None:  # open() subscribed it
            self.endpoint.registry.unsubscribe(self.list_changed)
        if self.updates is not None:
            self.updates.unwatch(self.resource_updated)
        # The socket is gone: its calls and its writer end together (a frame has nowhere to go).
        tasks = list(self.calls.values())
        if self.writer is not None:
            tasks.append(self.writer)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is None:
            self.refuse(None, MCPError(PARSE_ERROR, "MCP messages are text frames"))
            return
        try:
            message = jsonrpc.parse(text_data)
        except MCPError as exc:
            self.refuse(None, exc)
            return
        shape = jsonrpc.classify(message)
        if shape == "response":
            self.replies.deliver(message)
        elif shape == "notification":
            # The socket is the session: a notification is the session's, whatever its _meta.
            notified = start_task(self.endpoint.pipeline.notified(self._in_session(message, self.principal)))
            if not notified.done():
                self.notifying.add(notified)  # a task nobody references may be collected
                notified.add_done_callback(self.notifying.discard)
        elif shape == "request":
            key = jsonrpc.dumps(message["id"]).decode()
            if key in self.calls:
                self.refuse(message["id"], MCPError(INVALID_REQUEST, "this request id is in use"))
                return
            task = self.calls[key] = asyncio.ensure_future(self._serve(message))
            task.add_done_callback(lambda _t: self.calls.pop(key, None))
        else:
            text = "batches are not supported" if isinstance(message, list) else "Invalid Request"
            self.refuse(jsonrpc.reply_id(message), MCPError(INVALID_REQUEST, text))

    def refuse(self, request_id: Any, exc: Exception) -> None:
        self.emit(refusal(request_id, exc)[1])

    async def _serve(self, message: dict[str, Any]) -> None:
        # A call cancelled (by the client, or the socket closing) sends no response.
        try:
            call = await self._call(message)
        except Exception as exc:
            # On a socket the status has nowhere to go: the JSON-RPC error is the answer.
            self.refuse(message["id"], exc)
            if isinstance(exc, CredentialsRevoked) and not self.revoked:
                self.revoked = True
                self.outbox.put_nowait(_CLOSE)  # after the error answer
            return
        self.emit((await answer(self.endpoint.pipeline.handle, call))[1])

    async def _call(self, message: dict[str, Any]) -> Call:
        """The request as a call: the socket's credentials checked again, its era decided."""
        if self.revoked:
            raise CredentialsRevoked()
        principal = await self._recheck()
        if era_of(message) == Era.MODERN:
            # Each message stands alone, as on HTTP (without the headers).
            meta = check_request(message, None, self.endpoint.registry)
            return Call.modern(message, meta, principal=principal, **self.caller)
        if self.record is None and message["method"] not in ("initialize", "ping"):
            raise MCPError(INVALID_REQUEST, "send initialize first (or a 2026-07-28 request with params._meta)")
        return self._in_session(message, principal)

    def _in_session(self, message: dict[str, Any], principal: Principal | None) -> Call:
        record = self.record
        assert principal is not None  # set when the socket connected
        return Call.in_session(
            message,
            record,
            principal=principal,
            log_level=self.log_level,
            session=None if record is None else LiveSession(record, self.replies),
            control=self,
            **self.caller,
        )

    # -- the socket's session (mcp_django.protocol.legacy.SessionControl) -------------------

    async def open(self, call: Call) -> legacy.SessionRecord:
        if self.record is not None:
            raise MCPError(INVALID_REQUEST, "this socket's session is already initialized")
        self.record = legacy.read_initialize(call.params, call.principal.digest, self.endpoint.registry.name)
        # initialize declares listChanged: the socket hears this worker's list changes.
        self.endpoint.registry.subscribe(self.list_changed)
        return self.record

    async def set_log_level(self, level: str) -> None:
        self.log_level = level

    async def subscribe(self, uri: str, on: bool) -> None:
        if not on:
            self.subscriptions.discard(uri)
            return
        if uri not in self.subscriptions and len(self.subscriptions) >= mcp_settings.MAX_SUBSCRIPTIONS:
            raise legacy.too_many_subscriptions()
        if self.updates is None:
            self.updates = await listeners()
            self.updates.watch(self.resource_updated)
        self.subscriptions.add(uri)

    async def cancel(self, request_id: Any) -> None:
        task = self.calls.get(jsonrpc.dumps(request_id).decode())
        if task is not None:
            task.cancel()
