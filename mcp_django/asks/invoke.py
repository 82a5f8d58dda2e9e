"""Running one handler: async on the event loop, sync in a worker thread."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import queue
import sys
import threading
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import transaction

from ..conf import mcp_settings
from ..lifecycle import close_stale, host_thread
from ..protocol.jsonrpc import MCPError
from ..signals import observer
from . import guard
from .context import Asking, Context, current_context

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


def _run_sync(handler: Any, kwargs: dict[str, Any], ctx: Context) -> Any:
    """A sync handler, in its worker thread: under the replay guard, or in a transaction (``atomic=``)."""
    if guard.current.get() is not None:
        guard.install()  # the watcher goes on this thread's connections
    # getattr: completers come here too, as a bare stand-in for a handler.
    alias = getattr(handler, "atomic", None)
    if not alias:
        return handler.func(**kwargs)
    with transaction.atomic(using=alias):
        value = handler.func(**kwargs)
        if getattr(ctx.backend, "pending", None):
            # The handler caught the end of its attempt and returned: input_required all the same.
            transaction.set_rollback(True, using=alias)
        return value


async def invoke(handler: Any, kwargs: dict[str, Any], ctx: Context) -> Any:
    """Run ``handler`` (a :class:`~mcp_django.handlers.Handler`, or a completer standing in for one)."""
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
        return await run_in_thread(_run_sync, handler, kwargs, ctx)
    finally:
        current_context.reset(token)


class _Adopting:
    """The task factory a handler's steps run with, over the loop's own (``host``; None: asyncio's):
    it unwraps asks and hands each task to the backend when the backend adopts tasks."""

    __slots__ = ("host",)

    def __init__(self, host: Any) -> None:
        self.host = host

    def __call__(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        if type(coro) is Asking:
            coro = coro._coro
        ctx = current_context.get()
        adopt = getattr(ctx.backend, "adopt", None) if ctx is not None else None
        parent = asyncio.current_task(loop) if adopt is not None else None
        # The new task's steps are the handler's code too: the tasks it starts are found alike.
        steps = Scoped(coro, loop)
        host = self.host
        task = host(loop, steps, **kwargs) if host is not None else asyncio.Task(steps, loop=loop, **kwargs)
        if adopt is not None:
            adopt(task, parent)
        return task


# The factory made last, over the host factory it was made for: one per loop in practice.
_last = _Adopting(None)


def _over(host: Any) -> _Adopting:
    global _last
    ours = _last
    if ours.host is not host:
        ours = _last = _Adopting(host)
    return ours


class Scoped(Coroutine[Any, Any, T]):
    """A handler's coroutine (or one of its tasks'), each step run with our task factory on the loop.

    A task factory is asyncio's only way to learn which tasks a coroutine starts; it is on the
    loop only during the handler's own steps, so the host's tasks never meet it. A class, not a
    wrapping coroutine: a task cancelled before its first step closes the handler's coroutine quietly.
    """

    __slots__ = ("_coro", "_loop")

    def __init__(self, coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> None:
        self._coro = coro
        self._loop = loop

    def send(self, value: Any) -> Any:
        loop = self._loop
        host = loop.get_task_factory()
        if type(host) is _Adopting:  # inside a step already (an eager task started by its parent)
            return self._coro.send(value)
        ours = _over(host)
        loop.set_task_factory(ours)
        try:
            return self._coro.send(value)
        finally:
            if loop.get_task_factory() is ours:  # unless the handler set one of its own meanwhile
                loop.set_task_factory(host)

    def throw(self, *args: Any) -> Any:
        loop = self._loop
        host = loop.get_task_factory()
        if type(host) is _Adopting:
            return self._coro.throw(*args)
        ours = _over(host)
        loop.set_task_factory(ours)
        try:
            return self._coro.throw(*args)
        finally:
            if loop.get_task_factory() is ours:
                loop.set_task_factory(host)

    def close(self) -> None:
        self._coro.close()  # unwinding: no task started here need be found

    # Awaited directly (the legacy engine awaits the handler in the call's own task).
    def __await__(self) -> Generator[Any, None, T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def __getattr__(self, name: str) -> Any:
        # A coroutine's introspection (cr_code, __qualname__: task reprs, debuggers, task factories).
        return getattr(self._coro, name)
