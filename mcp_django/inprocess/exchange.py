"""One HTTP exchange with an ASGI application, in memory: no socket, no server.

The response is read as it is sent, so an SSE stream's events (a legacy call's
server-to-client requests) reach the client while the call is still open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson


class Response:
    """What the application sent: status and headers at once, the body as it comes."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], chunks: asyncio.Queue[bytes | None]) -> None:
        self.status = status
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
        self._chunks = chunks
        self._body: bytes | None = None

    @property
    def is_stream(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    async def body(self) -> bytes:
        if self._body is None:
            parts = []
            while (chunk := await self._chunks.get()) is not None:
                parts.append(chunk)
            self._body = b"".join(parts)
        return self._body

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The JSON messages of an SSE stream, as they arrive (priming events skipped)."""
        buffer = b""
        while (chunk := await self._chunks.get()) is not None:
            buffer += chunk
            while b"\n\n" in buffer:
                raw, buffer = buffer.split(b"\n\n", 1)
                data = b"\n".join(line[5:].lstrip(b" ") for line in raw.split(b"\n") if line.startswith(b"data:"))
                if data.strip():
                    yield orjson.loads(data)


@contextlib.asynccontextmanager
async def exchange(app: Any, scope: dict[str, Any], body: bytes) -> AsyncIterator[Response]:
    """One request through ``app``, its response as soon as it starts. When the block ends the
    client goes away (what closing a stream means to the server), and the app is waited for."""
    started: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
    chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
    gone = asyncio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.set_result(Response(message["status"], list(message.get("headers", [])), chunks))
        elif message["type"] == "http.response.body":
            if message.get("body"):
                chunks.put_nowait(message["body"])
            if not message.get("more_body", False):
                chunks.put_nowait(None)

    async def run() -> None:
        try:
            await app(scope, receive, send)
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise
        finally:
            if not started.done():
                started.set_exception(RuntimeError("the application sent no response"))
            chunks.put_nowait(None)

    task = asyncio.ensure_future(run())
    try:
        yield await started
    finally:
        gone.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), 10)


def http_scope(method: str, path: str, headers: dict[str, str], *, host: str = "testserver") -> dict[str, Any]:
    raw_path, _, query = path.partition("?")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", host.encode())]
        + [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": (host, 80),
    }
