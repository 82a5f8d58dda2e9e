"""Streamable HTTP for the legacy revisions: sessions, SSE answers, replies by POST.

- ``initialize`` mints ``Mcp-Session-Id`` (a signed record, see
  :mod:`mcp_django.protocol.legacy`) bound to the principal that sent it; the same
  id from anyone else is 403, an unknown, expired or ended one 404.
- A call whose handler asks (or logs, or reports progress) is answered as
  ``text/event-stream``: the server's requests, then the result. The client's
  reply is a separate POST (202), routed to the worker holding the stream by
  :mod:`mcp_django.transports.relay`.
- ``DELETE`` ends the session and cancels its calls on every worker. There is no
  standalone ``GET`` stream (405): every server request belongs to a call and
  travels on that call's stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ..asks.call import Call
from ..asks.live import LiveSession
from ..auth import AuthenticationFailed, Principal, may_carry_credentials
from ..protocol import jsonrpc, legacy
from ..protocol.jsonrpc import INVALID_REQUEST, MCPError
from .http import JSON, SSE, HttpIn, HttpOut, LegacyHandler, accepts, error_out, json_out, respond, unauthorized
from .relay import HttpReplies, relay

if TYPE_CHECKING:
    from .http import HttpEndpoint

# A reply to a request the client cancelled has no response body of its own (JSON-RPC reserved range).
REQUEST_CANCELLED = -32800


class LegacyHttp(LegacyHandler):
    def __init__(self, endpoint: HttpEndpoint) -> None:
        self.endpoint = endpoint

    async def _principal(self, req: HttpIn) -> Principal:
        request = req.request_factory() if may_carry_credentials(req.headers) else None
        return await self.endpoint.principal(req, request)

    async def _session(self, req: HttpIn, principal: Principal) -> tuple[legacy.SessionRecord, str | None] | HttpOut:
        """The request's open session and its log level, or the HTTP answer refusing it."""
        token = req.headers.get("mcp-session-id")
        if token is None:
            return error_out(
                None,
                MCPError(INVALID_REQUEST, "Mcp-Session-Id header is required: send initialize first", http_status=400),
            )
        record = legacy.open_session(token)
        if record is None:
            return error_out(None, MCPError(INVALID_REQUEST, "Session not found", http_status=404))
        if record.principal != principal.digest:
            return error_out(None, MCPError(INVALID_REQUEST, "this session belongs to another user", http_status=403))
        version = req.headers.get("mcp-protocol-version")
        if version is not None and version != record.version:
            return error_out(
                None,
                MCPError(
                    INVALID_REQUEST,
                    f"MCP-Protocol-Version {version} is not this session's ({record.version})",
                    http_status=400,
                ),
            )
        ended, level = await legacy.session_status(record.sid)
        if ended:
            return error_out(None, MCPError(INVALID_REQUEST, "Session not found (it has ended)", http_status=404))
        return record, level

    async def handle(self, req: HttpIn, message: Any, disconnected: Awaitable[Any] | None) -> HttpOut:
        kind = jsonrpc.classify(message)
        if kind == "invalid":
            if isinstance(message, list):
                return error_out(None, MCPError(INVALID_REQUEST, "batches are not supported", http_status=400))
            request_id = message.get("id") if isinstance(message, dict) else None
            return error_out(request_id, MCPError(INVALID_REQUEST, "Invalid Request", http_status=400))
        request_id = message.get("id")
        try:
            principal = await self._principal(req)
        except AuthenticationFailed as exc:
            return unauthorized(request_id, exc)
        if kind == "request" and message["method"] == "initialize":
            try:
                record = legacy.read_initialize(message.get("params"), principal.digest)
            except MCPError as exc:
                return json_out(200, jsonrpc.error_response(request_id, exc))
            return json_out(
                200,
                jsonrpc.response(request_id, legacy.initialize_result(record)),
                [("mcp-session-id", legacy.seal_session(record))],
            )
        found = await self._session(req, principal)
        if isinstance(found, HttpOut):
            return found
        record, level = found
        if kind == "notification":
            await self.notification(record, message)
            return HttpOut(202)
        if kind == "response":
            hub = await relay()
            if not await hub.route_reply(message, record.sid, record.principal):
                return error_out(
                    None, MCPError(INVALID_REQUEST, "this response answers no request of this server", http_status=400)
                )
            return HttpOut(202)
        return await self.request(req, message, record, level, principal, disconnected)

    async def notification(self, record: legacy.SessionRecord, message: dict[str, Any]) -> None:
        if message["method"] == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict) and "requestId" in params:
                await (await relay()).cancel(record.sid, params["requestId"])
        # notifications/initialized, roots/list_changed, ...: nothing to do.

    async def request(
        self,
        req: HttpIn,
        message: dict[str, Any],
        record: legacy.SessionRecord,
        level: str | None,
        principal: Principal,
        disconnected: Awaitable[Any] | None,
    ) -> HttpOut:
        request_id = message["id"]
        method: str = message["method"]
        params = message.get("params") or {}
        if method == "initialize":
            return json_out(
                200, jsonrpc.error_response(request_id, MCPError(INVALID_REQUEST, "the session is already initialized"))
            )
        if method in legacy.LIFECYCLE_METHODS:

            async def set_level(value: str) -> None:
                await legacy.set_session_log_level(record, value)

            try:
                result = await legacy.lifecycle(method, params, set_level)
            except MCPError as exc:
                return json_out(200, jsonrpc.error_response(request_id, exc))
            return json_out(200, jsonrpc.response(request_id, result))
        hub = await relay()
        call = Call(
            method=method,
            params=params,
            request_id=request_id,
            version=record.version,
            era="legacy",
            transport=req.transport,
            capabilities=record.capabilities,
            principal=principal,
            client_info=record.client_info,
            client_address=req.client_address,
            log_level=level,
            request_factory=req.request_factory,
            session=LiveSession(record, HttpReplies(hub, record.sid, record.principal)),
        )
        dispatcher = self.endpoint.dispatcher

        async def run(call: Call) -> dict[str, Any]:
            inner = asyncio.ensure_future(dispatcher.handle(call))
            key = hub.track(record.sid, request_id, inner)
            try:
                return await inner
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if inner.cancelled() and current is not None and not current.cancelling():
                    # Cancelled by the client (notifications/cancelled or DELETE), not by us.
                    raise MCPError(REQUEST_CANCELLED, "Request cancelled") from None
                raise
            finally:
                hub.untrack(key)

        return await respond(
            dispatcher,
            call,
            can_stream=req.can_stream and accepts(req.headers, SSE),
            disconnected=disconnected,
            run=run,
        )

    async def handle_other(self, req: HttpIn, disconnected: Awaitable[Any] | None) -> HttpOut | None:
        if req.method != "DELETE":
            return None  # GET: 405, there is no standalone stream
        try:
            principal = await self._principal(req)
        except AuthenticationFailed as exc:
            return unauthorized(None, exc)
        found = await self._session(req, principal)
        if isinstance(found, HttpOut):
            return found
        record, _level = found
        await legacy.end_session(record)
        await (await relay()).cancel(record.sid)
        return HttpOut(200, [("content-type", JSON)], b"")
