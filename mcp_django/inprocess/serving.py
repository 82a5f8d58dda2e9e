"""Where the in-process client's requests are served (docs/testing.md, "What runs where"): in
memory, on one long-lived event loop thread, their sync work in the test's thread while it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor, Future
from typing import Any

import orjson
from asgiref.sync import ThreadSensitiveContext

from ..lifecycle import host_thread

_ENDED = "sync work arrived after the test client's call ended"
_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class TestThread(Executor):
    """An executor whose work runs in the thread that created it, while it waits."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        # Work to run, and None: a wake-up when a future run_until waits for is done.
        self._items: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if not self._closed:
                self._items.put((future, fn, args, kwargs))
                return future
        future.set_exception(RuntimeError(_ENDED))  # the call this thread served is over
        return future

    def close(self) -> None:
        """The test's thread stops serving: what is queued and what comes later fails at once."""
        with self._lock:
            self._closed = True
        while not self._items.empty():
            item = self._items.get()
            if item is not None and item[0].set_running_or_notify_cancel():
                item[0].set_exception(RuntimeError(_ENDED))

    def run_until(self, future: Future[Any]) -> None:
        """Run submitted work in this thread until ``future`` is done. Re-entrant."""
        if threading.current_thread() is not self.thread:
            raise RuntimeError("TestThread.run_until called from another thread")
        future.add_done_callback(lambda _: self._items.put(None))
        while not future.done():
            item = self._items.get()
            if item is None or not item[0].set_running_or_notify_cancel():
                continue
            result_future, fn, args, kwargs = item
            try:
                result_future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                result_future.set_exception(exc)


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def event_loop() -> asyncio.AbstractEventLoop:
    """The process's in-process serving loop, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="mcp-django-test-loop", daemon=True).start()
    return _loop


def refuse_in_loop() -> None:
    """The sync methods would block the loop they are called from: say which to use instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        "MCPClient's sync methods cannot run inside an event loop: await the a-prefixed ones "
        "(await client.acall_tool(...)) in async tests"
    )


def run(work: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``work()`` on the serving loop, its sync work in this thread; its result."""
    refuse_in_loop()
    executor = TestThread()

    async def root() -> Any:
        from .. import audit

        # Through the seams any harness has: sync work and audit rows in this thread and its
        # transaction, and thread-sensitive sync_to_async calls (the async ORM, cache) too.
        host_thread.set(executor)
        audit.inline.set(True)
        async with ThreadSensitiveContext(executor=executor):
            return await work()

    future = asyncio.run_coroutine_threadsafe(root(), event_loop())
    try:
        executor.run_until(future)
    finally:
        executor.close()
    return future.result()


def default_app() -> Any:
    """The project's ASGI application (``ASGI_APPLICATION``), else mcp-django's own."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    path = getattr(settings, "ASGI_APPLICATION", None)
    if path:
        return import_string(path)
    from ..routing import application

    return application


class Response:
    """What the application sent: status and headers at once, the body as it comes."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], chunks: asyncio.Queue[bytes | None]) -> None:
        self.status = status
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
        self._chunks = chunks

    async def body(self) -> bytes:
        """The rest of the body (read once)."""
        parts = []
        while (chunk := await self._chunks.get()) is not None:
            parts.append(chunk)
        return b"".join(parts)

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The JSON messages of an SSE stream, as they arrive (a legacy call's server-to-client requests
        reach the client while the call is open; priming events skipped)."""
        buffer = b""
        while (chunk := await self._chunks.get()) is not None:
            buffer += chunk
            while b"\n\n" in buffer:
                raw, buffer = buffer.split(b"\n\n", 1)
                data = b"\n".join(line[5:].lstrip(b" ") for line in raw.split(b"\n") if line.startswith(b"data:"))
                if data.strip():
                    yield orjson.loads(data)


@contextlib.asynccontextmanager
async def exchange(
    app: Any, method: str, path: str, headers: dict[str, str], body: bytes, host: str = "testserver"
) -> AsyncIterator[Response]:
    """One HTTP request through ``app``, its response as soon as it starts. When the block ends
    the client goes away (what closing a stream means to the server), and the app is waited for."""
    raw_path, _, query = path.partition("?")
    scope = {
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
