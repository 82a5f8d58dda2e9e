"""Test-only tools for the legacy tests, on the default registry, and a websocket JSON-RPC client.

Each tool counts how often its body runs: on a legacy session a handler runs
exactly once however many asks it makes (no replay).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from mcp_django import Context, SyncContext, mcp
from mcp_django.asks import elicit, list_roots, sample
from mcp_django.asks.live import AskAborted, AskTimeoutError, ClientError

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

RUNS: collections.Counter[str] = collections.Counter()
# Sync handlers set this when the call is cut while they wait for an answer.
ABORTED = threading.Event()


def reset() -> None:
    RUNS.clear()
    ABORTED.clear()


@mcp.tool()
async def legacytest_elicit(ctx: Context) -> str:
    """Asks a name."""
    RUNS["legacytest_elicit"] += 1
    result = await ctx.elicit("What is your name?", NAME)
    return f"Hello, {result.data['name']}!" if result else f"action={result.action}"


@mcp.tool()
def legacytest_confirm(ctx: SyncContext) -> str:
    """A sync handler: the ask blocks its worker thread."""
    RUNS["legacytest_confirm"] += 1
    return "confirmed" if ctx.confirm("Go ahead?") else "not confirmed"


@mcp.tool()
async def legacytest_sample(ctx: Context) -> str:
    RUNS["legacytest_sample"] += 1
    result = await ctx.sample("Capital of France?", max_tokens=20)
    return f"model said {result.text}"


@mcp.tool()
def legacytest_roots(ctx: SyncContext) -> str:
    RUNS["legacytest_roots"] += 1
    roots = ctx.list_roots()
    return ",".join(r.uri for r in roots)


@mcp.tool()
async def legacytest_error(ctx: Context) -> str:
    """The client's JSON-RPC error reaches the handler as ClientError."""
    RUNS["legacytest_error"] += 1
    try:
        await ctx.elicit("What is your name?", NAME)
    except ClientError as exc:
        return f"client error {exc.code}: {exc.message}"
    return "no error"


@mcp.tool()
async def legacytest_timeout(ctx: Context) -> str:
    RUNS["legacytest_timeout"] += 1
    try:
        await ctx.confirm("Anyone there?")
    except AskTimeoutError as exc:
        return f"timed out ({exc.code})"
    return "answered"


@mcp.tool()
async def legacytest_parallel(ctx: Context) -> str:
    """Three asks at once, and a value in ctx.state across them."""
    RUNS["legacytest_parallel"] += 1
    ctx.state["seen"] = "yes"
    name, answer, roots = await asyncio.gather(
        ctx.elicit("What is your name?", NAME), ctx.sample("Greet", max_tokens=5), ctx.list_roots()
    )
    return f"{name.data['name']}|{answer.text}|{len(roots)}|{ctx.state['seen']}"


@mcp.tool()
def legacytest_ask_all(ctx: SyncContext) -> str:
    RUNS["legacytest_ask_all"] += 1
    name, answer = ctx.ask_all(elicit("What is your name?", NAME), sample("Greet", max_tokens=5))
    roots = ctx.ask_all(list_roots())[0]
    return f"{name.data['name']}|{answer.text}|{len(roots)}"


@mcp.tool()
def legacytest_block(ctx: SyncContext) -> str:
    """Waits for an answer that never comes; the call is cut from outside."""
    RUNS["legacytest_block"] += 1
    try:
        ctx.confirm("Waiting forever?")
    except AskAborted:
        ABORTED.set()
        raise
    return "answered"


@mcp.tool()
async def legacytest_log(ctx: Context) -> str:
    RUNS["legacytest_log"] += 1
    await ctx.debug("a debug line")
    await ctx.warning("a warning line")
    return "logged"


@mcp.tool()
async def legacytest_whoami(ctx: Context) -> str:
    RUNS["legacytest_whoami"] += 1
    return ctx.principal


