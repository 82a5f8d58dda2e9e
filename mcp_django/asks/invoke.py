"""Running one handler: async on the event loop, sync in a worker thread."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import sys
import threading
from typing import Any

from django.db import close_old_connections

from ..registry import Handler
from .call import Call
from .context import AsyncContext, Backend, Context, SyncContext, bind


class WorkerPool:
    """Threads for sync code, each result handed back with one ``call_soon_threadsafe``.

    Sync handlers get their own pool rather than asgiref's single shared thread: a
    legacy handler may block for minutes waiting for the client, and must not hold
    up anyone else's sync work meanwhile. It is not ``run_in_executor``: that wraps
    every job in a concurrent future chained to an asyncio future, which costs a
    trivial sync tool more than the tool itself.
    """

    def __init__(self, max_workers: int = 32) -> None:
        self.max_workers = max_workers
        self._jobs: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], run: Any) -> None:
        with self._lock:
            if self._idle == 0 and self._threads < self.max_workers:
                self._threads += 1
                threading.Thread(target=self._work, name=f"mcp-django-{self._threads}", daemon=True).start()
            else:
                self._idle -= 1
        self._jobs.put((loop, future, run))

    def _work(self) -> None:
        while True:
            loop, future, run = self._jobs.get()
            try:
                result = run()
            except BaseException as exc:
                _hand_back(loop, future, None, exc)
            else:
                _hand_back(loop, future, result, None)
            finally:
                close_old_connections()
            with self._lock:
                self._idle += 1


def _hand_back(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, exc: BaseException | None
) -> None:
    try:
        loop.call_soon_threadsafe(_settle, future, result, exc)
    except RuntimeError:
        pass  # the loop is closed: nobody is waiting any more


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():  # the awaiting call was cancelled
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


_pool = WorkerPool()


def start_task(coro: Any) -> asyncio.Task[Any]:
    """A task that runs eagerly (Python 3.12+): a coroutine that finishes without
    waiting on anything completes right here, without an event-loop turn."""
    loop = asyncio.get_running_loop()
    if _EAGER:
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]
    return loop.create_task(coro)


_EAGER = sys.version_info >= (3, 12)


def make_context(handler: Handler, call: Call, backend: Backend, state: dict[str, str] | None) -> Context:
    cls = AsyncContext if handler.is_async else SyncContext
    return cls(call, backend, state)


async def run_in_thread(func: Any, *args: Any) -> Any:
    """Run sync code (handlers, ORM, auth) in the pool, with context vars, closing stale DB connections."""

    loop = asyncio.get_running_loop()
    future = loop.create_future()
    _pool.submit(loop, future, functools.partial(contextvars.copy_context().run, func, *args))
    return await future


async def invoke(handler: Handler, kwargs: dict[str, Any], ctx: Context) -> Any:
    token = bind(ctx)
    try:
        if handler.is_async:
            return await handler.func(**kwargs)
        ctx._loop = asyncio.get_running_loop()
        return await run_in_thread(lambda: handler.func(**kwargs))
    finally:
        from .context import _current

        _current.reset(token)
