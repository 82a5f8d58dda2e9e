"""Database connections around each MCP call, as Django's request handler manages them (docs/index.md,
"The request lifecycle on /mcp"): a call's thread-sensitive code runs in one *database thread*,
whose first job and one job after the call close stale connections. Nothing here applies inside
Django's handler or a :data:`host_thread`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from django.db import close_old_connections, connections

from .breaker import database_down
from .conf import mcp_settings


class HostThread(Protocol):
    """A sync thread that drives requests itself and runs their sync work while it waits
    (``async_to_sync``'s calling thread, with a re-entrant wait)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue ``fn`` to run in the host's thread."""

    def run_until(self, future: concurrent.futures.Future[Any]) -> None:
        """Called in the host's thread: run queued work until ``future`` is done."""


#: For a harness serving requests inside its own transaction (docs/testing.md): set, all their
#: sync work runs in that thread, on its connections, instead of the worker pool and the
#: database threads; a sync handler's wait for an answer runs the host's queue (``run_until``).
host_thread: contextvars.ContextVar[HostThread | None] = contextvars.ContextVar("mcp_django_host_thread", default=None)

#: How such a harness runs one queued run of an MCP task itself, in its thread, as a worker would
#: (the test client's ``run_task``): set by the tasks extension when it is registered, so that
#: the harness imports nothing of it.
run_queued_task: Callable[[str], Awaitable[None]] | None = None


class CallScope:
    """One call's use of the database threads. Defaults are the class's (no ``__init__``: every call makes one)."""

    executor: concurrent.futures.ThreadPoolExecutor | None = None
    index = 0
    left = False  # the call has ended (a task it started may still run)
    tokens: tuple[contextvars.Token[Any], contextvars.Token[Any]]


_scope: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar("mcp_django_call_scope", default=None)


def close_stale() -> None:
    """``close_old_connections()`` in this thread, never raising (on failure, closing them all)."""
    try:
        close_old_connections()
    except Exception:
        for connection in connections.all(initialized_only=True):
            try:
                connection.close()
            except Exception:
                pass


def _fresh(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    # The call's first job in its thread: what request_started does.
    close_stale()
    return fn(*args, **kwargs)


class DatabaseThreads(concurrent.futures.Executor):
    """Where asgiref sends thread-sensitive ``sync_to_async`` code during an MCP call: a call keeps
    the thread of its first job (the first no running call holds, a new one only when all are held,
    up to ``DB_THREADS``, else the least held) until it ends.

    Not asgiref's public arrangements: ``async with ThreadSensitiveContext()`` per call costs 55%
    more instructions (bench/HISTORY.md, "asgiref's thread hops, measured"), and its ``executor=``
    refuses a task that outlives its call, which runs here (tests/test_idle_threads.py).
    """

    def __init__(self) -> None:
        self._threads: list[concurrent.futures.ThreadPoolExecutor] = []
        self._holders: list[int] = []  # running calls holding each thread
        self._lock = threading.Lock()

    def _pick(self) -> int:
        # Called with the lock held.
        wanted = mcp_settings.DB_THREADS
        holders = self._holders[:wanted]
        if 0 in holders:
            return holders.index(0)
        if len(holders) < wanted:
            self._threads.append(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-django-db"))
            self._holders.append(0)
            return len(self._threads) - 1
        return holders.index(min(holders))

    def release(self, index: int) -> None:
        """The call that held thread ``index`` has ended."""
        with self._lock:
            self._holders[index] -= 1

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        # Called by asgiref in the calling task's context, on the event loop.
        scope = _scope.get()
        if scope is None or (scope.left and scope.executor is None):
            # Outside a call, or a task that outlived it: any thread, none held (nothing would release it).
            with self._lock:
                executor = self._threads[self._pick()]
            return executor.submit(fn, *args, **kwargs)
        if scope.executor is None:
            with self._lock:
                scope.index = self._pick()
                self._holders[scope.index] += 1
            scope.executor = self._threads[scope.index]
            return scope.executor.submit(_fresh, fn, *args, **kwargs)
        return scope.executor.submit(fn, *args, **kwargs)


database_threads = DatabaseThreads()

# asgiref routes thread-sensitive code by the ThreadSensitiveContext in force; this
# one is never entered, only named by each call, and always maps to our threads.
_KEY = ThreadSensitiveContext()
SyncToAsync.context_to_thread_executor[_KEY] = database_threads


def enter() -> CallScope | None:
    """At the start of a call (cheap: two context variables)."""
    if SyncToAsync.thread_sensitive_context.get(None) is not None:
        return None  # inside Django's handler: it closes connections itself
    if host_thread.get() is not None:
        # The host's thread runs it, on the host's connection.
        return None
    scope = CallScope()
    scope.tokens = _scope.set(scope), SyncToAsync.thread_sensitive_context.set(_KEY)
    return scope


def leave(scope: CallScope | None) -> concurrent.futures.Future[Any] | None:
    """At the end of a call: the cleanup job to wait for, when the call used a database thread."""
    if scope is None:
        return None
    _scope.reset(scope.tokens[0])
    SyncToAsync.thread_sensitive_context.reset(scope.tokens[1])
    scope.left = True
    if scope.executor is None:
        return None
    job = scope.executor.submit(close_stale)
    # Released once its cleanup is queued: a call that takes the thread next runs after it.
    database_threads.release(scope.index)
    return job


async def finished(job: concurrent.futures.Future[Any]) -> None:
    """Wait for the cleanup job; shielded, so a cancelled call still sees it done."""
    await asyncio.shield(asyncio.wrap_future(job))


class QuietDuringOutage(logging.Filter):
    """A logging filter that drops records while a database's breaker is open: for a library's
    per-attempt lines (psycopg-pool's, docs/deployment.md) during an outage the breaker reports."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not database_down()
