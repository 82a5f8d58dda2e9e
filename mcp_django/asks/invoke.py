"""Running one handler: async on the event loop, sync in a worker thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from asgiref.sync import sync_to_async
from django.db import transaction

from ..conf import mcp_settings
from ..lifecycle import close_stale, host_thread
from ..protocol.jsonrpc import MCPError
from ..signals import observer
from . import guard
from .asking import current_context
from .context import Context

T = TypeVar("T")


class WorkerPool:
    """Threads for short sync work, each result handed back with one ``call_soon_threadsafe``.

    Not asgiref's ``sync_to_async``: counted with ``bench/thread_hops.py``, that costs about
    224,000 instructions more per hop, over 20% of a sync call (bench/HISTORY.md).

    A sync handler waiting for a client's answer leaves the pool meanwhile (:meth:`parked`),
    bounded per principal by ``ASK_THREADS_PER_PRINCIPAL``.
    """

    def __init__(self, max_workers: int | None = None) -> None:
        # None: MCP_DJANGO["WORKER_THREADS"], read at each submit (override_settings works).
        self._max_workers = max_workers
        self._jobs: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # threads counted against the maximum (parked ones are not)
        self._idle = 0  # idle threads minus queued jobs
        self._started = 0
        self._parked: dict[str, int] = {}
        self._local = threading.local()

    @property
    def max_workers(self) -> int:
        return self._max_workers if self._max_workers is not None else mcp_settings.WORKER_THREADS

    def submit(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], run: Any) -> None:
        with self._lock:
            if self._idle == 0 and self._threads < self.max_workers:
                self._start()
            else:
                self._idle -= 1
        self._jobs.put((loop, future, run))

    def _start(self) -> None:
        # Called with the lock held.
        self._threads += 1
        self._started += 1
        threading.Thread(target=self._work, name=f"mcp-django-{self._started}", daemon=True).start()

    def _work(self) -> None:
        self._local.worker = True
        while True:
            loop, future, run = self._jobs.get()
            result: Any = None
            error: BaseException | None = None
            try:
                result = run()
            except BaseException as exc:
                error = exc
            # Counted idle before the result goes back: counted after, the next job's submit would
            # start one more thread, and under load the pool grew past the work (bench/HISTORY.md).
            with self._lock:
                retire = self._threads > self.max_workers
                if retire:
                    # Back from a long wait into a full pool (or the setting shrank): retire.
                    self._threads -= 1
                else:
                    self._idle += 1
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting any more
            # Nothing of the job stays with the idle thread until the next job comes.
            del loop, future, run, result, error
            close_stale()
            if retire:
                return

    @contextlib.contextmanager
    def parked(self, principal: str) -> Iterator[None]:
        """Around a wait for a client: the thread stops counting against the pool
        (:class:`MCPError` when ``principal`` has ``ASK_THREADS_PER_PRINCIPAL`` waiting already)."""
        limit = mcp_settings.ASK_THREADS_PER_PRINCIPAL
        in_pool = getattr(self._local, "worker", False)
        with self._lock:
            waiting = self._parked.get(principal, 0)
            if waiting >= limit:
                raise MCPError(
                    TOO_MANY_WAITING,
                    f"this user already has {waiting} sync call(s) waiting for the client's answers "
                    f"(the limit, MCP_DJANGO['ASK_THREADS_PER_PRINCIPAL']): answer or cancel one first",
                )
            self._parked[principal] = waiting + 1
            if in_pool:
                self._threads -= 1
                if self._idle < 0 and self._threads < self.max_workers:
                    # Work is queued behind this thread: a new one takes it.
                    self._idle += 1
                    self._start()
        try:
            yield
        finally:
            with self._lock:
                left = self._parked[principal] - 1
                if left:
                    self._parked[principal] = left
                else:
                    del self._parked[principal]
                if in_pool:
                    self._threads += 1


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():  # the awaiting call was cancelled
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


# A principal has too many sync calls waiting for a client.
TOO_MANY_WAITING = -32005

pool = WorkerPool()


# Eager tasks (Python 3.12+) run to their first wait when created.
EAGER_TASKS = sys.version_info >= (3, 12)


def start_task(coro: Any) -> asyncio.Task[Any]:
    """A task that runs eagerly (Python 3.12+): one that never waits completes without a loop turn."""
    loop = asyncio.get_running_loop()
    if EAGER_TASKS:
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]
    return loop.create_task(coro)


async def run_in_thread(func: Callable[..., T], *args: Any) -> T:
    """Run sync code in the pool with the context's vars (under ``lifecycle.host_thread``: in the host's thread)."""
    executor = host_thread.get()
    if executor is not None:
        # asgiref types executor= as a ThreadPoolExecutor; it hands it to run_in_executor, which takes any.
        return await sync_to_async(func, thread_sensitive=False, executor=executor)(*args)  # type: ignore[call-overload]
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    pool.submit(loop, future, functools.partial(contextvars.copy_context().run, func, *args))
    try:
        return await future
    finally:
        # An error's traceback holds this frame: with the future in it, a cycle only the collector frees.
        del future


class Runnable(Protocol):
    """What :func:`invoke` needs of a handler (a completer passes for one too)."""

    @property
    def func(self) -> Callable[..., Any]: ...

    @property
    def is_async(self) -> bool: ...


def wait_in_thread(future: concurrent.futures.Future[Any]) -> Any:
    """Block a sync handler's thread until the loop resolves ``future`` (a legacy ask); a host's
    thread runs the loop's work for it meanwhile, rather than deadlock."""
    executor = host_thread.get()
    if executor is not None:
        executor.run_until(future)
    return future.result()


def _run_sync(handler: Runnable, kwargs: dict[str, Any], ctx: Context) -> Any:
    """A sync handler under the replay guard, or in a transaction (``atomic=``)."""
    if guard.current.get() is not None:
        guard.install()  # the watcher goes on this thread's connections
    alias = getattr(handler, "atomic", None)
    if not alias:
        return handler.func(**kwargs)
    with transaction.atomic(using=alias):
        value = handler.func(**kwargs)
        if getattr(ctx.backend, "pending", None):
            # The handler caught the end of its attempt and returned: input_required all the same.
            transaction.set_rollback(True, using=alias)
        return value


async def invoke(handler: Runnable, kwargs: dict[str, Any], ctx: Context) -> Any:
    watching = observer.get()
    if watching is not None:  # a harness counts the handler's runs
        watching.ran(handler)
    token = current_context.set(ctx)
    try:
        if handler.is_async:
            coro = handler.func(**kwargs)
            recorder = guard.current.get()
            if recorder is not None:
                recorder.coro = coro
            return await coro
        ctx.loop = asyncio.get_running_loop()
        # getattr: completers come here too, as a bare stand-in for a handler.
        if getattr(handler, "atomic", None) or guard.current.get() is not None:
            return await run_in_thread(_run_sync, handler, kwargs, ctx)
        return await run_in_thread(lambda: handler.func(**kwargs))
    finally:
        current_context.reset(token)
