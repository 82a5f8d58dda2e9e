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

    async def json(self) -> Any:
        return orjson.loads(await self.body())

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


class Exchange:
    """Drives one request through the application; close() disconnects the client."""

    def __init__(self, app: Any, scope: dict[str, Any], body: bytes) -> None:
        self.app = app
        self.scope = scope
        self.body = body
        self._sent_body = False
        self._gone = asyncio.Event()
        self._started: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.response: Response | None = None
        self.task: asyncio.Task[None] | None = None

    async def receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.response = Response(message["status"], list(message.get("headers", [])), self._chunks)
            self._started.set_result(self.response)
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body:
                self._chunks.put_nowait(body)
            if not message.get("more_body", False):
                self._chunks.put_nowait(None)

    async def start(self) -> Response:
        self.task = asyncio.ensure_future(self._run())
        return await self._started

    async def _run(self) -> None:
        try:
            await self.app(self.scope, self.receive, self.send)
        except BaseException as exc:
            if not self._started.done():
                self._started.set_exception(exc)
            raise
        finally:
            if not self._started.done():
                self._started.set_exception(RuntimeError("the application sent no response"))
            self._chunks.put_nowait(None)

    async def close(self) -> None:
        """The client goes away (what closing a stream means to the server); waits for the app to end."""
        self._gone.set()
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self.task), 10)


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
