"""Limits on Redis: the cache away (a redis-server of the test's own, stopped and frozen), and
two instances sharing one Redis, called by the official SDK (docs/limits.md).

The shared Redis only holds the two instances' keys, under a prefix of this run's.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from tests import shared_services
from tests.conftest import Raw, mcp_settings
from tests.run_names import redis_prefix
from tests.test_faults import Redis

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_redis() -> Iterator[Redis]:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("needs redis-server")
        pytest.skip("needs redis-server")
    redis = Redis(Path(tempfile.mkdtemp(prefix="mcp-limits-")))
    redis.start()
    cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": redis.url,
        "KEY_PREFIX": redis_prefix("limits"),
        "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 1},
    }
    try:
        with override_settings(CACHES={**settings.CACHES, "limits": cache}):
            yield redis
    finally:
        if redis.process is not None:
            redis.resume()
        redis.stop()
        shutil.rmtree(redis.directory, ignore_errors=True)


def _timed(raw: Raw) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = raw.call("greet", {"name": "x"})
    return response, time.monotonic() - started


@pytest.mark.parametrize("choice", ["open", "closed"])
@pytest.mark.parametrize("outage", ["stopped", "frozen"])
def test_the_cache_away_is_answered_within_a_second(
    raw_inprocess: Raw, own_redis: Redis, choice: str, outage: str
) -> None:
    from mcp_django.limits import counter

    given = {"CACHE": "limits", "RATES": {"user": "2/min"}, "WHEN_CACHE_DOWN": choice}
    with mcp_settings(LIMITS=given):
        assert raw_inprocess.call("greet", {"name": "x"}).status_code == 200  # counted in Redis
        if outage == "stopped":
            own_redis.stop()
        else:
            own_redis.pause()
        try:
            for _ in range(4):  # beyond the rate: nothing counts while the cache is away
                response, took = _timed(raw_inprocess)
                assert took < 1.0, took
                if choice == "open":
                    assert response.status_code == 200 and "result" in response.json()
                else:
                    assert response.status_code == 503
                    assert "limits cache is unavailable" in response.json()["error"]["message"]
            assert counter.breaker.open
        finally:
            if outage == "frozen":
                own_redis.resume()
        if outage == "frozen":
            # Back: the probe closes the breaker, and counting resumes at once.
            deadline = time.monotonic() + 5
            while counter.breaker.open and time.monotonic() < deadline:
                raw_inprocess.call("greet", {"name": "x"})
                time.sleep(0.05)
            assert not counter.breaker.open
    counter.breaker.reset()


# -- two instances, one Redis ----------------------------------------------------------------


@pytest.fixture(scope="module")
def two_limited_servers() -> Iterator[tuple[str, str]]:
    with shared_services.demo_instances("limits_multi", MCP_LIMITS=json.dumps({"RATES": {"user": "4/min"}})) as (a, b):
        yield a, b


@shared_services.needs_postgres
@shared_services.needs_redis
@pytest.mark.anyio
async def test_two_instances_share_the_count(two_limited_servers: tuple[str, str]) -> None:
    from mcp.shared.exceptions import MCPError as SDKError

    from tests.conftest import sdk_client

    a, b = two_limited_servers
    # The window must not turn while the test counts: start in the first part of a minute.
    while time.time() % 60 > 40:
        time.sleep(1)
    async with sdk_client(a) as on_a, sdk_client(b) as on_b:
        for client in (on_a, on_b, on_a, on_b):  # four calls of one (anonymous) caller, two per instance
            result: Any = await client.call_tool("greet", {"name": "x"})
            assert result.content[0].text == "Hello, x!"
        for client in (on_a, on_b):
            with pytest.raises(SDKError) as raised:
                await client.call_tool("greet", {"name": "x"})
            assert raised.value.error.code == -32005
            data = raised.value.error.data
            assert data["limit"] == "user" and 1 <= data["retryAfter"] <= 60
    async with httpx.AsyncClient(timeout=10) as http:
        from tests.conftest import meta

        params = {"name": "greet", "arguments": {"name": "x"}, "_meta": meta()}
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": params["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "mcp-method": "tools/call",
            "mcp-name": "greet",
        }
        body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
        response = await http.post(b, json=body, headers=headers)
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) == response.json()["error"]["data"]["retryAfter"]
