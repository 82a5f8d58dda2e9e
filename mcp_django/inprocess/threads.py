"""Where the in-process client's work runs: one event loop thread, and the test's thread.

A request is served on a long-lived event loop in a daemon thread (so the
server's per-loop state, such as the legacy relay, outlives one call), while
the test's thread waits in :meth:`TestThread.run_until` and runs every piece of
sync work the server hands it: authentication, permission checks, sync
handlers, audit rows, and Django's own thread-sensitive calls (the async ORM,
``cache.aget``). That is what Django's async test client arranges with
``async_to_sync``; here the waiting is re-entrant, so a sync handler blocked in
a legacy ask keeps serving the work its answer needs instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from typing import Any

from asgiref.sync import ThreadSensitiveContext

from ..lifecycle import host_thread


class TestThread(Executor):
    """An executor whose work runs in the thread that created it, while it waits."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        self._ready = threading.Condition()
        self._items: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = deque()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._ready:
            if self._closed:
                # The call this thread served is over; nobody runs this any more.
                future.set_exception(RuntimeError("sync work arrived after the test client's call ended"))
                return future
            self._items.append((future, fn, args, kwargs))
            self._ready.notify_all()
        return future

    def close(self) -> None:
        """The test's thread stops serving: what is queued and what comes later fails at once."""
        with self._ready:
            self._closed = True
            left, self._items = list(self._items), deque()
        for future, *_ in left:
            if future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError("sync work arrived after the test client's call ended"))

    def run_until(self, future: Future[Any]) -> None:
        """Run submitted work in this thread until ``future`` is done. Re-entrant."""
        if threading.current_thread() is not self.thread:
            raise RuntimeError("TestThread.run_until called from another thread")

        def wake(_: Any) -> None:
            with self._ready:
                self._ready.notify_all()

        future.add_done_callback(wake)
        while True:
            with self._ready:
                while not self._items and not future.done():
                    self._ready.wait()
                if future.done():
                    return
                item = self._items.popleft()
            result_future, fn, args, kwargs = item
            if not result_future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                result_future.set_exception(exc)
            else:
                result_future.set_result(result)


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def event_loop() -> asyncio.AbstractEventLoop:
    """The process's in-process serving loop, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            threading.Thread(target=serve, name="mcp-django-test-loop", daemon=True).start()
            started.wait()
            _loop = loop
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

        # Sync work in this thread, through the seam any harness has (lifecycle.host_thread).
        host_thread.set(executor)
        # Audit rows in the test's thread and transaction, through the seam any harness has.
        audit.inline.set(True)
        # Thread-sensitive sync_to_async calls made on the loop (Django's async ORM and
        # cache, signal receivers) come to this thread too, as under async_to_sync.
        async with ThreadSensitiveContext(executor=executor):
            return await work()

    future = asyncio.run_coroutine_threadsafe(root(), event_loop())
    try:
        executor.run_until(future)
    finally:
        executor.close()
    return future.result()
