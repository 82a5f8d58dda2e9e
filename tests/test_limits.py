"""Bounded by settings: subscriptions per session, quiet streams kept alive, idle streams closed."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from tests import legacy_fixtures as fx
from tests.conftest import Raw, mcp_settings, meta
from tests.legacy_fixtures import ws_client
from tests.test_subscriptions import legacy_session, rpc

pytestmark = pytest.mark.django_db(transaction=True)

URIS = [f"test://template/{n}/data" for n in range(5)]


@pytest.fixture(autouse=True)
def _reset() -> None:
    fx.reset()


def subscribe(client: httpx.Client, url: str, headers: dict[str, str], uri: str, on: bool = True) -> dict[str, Any]:
    method = "resources/subscribe" if on else "resources/unsubscribe"
    return rpc(client, url, headers, method, {"uri": uri})


def test_legacy_subscriptions_are_capped_per_session(live_url: str) -> None:
    with mcp_settings(MAX_SUBSCRIPTIONS=3), httpx.Client(timeout=10) as client:
        headers = legacy_session(client, live_url)
        for uri in URIS[:3]:
            assert subscribe(client, live_url, headers, uri)["result"] == {}
        # The same URI again counts once.
        assert subscribe(client, live_url, headers, URIS[0])["result"] == {}
        refused = subscribe(client, live_url, headers, URIS[3])
        assert refused["error"]["code"] == -32602 and refused["error"]["data"] == {"maxSubscriptions": 3}
        # Unsubscribing frees a place.
        assert subscribe(client, live_url, headers, URIS[0], on=False)["result"] == {}
        assert subscribe(client, live_url, headers, URIS[3])["result"] == {}
        assert subscribe(client, live_url, headers, URIS[4])["error"]["code"] == -32602
        # Another session has its own count.
        other = legacy_session(client, live_url)
        assert subscribe(client, live_url, other, URIS[4])["result"] == {}


def test_subscription_keys_expire_with_the_session(live_url: str) -> None:
    from django.core.cache import caches

    from mcp_django.conf import mcp_settings as settings
    from mcp_django.protocol import legacy

    with mcp_settings(SESSION_LIFETIME=120), httpx.Client(timeout=10) as client:
        headers = legacy_session(client, live_url)
        assert subscribe(client, live_url, headers, URIS[0])["result"] == {}
        record = legacy.open_session(headers["mcp-session-id"])
        assert record is not None
        cache = caches[settings.SESSION_CACHE]
        keys = [legacy._uri_key(record.sid, URIS[0]), legacy._key(record.sid, "subs")]
        for key in keys:
            assert cache.get(key) is not None, key
            assert 0 < _ttl(cache, key) <= 121, key


def _ttl(cache: Any, key: str) -> float:
    full = cache.make_and_validate_key(key)
    if hasattr(cache, "_expire_info"):  # local memory
        return cache._expire_info[full] - time.time()
    return cache._cache.get_client(full).ttl(full)  # Redis


def test_websocket_subscriptions_are_capped(live_url: str) -> None:
    async def run() -> None:
        async with ws_client(live_url) as ws:
            await ws.initialize({})
            for uri in URIS[:2]:
                assert (await ws.request("resources/subscribe", {"uri": uri}))["result"] == {}
            refused = await ws.request("resources/subscribe", {"uri": URIS[2]})
            assert refused["error"]["code"] == -32602
            assert (await ws.request("resources/unsubscribe", {"uri": URIS[0]}))["result"] == {}
            assert (await ws.request("resources/subscribe", {"uri": URIS[2]}))["result"] == {}

    with mcp_settings(MAX_SUBSCRIPTIONS=2):
        asyncio.run(run())


def test_listen_subscriptions_are_capped(raw: Raw) -> None:
    params = {"_meta": meta(), "notifications": {"resourceSubscriptions": URIS[:3]}}
    with mcp_settings(MAX_SUBSCRIPTIONS=2):
        r = raw.post("subscriptions/listen", params, headers={"accept": "application/json, text/event-stream"})
    body = r.json() if r.headers["content-type"].startswith("application/json") else None
    assert body is not None and body["error"]["code"] == -32602, r.text
    assert r.status_code == 400


# -- quiet and idle streams ----------------------------------------------------------------


def read_for(response: httpx.Response, seconds: float) -> tuple[list[str], bool]:
    """Lines read within ``seconds``, and whether the server ended the stream meanwhile."""
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    iterator = response.iter_lines()
    while time.monotonic() < deadline:
        try:
            lines.append(next(iterator))
        except (StopIteration, httpx.ReadTimeout):
            return lines, True
    return lines, False


def test_get_stream_sends_keepalives(live_url: str) -> None:
    with (
        mcp_settings(SSE_KEEPALIVE=0.2),
        httpx.Client(timeout=httpx.Timeout(10, read=5)) as client,
    ):
        headers = legacy_session(client, live_url)
        with client.stream("GET", live_url, headers={**headers, "accept": "text/event-stream"}) as response:
            assert response.status_code == 200
            lines, ended = read_for(response, 1.2)
    assert not ended
    assert lines.count(": keepalive") >= 3, lines


def test_idle_get_stream_is_closed(live_url: str) -> None:
    with (
        mcp_settings(SSE_KEEPALIVE=0.2, STREAM_IDLE_TIMEOUT=0.7),
        httpx.Client(timeout=httpx.Timeout(10, read=5)) as client,
    ):
        headers = legacy_session(client, live_url)
        started = time.monotonic()
        with client.stream("GET", live_url, headers={**headers, "accept": "text/event-stream"}) as response:
            _lines, ended = read_for(response, 4)
    assert ended and time.monotonic() - started < 3


def test_a_call_waiting_on_an_ask_sends_keepalives(live_url: str) -> None:
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "keepalive", "version": "1"},
    }
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    with (
        mcp_settings(SSE_KEEPALIVE=0.2, ASK_TIMEOUT=1.5),
        httpx.Client(timeout=httpx.Timeout(10, read=5)) as client,
    ):
        r = client.post(
            live_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=base
        )
        headers = {**base, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "legacytest_elicit"}}
        with client.stream("POST", live_url, json=call, headers=headers) as response:
            lines, _ended = read_for(response, 1.0)
    assert any('"elicitation/create"' in line for line in lines), lines
    assert lines.count(": keepalive") >= 2, lines
