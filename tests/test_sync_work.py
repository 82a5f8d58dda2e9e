"""Sync work cannot be starved: sync handlers waiting on a client do not hold the worker pool."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from mcp_django.asks import invoke
from tests import legacy_fixtures as fx
from tests.conftest import mcp_settings

pytestmark = pytest.mark.anyio

INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "raw", "version": "1"},
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(autouse=True)
def _reset() -> None:
    fx.reset()


@pytest.fixture
def tokens(live_url: str) -> tuple[str, str]:
    users = get_user_model().objects
    return tuple(Token.objects.create(user=users.create_user(name)).key for name in ("alice", "bob"))  # type: ignore[return-value]


async def _session(client: httpx.AsyncClient, url: str, token: str) -> dict[str, str]:
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    auth = {"authorization": f"Token {token}"}
    response = await client.post(url, json=body, headers={**HEADERS, **auth})
    assert response.status_code == 200
    return {
        **HEADERS,
        **auth,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }


async def _first_message(lines: Any) -> dict[str, Any]:
    async for line in lines:
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    raise AssertionError("the stream ended without a message")


async def _park(client: httpx.AsyncClient, url: str, headers: dict[str, str], request_id: int, tool: str) -> Any:
    """POST a call to a sync tool that asks; return the open response once the ask arrived."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool}}
    response = await client.send(client.build_request("POST", url, json=body, headers=headers), stream=True)
    assert response.status_code == 200
    message = await _first_message(response.aiter_lines())
    assert message.get("method") == "elicitation/create", message
    return response


async def _settled(calls: int, target: str = "legacytest_block") -> None:
    """Every call cut short has ended and written its audit rows (its ask's and its own):
    none may still be on its way when the test database is flushed."""
    from asgiref.sync import sync_to_async
    from django.db import OperationalError, connection

    from mcp_django.models import AuditEvent

    def rows() -> int:
        try:
            return AuditEvent.objects.filter(target=target, kind__in=["ask", "cancelled"]).count()
        except OperationalError:  # SQLite: the table is locked while the writer inserts
            return -1
        finally:
            connection.close()

    deadline = time.monotonic() + 30
    while await sync_to_async(rows, thread_sensitive=False)() < 2 * calls:
        assert time.monotonic() < deadline, "the calls did not end"
        await asyncio.sleep(0.1)


async def _wait_until(predicate: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_pending_sync_asks_of_one_user_do_not_starve_another(live_url: str, tokens: tuple[str, str]) -> None:
    """64 sync handlers of one user wait for answers; another user's sync call still completes."""
    alice, bob = tokens
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    with mcp_settings(ASK_THREADS_PER_PRINCIPAL=64, AUTH_CACHE_SECONDS=0):
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            headers = await _session(client, live_url, alice)
            pending = await asyncio.wait_for(
                asyncio.gather(*(_park(client, live_url, headers, i, "legacytest_block") for i in range(1, 65))), 60
            )
            try:
                assert fx.RUNS["legacytest_block"] == 64
                # Bob's call needs the pool twice: authentication (no cache) and a sync tool.
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {
                        "name": "echo",
                        "arguments": {"text": "still here"},
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {},
                        },
                    },
                }
                modern = {
                    **HEADERS,
                    "authorization": f"Token {bob}",
                    "mcp-protocol-version": "2026-07-28",
                    "mcp-method": "tools/call",
                    "mcp-name": "echo",
                }
                # Generous: a liveness bound, not a benchmark (before the fix: never, until ASK_TIMEOUT).
                answer = await asyncio.wait_for(client.post(live_url, json=body, headers=modern), 20)
                assert answer.status_code == 200
                assert answer.json()["result"]["content"][0]["text"] == "still here"
            finally:
                # Ending the session cancels its calls: every waiting thread is released.
                await client.delete(live_url, headers=headers)
                for response in pending:
                    await response.aclose()
            await _wait_until(lambda: not invoke.pool._parked, 20)
            await _settled(64)


