"""Resource updates (Registry.resource_updated) reaching their subscribers.

Legacy sessions subscribe with ``resources/subscribe`` and hear on their GET
stream (HTTP) or socket (websocket); 2026-07-28 clients list URIs in
``subscriptions/listen``'s ``resourceSubscriptions``. The two-process case is in
tests/test_legacy_multiprocess.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest

from tests import legacy_fixtures as fx
from tests.conftest import MODERN, Raw, meta, sdk_client, sse_messages
from tests.legacy_fixtures import ws_client

WATCHED = "test://watched-resource"
OTHER = "test://template/7/data"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "subs", "version": "1"}}


@pytest.fixture(autouse=True)
def _reset() -> None:
    fx.reset()


def legacy_session(client: httpx.Client, url: str) -> dict[str, str]:
    init = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, headers=HEADERS)
    headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def rpc(client: httpx.Client, url: str, headers: dict[str, str], method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = client.post(url, json={"jsonrpc": "2.0", "id": 9, "method": method, "params": params}, headers=headers)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        return sse_messages(response)[-1]
    return response.json()


def trigger(
    client: httpx.Client, url: str, headers: dict[str, str], uri: str, tool: str = "test_trigger_resource_update"
) -> None:
    reply = rpc(client, url, headers, "tools/call", {"name": tool, "arguments": {"uri": uri}})
    assert not reply["result"].get("isError"), reply


def data_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


@contextlib.contextmanager
def get_stream(client: httpx.Client, url: str, headers: dict[str, str]) -> Iterator[Iterator[str]]:
    """The session's standalone GET stream, once the server has it (its priming event read)."""
    with client.stream("GET", url, headers={**headers, "accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        assert next(lines).startswith("retry: ")
        while next(lines) != "":
            pass
        yield lines


def test_legacy_get_stream_carries_subscribed_updates(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        headers = legacy_session(client, live_url)
        with get_stream(client, live_url, headers) as lines:
            events = data_events(lines)
            for uri in (WATCHED, OTHER):
                assert rpc(client, live_url, headers, "resources/subscribe", {"uri": uri})["result"] == {}
            assert rpc(client, live_url, headers, "resources/unsubscribe", {"uri": OTHER})["result"] == {}
            # Neither of these is the session's: the first event must be the third.
            trigger(client, live_url, headers, OTHER)
            trigger(client, live_url, headers, "test://never-subscribed")
            # The sync API, fire-and-forget from a handler's worker thread.
            trigger(client, live_url, headers, WATCHED, tool="legacytest_touch")
            assert next(events) == {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": WATCHED},
            }
            # A second GET stream of the session supersedes the first, which ends.
            with get_stream(client, live_url, headers) as second:
                assert list(events) == []
                trigger(client, live_url, headers, WATCHED)
                assert next(data_events(second))["params"] == {"uri": WATCHED}
                # DELETE ends the session and its stream.
                assert client.delete(live_url, headers=headers).status_code == 200
                assert list(data_events(second)) == []


def test_subscription_made_before_the_stream_opens_is_kept(live_url: str) -> None:
    """Subscriptions live in the session's shared state, not in the request that made them."""
    with httpx.Client(timeout=10) as client:
        headers = legacy_session(client, live_url)
        rpc(client, live_url, headers, "resources/subscribe", {"uri": WATCHED})
        with get_stream(client, live_url, headers) as lines:
            trigger(client, live_url, headers, WATCHED)
            assert next(data_events(lines))["params"] == {"uri": WATCHED}
        # Another session that did not subscribe hears nothing: its first event is its own.
        other = legacy_session(client, live_url)
        with get_stream(client, live_url, other) as lines:
            trigger(client, live_url, other, WATCHED)
            rpc(client, live_url, other, "resources/subscribe", {"uri": OTHER})
            trigger(client, live_url, other, OTHER)
            assert next(data_events(lines))["params"] == {"uri": OTHER}


def test_get_without_a_session_is_still_405(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        assert client.get(live_url, headers={"accept": "text/event-stream"}).status_code == 405
        unknown = {"accept": "text/event-stream", "mcp-session-id": "s1.nope.nope.nope"}
        assert client.get(live_url, headers=unknown).status_code == 404


@pytest.mark.anyio
async def test_sdk_legacy_client_hears_updates(live_url: str) -> None:
    heard: list[types.ResourceUpdatedNotification] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(message)
            arrived.set()

    async with sdk_client(live_url, mode="legacy", message_handler=on_message) as client:
        with pytest.warns(Warning):  # the SDK marks resources/subscribe deprecated (gone in 2026-07-28)
            await client.subscribe_resource(WATCHED)
        # The SDK opens its GET stream on its own after the handshake; until the
        # server has it, an update has nowhere to go. Announce until one arrives.
        for _ in range(30):
            await client.call_tool("test_trigger_resource_update", {"uri": WATCHED})
            with anyio.move_on_after(0.5):
                await arrived.wait()
            if heard:
                break
    assert heard and {n.params.uri for n in heard} == {WATCHED}


@pytest.mark.anyio
async def test_websocket_session_hears_updates(live_url: str) -> None:
    async with ws_client(live_url) as client:
        await client.initialize({})
        for uri in (WATCHED, OTHER):
            assert (await client.request("resources/subscribe", {"uri": uri}))["result"] == {}
        assert (await client.request("resources/unsubscribe", {"uri": OTHER}))["result"] == {}
        for uri in (OTHER, WATCHED):
            reply = await client.request(
                "tools/call", {"name": "test_trigger_resource_update", "arguments": {"uri": uri}}
            )
            assert "result" in reply, reply
        async with asyncio.timeout(10):
            while not client.notifications:
                await asyncio.sleep(0.01)
        assert client.notifications == [
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": WATCHED}}
        ]


def test_listen_honours_resource_subscriptions(raw: Raw) -> None:
    discovered = raw.post("server/discover").json()["result"]
    assert discovered["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    params = {"_meta": meta(), "notifications": {"resourceSubscriptions": [WATCHED, WATCHED]}}
    body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params}
    with raw.client.stream("POST", raw.url, json=body, headers=raw.headers("subscriptions/listen", params)) as stream:
        events = data_events(stream.iter_lines())
        ack = next(events)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"resourceSubscriptions": [WATCHED]}
        assert raw.call("test_trigger_resource_update", {"uri": OTHER}).status_code == 200
        assert raw.call("test_trigger_resource_update", {"uri": WATCHED}).status_code == 200
        assert next(events) == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": WATCHED, "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}},
        }


def test_listen_refuses_malformed_resource_subscriptions(raw: Raw) -> None:
    params = {"_meta": meta(), "notifications": {"resourceSubscriptions": WATCHED}}
    response = raw.post("subscriptions/listen", params)
    messages = (
        sse_messages(response)
        if response.headers["content-type"].startswith("text/event-stream")
        else [response.json()]
    )
    assert messages[-1]["error"]["code"] == -32602


@pytest.mark.anyio
async def test_sdk_modern_listen_hears_updates(live_url: str) -> None:
    async with sdk_client(live_url, mode=MODERN) as client:
        async with client.listen(resource_subscriptions=[WATCHED]) as sub:
            assert sub.honored.resource_subscriptions == [WATCHED]
            await client.call_tool("test_trigger_resource_update", {"uri": WATCHED})
            with anyio.fail_after(10):
                event = await anext(sub)
    assert event.uri == WATCHED
