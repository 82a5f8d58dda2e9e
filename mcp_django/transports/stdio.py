"""MCP over stdin/stdout (``manage.py mcp_stdio``): one JSON-RPC message per line.

The process is the session, as a socket is, so the websocket consumer serves it; only
the caller (fixed by whoever started the command) and the framing (lines) differ.
"""

from __future__ import annotations

import asyncio
import threading
from typing import IO, Any

from ..auth import Principal
from ..pipeline import refusal
from ..protocol import jsonrpc
from ..protocol.jsonrpc import PARSE_ERROR, MCPError
from .websocket import SUBPROTOCOL, MCPWebsocketConsumer


class StdioConsumer(MCPWebsocketConsumer):
    """The websocket session over a pipe: no Host, Origin or credentials to check."""

    transport = "stdio"

    async def connect(self) -> None:
        self._start()  # self.principal: the process's, handed over by as_asgi()
        await self.accept(subprotocol=SUBPROTOCOL)
        self.writer = asyncio.ensure_future(self._write())

    async def _recheck(self) -> Principal:
        # No credentials to check again: the caller is whoever started the command.
        assert self.principal is not None
        return self.principal

    async def disconnect(self, code: int) -> None:
        # stdin ended: calls still running may finish and answer (a piped script closes stdin
        # right after its last request), unless one waits for an answer that cannot come now.
        while self.calls and not self.replies.waiting:
            await asyncio.wait(list(self.calls.values()), timeout=0.05)
        if self.writer is not None:
            self.outbox.put_nowait(None)  # the writer drains what the calls answered, then stops
            await asyncio.wait({self.writer})
            self.writer = None
        await super().disconnect(code)


# Django's request for a call (ctx.request) is built from this: a GET of the endpoint.
_SCOPE: dict[str, Any] = {"type": "websocket", "path": "/mcp", "headers": [], "subprotocols": [SUBPROTOCOL]}


def _read_lines(stdin: IO[bytes], loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[dict[str, Any]]) -> None:
    """Blocking reads in a thread of their own: stdin may be a pipe, a file or a terminal."""
    try:
        for line in stdin:
            line = line.strip()
            if line:
                loop.call_soon_threadsafe(inbox.put_nowait, {"type": "stdio.line", "line": line})
    finally:
        loop.call_soon_threadsafe(inbox.put_nowait, {"type": "websocket.disconnect", "code": 1000})


async def serve(principal: Principal, stdin: IO[bytes], stdout: IO[bytes], registry: Any = None) -> None:
    """Serve MCP on the two streams until stdin ends, then cancel what is still running."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "websocket.connect"})
    threading.Thread(target=_read_lines, args=(stdin, loop, inbox), name="mcp-django-stdin", daemon=True).start()

    def write(line: bytes) -> None:
        stdout.write(line + b"\n")
        stdout.flush()

    async def receive() -> dict[str, Any]:
        while True:
            message = await inbox.get()
            if message["type"] != "stdio.line":
                return message
            try:
                return {"type": "websocket.receive", "text": message["line"].decode("utf-8")}
            except UnicodeDecodeError:
                write(jsonrpc.dumps(refusal(None, MCPError(PARSE_ERROR, "Parse error: not UTF-8"))[1]))

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send":
            write(message["text"].encode())

    consumer = StdioConsumer.as_asgi(principal=principal, registry=registry)
    await consumer(dict(_SCOPE), receive, send)
