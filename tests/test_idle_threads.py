"""The worker pool and the database threads keep as many threads as the work that overlaps, not more."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_django import lifecycle
from mcp_django.asks import invoke
from tests.conftest import mcp_settings


def test_calls_one_after_another_keep_one_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished job's thread takes the next one even while it still closes its connections.

    Counted idle only after ``close_stale()``, it was not yet idle when the loop, already
    answered, submitted the next request's job: the pool started one thread more for each,
    and under load held many more threads (and their memory) than calls ever ran at once.
    """
    monkeypatch.setattr(invoke, "close_stale", lambda: time.sleep(0.05))
    pool = invoke.WorkerPool(max_workers=8)
    ran: list[int] = []

    def job() -> int:
        ran.append(threading.get_ident())
        return len(ran)

    async def calls() -> list[int]:
        loop = asyncio.get_running_loop()
        results = []
        for _ in range(5):
            future: asyncio.Future[int] = loop.create_future()
            pool.submit(loop, future, job)
            results.append(await future)
        return results

    assert asyncio.run(calls()) == [1, 2, 3, 4, 5]
    assert pool._started == 1 and len(set(ran)) == 1


def test_overlapping_jobs_still_get_threads_of_their_own() -> None:
    pool = invoke.WorkerPool(max_workers=8)
    gate = threading.Barrier(3, timeout=10)

    async def calls() -> list[Any]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(3)]
        for future in futures:
            pool.submit(loop, future, gate.wait)  # all three must run at once to pass the barrier
        return await asyncio.gather(*futures)

    assert sorted(asyncio.run(calls())) == [0, 1, 2]
    assert pool._started == 3


def _thread_sensitive_call(hold: asyncio.Event | None = None, started: asyncio.Event | None = None) -> Any:
    async def call() -> int:
        entered = lifecycle.enter()
        try:
            ident = await sync_to_async(threading.get_ident)()
            if started is not None:
                started.set()
            if hold is not None:
                await hold.wait()
            return ident
        finally:
            job = lifecycle.leave(entered)
            if job is not None:
                await lifecycle.finished(job)

    return call()


def test_calls_one_after_another_keep_one_database_thread() -> None:
    """Round-robin started all ``DB_THREADS`` threads (each with its connections) for calls
    that never overlapped; a call now takes the first thread no running call holds."""

    async def calls() -> list[int]:
        return [await _thread_sensitive_call() for _ in range(6)]

    with mcp_settings(DB_THREADS=4):
        idents = asyncio.run(calls())
    assert len(set(idents)) == 1, idents


def test_overlapping_calls_get_database_threads_of_their_own_up_to_the_setting() -> None:
    async def calls(n: int) -> list[int]:
        hold = asyncio.Event()
        started = [asyncio.Event() for _ in range(n)]
        tasks = [asyncio.create_task(_thread_sensitive_call(hold, s)) for s in started]
        for s in started:
            await s.wait()
        hold.set()
        return await asyncio.gather(*tasks)

    with mcp_settings(DB_THREADS=3):
        assert len(set(asyncio.run(calls(3)))) == 3
        # A fourth at once shares a thread: the setting bounds them.
        assert len(set(asyncio.run(calls(4)))) == 3
        # All released: the next call takes a thread again, and none is held any more.
        assert len(set(asyncio.run(calls(1)))) == 1
    assert lifecycle.database_threads._holders[:3] == [0, 0, 0]


def test_a_task_that_outlives_its_call_holds_no_database_thread() -> None:
    """Its first thread-sensitive job comes after the call's end, which would never release it."""

    async def call_with_a_late_task() -> int:
        go = asyncio.Event()
        entered = lifecycle.enter()
        try:

            async def late() -> int:
                await go.wait()
                return await sync_to_async(threading.get_ident)()

            task = asyncio.create_task(late())
        finally:
            job = lifecycle.leave(entered)
            assert job is None  # the call itself made no thread-sensitive call
        go.set()
        return await task

    with mcp_settings(DB_THREADS=2):
        asyncio.run(call_with_a_late_task())
        assert lifecycle.database_threads._holders[:2] in ([0], [0, 0])
