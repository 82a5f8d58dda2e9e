"""The circuit breaker of the channel layer and the session cache, without Redis:
a service found away is refused at once and said once; a probe brings it back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis.exceptions
from django.conf import settings
from django.test import override_settings

from mcp_django import breaker as breaker_module
from mcp_django import worker_channel
from mcp_django.breaker import Breaker, is_outage
from mcp_django.conf import mcp_settings
from mcp_django.protocol.jsonrpc import Unavailable


@pytest.fixture(autouse=True)
def closed_layer_breaker() -> Iterator[None]:
    worker_channel.layer_breaker.reset()
    yield
    worker_channel.layer_breaker.reset()


def test_what_counts_as_an_outage() -> None:
    assert is_outage(redis.exceptions.ConnectionError("Connection closed by server."))
    assert is_outage(redis.exceptions.TimeoutError("Timeout reading from socket"))
    assert is_outage(ConnectionRefusedError()) and is_outage(TimeoutError())
    # The call was wrong, not the service: a message the layer cannot encode, a full channel.
    assert not is_outage(TypeError("can not serialize 'int' object"))
    assert not is_outage(redis.exceptions.ResponseError("WRONGTYPE"))


def test_a_breaker_refuses_at_once_says_it_once_and_closes_when_the_probe_answers(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(breaker_module, "PROBE_SECONDS", 0.01)
    answering = asyncio.Event()
    probes = []

    async def probe() -> None:
        probes.append(1)
        if not answering.is_set():
            raise redis.exceptions.ConnectionError("refused")

    async def run() -> None:
        breaker = Breaker("the thing", probe)
        breaker.check()  # closed: nothing raised
        for _ in range(50):
            breaker.failed(redis.exceptions.TimeoutError("Timeout reading from socket"))
            with pytest.raises(Unavailable):
                breaker.check()
        async with asyncio.timeout(30):
            while len(probes) <= 2:
                await asyncio.sleep(0.01)
        assert breaker.open  # one probe, retrying: not one per request
        answering.set()
        async with asyncio.timeout(30):
            while breaker.open:
                await asyncio.sleep(0.01)
        breaker.check()

    with caplog.at_level(logging.WARNING, logger="mcp_django"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "the thing is unavailable" in lines[0] and "answers again" in lines[1], lines
    assert not any(r.exc_info for r in caplog.records)


def test_layer_calls_retry_a_dead_pooled_connection_and_trip_only_on_outages() -> None:
    calls: list[str] = []

    async def dead_then_fine() -> str:
        calls.append("x")
        if len(calls) == 1:
            raise redis.exceptions.ConnectionError("Connection closed by server.")
        return "sent"

    async def unencodable() -> None:
        raise TypeError("can not serialize")

    async def hung() -> None:
        raise redis.exceptions.TimeoutError("Timeout reading from socket")

    async def never_called() -> None:
        raise AssertionError("a call went to a layer known to be away")

    async def run() -> None:
        # A connection that died with an earlier outage fails once; the call goes through.
        assert await worker_channel.layer_call(dead_then_fine) == "sent" and len(calls) == 2
        with pytest.raises(TypeError):
            await worker_channel.layer_call(unencodable)
        assert not worker_channel.layer_breaker.open
        with pytest.raises(Unavailable):
            await worker_channel.layer_call(hung)
        assert worker_channel.layer_breaker.open
        with pytest.raises(Unavailable):
            await worker_channel.layer_call(never_called)
        worker_channel.layer_breaker.reset()

    asyncio.run(run())


def test_a_worker_channel_the_layer_could_not_start_starts_at_the_next_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The layer is down when a worker first needs its channel: that request is refused as the
    layer being away (a 503), and the next one starts the channel afresh."""
    from channels.layers import InMemoryChannelLayer

    class DownAtFirst(InMemoryChannelLayer):
        failures = 1

        async def new_channel(self, prefix: str = "specific.") -> str:
            if self.failures:
                self.failures -= 1
                raise redis.exceptions.ConnectionError("Connection refused")
            return await super().new_channel(prefix)

    async def run() -> None:
        worker = worker_channel.WorkerChannel()
        worker.layer = DownAtFirst()
        worker_channel._workers[asyncio.get_running_loop()] = worker
        with pytest.raises(Unavailable):
            await worker_channel.worker_channel()
        try:
            assert await worker_channel.worker_channel() is worker
            assert worker.channel.startswith("mcp-django.")
        finally:
            await worker.stop()

    asyncio.run(run())
    assert "the channel layer is unavailable" in caplog.text


