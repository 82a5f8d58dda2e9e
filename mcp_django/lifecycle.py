"""Database connections around each MCP call, as Django's request handler manages them.

The ASGI fast path (``/mcp``) does not go through Django's handler, so nothing
sends ``request_started``/``request_finished``, whose receiver
``close_old_connections`` enforces ``CONN_MAX_AGE`` and ``CONN_HEALTH_CHECKS``.
Connections are per thread, and an MCP call uses them in one of two places:

- sync code (authentication, permission checks, sync handlers) runs in the
  worker pool (:mod:`mcp_django.asks.invoke`), which closes stale connections
  after every job, in that thread;
- an async handler's ORM calls (``await Order.objects.aget(...)``) and any other
  thread-sensitive ``sync_to_async`` code run in a *database thread* chosen for
  the call (see :class:`DatabaseThreads`): every thread-sensitive call of one
  MCP call goes to the same thread, as under Django's ``ThreadSensitiveContext``.
  The call's first job there starts with ``close_old_connections()`` (Django's
  ``request_started``), and when the call ends one more job runs it again
  (``request_finished``) and the call waits for it. A call that never used a
  database thread pays neither: no thread hop, no wait.

Where Django's handler already manages the lifecycle (MCP served through a
Django view: a ``ThreadSensitiveContext`` is active, or a sync thread runs the
view), nothing here applies; nor where a harness hosts the requests in a thread
of its own (:data:`host_thread`).

:class:`QuietDuringOutage` keeps a library's per-attempt lines out of the log while a
database's breaker (:func:`mcp_django.breaker.database`) is open.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from django.db import close_old_connections, connections

from .breaker import database_down
from .conf import mcp_settings


class HostThread(Protocol):
    """A sync thread that drives requests itself and runs their sync work while it waits.

    What ``async_to_sync`` makes of the thread that calls it (Django's async test
    client), with a re-entrant wait: see :data:`host_thread`.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue ``fn`` to run in the host's thread."""
        ...

    def run_until(self, future: concurrent.futures.Future[Any]) -> None:
        """Called in the host's thread: run queued work until ``future`` is done."""
        ...


#: The executor seam, for a harness that serves requests inside a transaction of its own (a
#: test harness that rolls back at its end; docs/testing.md): set in the context the requests
#: are served from, every piece of their sync work (authentication, permission checks, sync
#: handlers, thread-sensitive code) runs in that thread, on its connections and inside its
#: transaction, instead of in the worker pool and the database threads; a sync handler's wait
#: for a client's answer runs the host's queue (``run_until``) rather than block it. The host
#: then owns its connections: nothing in the package closes them.
host_thread: contextvars.ContextVar[HostThread | None] = contextvars.ContextVar("mcp_django_host_thread", default=None)


class CallScope:
    """One call's use of the database threads: which one it has, if any. Its defaults are the
    class's (no ``__init__``: every call that runs a handler makes one)."""

    executor: concurrent.futures.ThreadPoolExecutor | None = None
    index = 0
    left = False  # the call has ended (a task it started may still run)


_scope: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar("mcp_django_call_scope", default=None)


def close_stale() -> None:
    """``close_old_connections()`` in this thread, never raising.

    If a connection cannot even be inspected, every connection of the thread is
    closed: keeping one in an unknown state would hand it to the next call.
    """
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
    """Where asgiref sends thread-sensitive ``sync_to_async`` code during an MCP call.

    Threads are long-lived (a connection persists in each, per ``CONN_MAX_AGE``);
    a call takes one at its first job and keeps it until it ends: the first that no
    running call holds, a new one only when every one is held (up to
    ``MCP_DJANGO["DB_THREADS"]``), else the one the fewest calls hold. So a server
    whose calls do not overlap keeps one thread and one connection per database,
    not ``DB_THREADS`` of each.

    It stays beside asgiref's public API, named to asgiref as the executor of one
    ``ThreadSensitiveContext`` that each call sets (:func:`enter`), because neither public
    arrangement keeps what this one does (bench/HISTORY.md, "asgiref's thread hops, measured"):

    - ``async with ThreadSensitiveContext()`` per call, as Django's ASGI handler enters one,
      starts a thread for each call that queries and another to join it, and ends its
      connections with it: 2,550,003 instructions for a call's two queries against 1,646,913
      here (``python bench/thread_hops.py``), 55% more, about 35% of the ``asyncdb``
      scenario's whole call (``bench/instructions.py``, 2,574,030).
    - ``ThreadSensitiveContext(executor=...)`` per call (asgiref 3.13) keeps long-lived threads,
      but refuses (``RuntimeError``) every thread-sensitive call of a task that outlives its
      call: a parked branch of a round that unwinds after the answer has gone, a task the
      handler started. Here such a call still runs, in the call's thread or, if it never took
      one, in any (tests/test_idle_threads.py). It would also take the calls an enclosing
      ``async_to_sync`` thread runs (a WSGI server's, a test's).
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

    def _hold(self) -> int:
        with self._lock:
            index = self._pick()
            self._holders[index] += 1
            return index

    def release(self, index: int) -> None:
        """The call that held thread ``index`` has ended."""
        with self._lock:
            self._holders[index] -= 1

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        # Called by asgiref in the calling task's context, on the event loop.
        scope = _scope.get()
        if scope is None or (scope.left and scope.executor is None):
            # Outside a call, or a task that outlived its call: any thread will do, and none is
            # held (nothing would release it).
            with self._lock:
                executor = self._threads[self._pick()]
            return executor.submit(fn, *args, **kwargs)
        if scope.executor is None:
            scope.index = self._hold()
            scope.executor = self._threads[scope.index]
            return scope.executor.submit(_fresh, fn, *args, **kwargs)
        return scope.executor.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for thread in self._threads:
            thread.shutdown(wait, cancel_futures=cancel_futures)


database_threads = DatabaseThreads()

# asgiref routes thread-sensitive code by the ThreadSensitiveContext in force; this
# one is never entered, only named by each call, and always maps to our threads.
_KEY = ThreadSensitiveContext()
SyncToAsync.context_to_thread_executor[_KEY] = database_threads

Entered = tuple[CallScope, contextvars.Token[Any], contextvars.Token[Any]] | None


def enter() -> Entered:
    """At the start of a call (cheap: two context variables)."""
    if SyncToAsync.thread_sensitive_context.get(None) is not None:
        return None  # inside Django's handler: it closes connections itself
    if host_thread.get() is not None:
        # Thread-sensitive work runs in the host's thread, whose connection holds the
        # host's transaction and is the host's to close.
        return None
    scope = CallScope()
    return scope, _scope.set(scope), SyncToAsync.thread_sensitive_context.set(_KEY)


def leave(entered: Entered) -> concurrent.futures.Future[Any] | None:
    """At the end of a call: the cleanup job to wait for, when the call used a database thread."""
    if entered is None:
        return None
    scope, scope_token, key_token = entered
    _scope.reset(scope_token)
    SyncToAsync.thread_sensitive_context.reset(key_token)
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
    """A logging filter that drops records while a database's breaker is open.

    For a library's per-attempt lines during an outage the breaker already reports (for
    example psycopg-pool's ``error connecting in ...``, one per reconnection attempt):
    ``"filters"`` of the ``psycopg.pool`` logger in ``LOGGING`` (docs/deployment.md).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not database_down()