async def test_a_user_beyond_the_bound_of_waiting_calls_gets_an_error(live_url: str, tokens: tuple[str, str]) -> None:
    alice = tokens[0]
    with mcp_settings(ASK_THREADS_PER_PRINCIPAL=2):
        async with httpx.AsyncClient(timeout=20) as client:
            headers = await _session(client, live_url, alice)
            pending = [await _park(client, live_url, headers, i, "legacytest_block") for i in (1, 2)]
            try:
                body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "legacytest_block"}}
                async with client.stream("POST", live_url, json=body, headers=headers) as third:
                    message = await asyncio.wait_for(_first_message(third.aiter_lines()), 10)
                assert message["id"] == 3
                assert message["error"]["code"] == -32005
                assert "ASK_THREADS_PER_PRINCIPAL" in message["error"]["message"]
            finally:
                await client.delete(live_url, headers=headers)
                for response in pending:
                    await response.aclose()
            await _wait_until(lambda: not invoke.pool._parked, 20)
            await _settled(2)


async def test_a_dropped_legacy_client_frees_its_thread(live_url: str, tokens: tuple[str, str]) -> None:
    """The client closes the SSE stream of a call whose sync handler waits on an ask, and never resumes."""
    with mcp_settings(ABANDONED_STREAM_SECONDS=0.5):
        async with httpx.AsyncClient(timeout=20) as client:
            headers = await _session(client, live_url, tokens[0])
            response = await _park(client, live_url, headers, 1, "legacytest_block")
            assert sum(invoke.pool._parked.values()) == 1
            await response.aclose()
            # Before: the thread stayed parked until ASK_TIMEOUT (300 s).
            await _wait_until(lambda: fx.ABORTED.is_set() and not invoke.pool._parked, 10)
            await _settled(1)


async def test_a_stream_resumed_in_time_keeps_its_call(live_url: str, tokens: tuple[str, str]) -> None:
    with mcp_settings(ABANDONED_STREAM_SECONDS=1):
        async with httpx.AsyncClient(timeout=20) as client:
            headers = await _session(client, live_url, tokens[0])
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "legacytest_confirm"}}
            event_id = None
            async with client.stream("POST", live_url, json=body, headers=headers) as first:
                async for line in first.aiter_lines():
                    if line.startswith("id: "):
                        event_id = line[4:]
                    if "elicitation/create" in line:
                        ask = json.loads(line[5:])
                        break
            assert event_id is not None
            # Dropped; resumed at once, and the reader stays longer than the grace period.
            resume = {**headers, "accept": "text/event-stream", "last-event-id": event_id}
            async with client.stream("GET", live_url, headers=resume) as resumed:
                assert resumed.status_code == 200
                await asyncio.sleep(1.5)
                reply = {
                    "jsonrpc": "2.0",
                    "id": ask["id"],
                    "result": {"action": "accept", "content": {"confirm": True}},
                }
                assert (await client.post(live_url, json=reply, headers=headers)).status_code == 202
                final = await asyncio.wait_for(_first_message(resumed.aiter_lines()), 10)
            assert final["id"] == 1 and final["result"]["content"][0]["text"] == "confirmed"


def test_worker_settings_are_validated() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from mcp_django.conf import mcp_settings as conf

    for bad in (0, -1, "8", 2.5, True):
        with mcp_settings(WORKER_THREADS=bad), pytest.raises(ImproperlyConfigured):
            conf.WORKER_THREADS  # noqa: B018
        with mcp_settings(ASK_THREADS_PER_PRINCIPAL=bad), pytest.raises(ImproperlyConfigured):
            conf.ASK_THREADS_PER_PRINCIPAL  # noqa: B018
        with mcp_settings(DB_THREADS=bad), pytest.raises(ImproperlyConfigured):
            conf.DB_THREADS  # noqa: B018
    with mcp_settings(ABANDONED_STREAM_SECONDS=-1), pytest.raises(ImproperlyConfigured):
        conf.ABANDONED_STREAM_SECONDS  # noqa: B018
    assert conf.ABANDONED_STREAM_SECONDS == 30
    assert conf.DB_THREADS == 4
    assert conf.WORKER_THREADS == 32
    assert conf.ASK_THREADS_PER_PRINCIPAL == 16