def test_a_hung_layer_operation_is_refused_within_a_second() -> None:
    """A send to a Redis that stopped answering (no error, no reply) is cancelled at
    CHANNEL_LAYER_TIMEOUT (by default under a second; here shortened with the setting), and
    refused as the layer being away."""
    cancelled = asyncio.Event()

    async def hung() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def run() -> float:
        started = asyncio.get_running_loop().time()
        with pytest.raises(Unavailable):
            await worker_channel.layer_call(hung)
        assert worker_channel.layer_breaker.open  # the next ones are refused at once
        return asyncio.get_running_loop().time() - started

    assert mcp_settings.CHANNEL_LAYER_TIMEOUT == 0.75
    try:
        with override_settings(MCP_DJANGO={**settings.MCP_DJANGO, "CHANNEL_LAYER_TIMEOUT": 0.2}):
            waited = asyncio.run(run())
        # The bound, not the operation, ended it (the generous ceiling only tells it from the 60 s).
        assert cancelled.is_set() and 0.2 <= waited < 30
    finally:
        worker_channel.layer_breaker.reset()


def test_each_tracker_says_an_outage_once_when_it_begins_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit writer, the longer principal cache's shared cache and a database (its probe)
    each keep their outage in a breaker of mcp_django.breaker: one line when it begins, one when
    it ends, however many calls fail meanwhile, and no traceback (the session store and the
    channel layer: above, and tests/test_faults.py)."""
    import time

    from django.db import OperationalError

    from mcp_django import audit, auth_cache, breaker
    from mcp_django.postgresql.base import Prober

    away = [True]

    def insert(rows: list[Any]) -> int:
        if away[0]:
            raise OperationalError("connection refused")
        return 0

    class Cache:
        def get(self, key: str) -> int:
            if away[0]:
                raise ConnectionRefusedError("connection refused")
            return 1

    def connect() -> None:
        if away[0]:
            raise OperationalError("connection refused")

    monkeypatch.setattr(audit, "_insert", insert)
    writer = audit.Writer()
    # The process's own writer may still hold an earlier test's rows and meet the patched
    # insert too: this writer's lines get a name of their own, so that only they are counted.
    assert writer.breaker.what == "the audit log's database"
    writer.breaker.what = "this test's audit log's database"
    store = auth_cache._Shared()
    store.local = False
    store.breaker.retry = 0.05
    monkeypatch.setattr(auth_cache, "caches", {store.alias: Cache()})
    database = Prober(breaker.Breaker("the database 'logged'", retry=0.05), connect)
    with caplog.at_level(logging.WARNING, logger="mcp_django"):
        for _ in range(5):
            writer._insert_all([("row",)], retry_now=True)
            assert store.get("version") is None
            assert database.answers() is False
            time.sleep(0.06)
        away[0] = False
        writer._insert_all([("row",)], retry_now=True)
        assert store.get("version") == 1
        assert database.answers() is True
    for what in (writer.breaker.what, f"MCP_DJANGO['SESSION_CACHE'] ({store.alias!r})", "the database 'logged'"):
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(what)]
        assert len(lines) == 2, (what, [r.getMessage() for r in caplog.records])
        assert lines[0].startswith(f"{what} is unavailable (") and "connection refused" in lines[0]
        assert lines[1].startswith(f"{what} answers again (unavailable for ")
    assert not any(r.exc_info for r in caplog.records)
    assert not writer.breaker.open and not store.breaker.open and not database.gate.open