@mcp.tool()
async def legacytest_url(ctx: Context) -> str:
    RUNS["legacytest_url"] += 1
    result = await ctx.elicit_url("Sign in", "https://example.com/consent", elicitation_id="consent-1")
    if result:
        await ctx.elicitation_complete("consent-1")
    return f"url action={result.action}"


@mcp.tool()
def legacytest_touch(uri: str) -> str:
    """A sync handler announcing a resource update (the fire-and-forget form, from a worker thread)."""
    mcp.resource_updated(uri)
    return f"touched {uri}"


# 2025-11-25 elicitation features: defaults on every primitive (SEP-1034), a titled single-select (SEP-1330).
MODERN_FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "default": "Ada", "format": "email"},
        "age": {"type": "integer", "minimum": 0, "default": 36},
        "colour": {
            "type": "string",
            "title": "Colour",
            "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
            "default": "g",
        },
        "subscribe": {"type": "boolean", "default": True},
    },
    "required": ["name"],
}
MULTI_SELECT = {
    "type": "object",
    "properties": {"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}},
}


@mcp.tool()
async def legacytest_modern_form(ctx: Context) -> str:
    RUNS["legacytest_modern_form"] += 1
    result = await ctx.elicit("Tell me", MODERN_FORM)
    return f"action={result.action} content={json.dumps(result.content, sort_keys=True)}"


@mcp.tool()
async def legacytest_multi_select(ctx: Context) -> str:
    RUNS["legacytest_multi_select"] += 1
    result = await ctx.elicit("Pick", MULTI_SELECT)
    return f"action={result.action}"


# -- a websocket client speaking JSON-RPC frames ------------------------------------------


Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class WsClient:
    """Sends requests, answers the server's requests with ``answer``, keeps notifications."""

    def __init__(self, socket: Any, answer: Answer | None = None) -> None:
        self.socket = socket
        self.answer = answer
        self.next_id = 1
        self.waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        # Responses that match no request of ours (errors for frames that had no usable id).
        self.stray: list[dict[str, Any]] = []
        self.reader = asyncio.ensure_future(self._read())
        self._replying: set[asyncio.Task[None]] = set()

    async def _read(self) -> None:
        async for frame in self.socket:
            message = json.loads(frame)
            if "method" in message and "id" in message:
                self.server_requests.append(message)
                task = asyncio.ensure_future(self._reply(message))
                self._replying.add(task)
                task.add_done_callback(self._replying.discard)
            elif "method" in message:
                self.notifications.append(message)
            else:
                future = self.waiting.pop(message.get("id"), None)
                if future is None:
                    self.stray.append(message)
                elif not future.done():
                    future.set_result(message)

    async def _reply(self, request: dict[str, Any]) -> None:
        assert self.answer is not None, f"unexpected server request {request}"
        reply = await self.answer(request)
        if reply is not None:
            await self.socket.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}))

    async def send(
        self, method: str, params: dict[str, Any] | None = None
    ) -> tuple[Any, asyncio.Future[dict[str, Any]]]:
        request_id = self.next_id
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.socket.send(json.dumps(message))
        return request_id, future

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        _id, future = await self.send(method, params)
        return await asyncio.wait_for(future, 30)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.socket.send(json.dumps(message))

    async def initialize(self, caps: dict[str, Any], version: str = "2025-11-25") -> dict[str, Any]:
        reply = await self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": caps, "clientInfo": {"name": "ws-test", "version": "1"}},
        )
        await self.notify("notifications/initialized")
        return reply


@contextlib.asynccontextmanager
async def ws_client(url: str, answer: Answer | None = None, **connect: Any) -> AsyncIterator[WsClient]:
    from websockets.asyncio.client import connect as ws_connect

    async with ws_connect(url.replace("http://", "ws://"), subprotocols=["mcp"], **connect) as socket:
        client = WsClient(socket, answer)
        try:
            yield client
        finally:
            client.reader.cancel()
