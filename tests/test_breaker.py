"""The circuit breaker of the channel layer and the session cache, without Redis:
a service found away is refused at once and said once; a probe brings it back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

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
