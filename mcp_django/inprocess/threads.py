"""Where the in-process client's work runs: one long-lived event loop thread, and the test's thread.

The test's thread runs every piece of sync work the server hands it (authentication, sync
handlers, audit rows, Django's thread-sensitive calls) while it waits, as ``async_to_sync``
would; the waiting is re-entrant, so a sync handler blocked in a legacy ask keeps serving the
work its answer needs instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from typing import Any

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
