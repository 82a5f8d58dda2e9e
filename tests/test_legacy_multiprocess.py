"""Two server processes, one client: the SSE stream on one, the client's reply POSTed to the other.

Both uvicorn processes serve project.asgi with the same PostgreSQL database,
the same Redis (channel layer and cache) and the same key. The reply must
travel through the Channels layer to the process holding the stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests import shared_services

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

# The shared PostgreSQL and Redis: the PostgreSQL/Redis leg of `make test`.
pytestmark = [shared_services.needs_postgres, shared_services.needs_redis]


@pytest.fixture(scope="module")
def two_servers() -> Iterator[tuple[str, str]]:
    # A database and a key prefix of this run's: other runs' servers never meet these.
    with shared_services.demo_instances("multi") as (a, b):
        for url in (a, b):
            _ready(url)
        yield a, b


def _ready(url: str) -> None:
    """Wait until ``url`` opens a legacy session (then closed). An instance's first one joins the
    channel layer's worker group: on a loaded machine that first Redis round trip can take longer
    than CHANNEL_LAYER_TIMEOUT, and the instance answers 503 ("try again later") until its breaker's
    probe finds Redis; what these tests check starts after that."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ready"}},
    }
    deadline = time.monotonic() + 30
    with httpx.Client(timeout=30) as client:
        while True:
            answer = client.post(url, json=init, headers=HEADERS)
            if answer.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        headers = {**HEADERS, "mcp-session-id": _opened(answer), "mcp-protocol-version": "2025-11-25"}
        client.delete(url, headers=headers)


def _opened(response: httpx.Response) -> str:
    """The session an initialize opened; what the server answered instead, when it opened none."""
    assert "mcp-session-id" in response.headers, (response.status_code, response.text)
    return response.headers["mcp-session-id"]


def _events(lines: Iterator[str]) -> Iterator[dict]:
    for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


def test_reply_reaches_the_process_holding_the_stream(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    with httpx.Client(timeout=30) as client:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "t"},
            },
        }
        sid = _opened(client.post(a, json=init, headers=HEADERS))
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        # The session opened on A is known to B (the id is a signed record; its state is in Redis).
        level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}}
        assert client.post(b, json=level, headers=headers).json()["result"] == {}
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "Who are you?"}},
        }
        with client.stream("POST", a, json=call, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = _events(stream.iter_lines())
            request = next(events)
            assert request["method"] == "elicitation/create"
            assert request["params"]["message"] == "Who are you?"
            reply = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}},
            }
            assert client.post(b, json=reply, headers=headers).status_code == 202
            final = next(events)
        assert final["id"] == 3
        assert final["result"]["content"][0]["text"] == (
            'User response: action=accept, content={"username":"ada","email":"ada@example.com"}'
        )
        # Ended on B, ended on A.
        assert client.delete(b, headers=headers).status_code == 200
        assert client.post(a, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=headers).status_code == 404


def test_reply_from_another_session_is_not_accepted(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t"}},
    }
    with httpx.Client(timeout=30) as client:
        sid = _opened(client.post(a, json=init, headers=HEADERS))
        other = _opened(client.post(b, json=init, headers=HEADERS))
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "?"}},
        }
        with client.stream("POST", a, json=call, headers=headers) as stream:
            events = _events(stream.iter_lines())
            request = next(events)
            forged = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"action": "accept", "content": {"username": "mallory", "email": "m@x"}},
            }
            # Accepted for routing (202) but dropped by A: it came under another session.
            assert client.post(b, json=forged, headers={**headers, "mcp-session-id": other}).status_code == 202
            genuine = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}}
            assert client.post(b, json=genuine, headers=headers).status_code == 202
            final = next(events)
        assert final["result"]["content"][0]["text"] == "User response: action=decline, content={}"


def _session(client: httpx.Client, url: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
    }
    sid = _opened(client.post(url, json=init, headers=HEADERS))
    return {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}


def _trigger(client: httpx.Client, url: str, headers: dict[str, str], uri: str) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "test_trigger_resource_update", "arguments": {"uri": uri}},
    }
    response = client.post(url, json=call, headers={**headers, "accept": "application/json"})
    assert response.json()["result"]["content"][0]["text"] == f"updated {uri}"


def test_stream_resumed_on_the_other_process(two_servers: tuple[str, str]) -> None:
    """SEP-1699 across processes: A holds the call, the client's GET + Last-Event-ID reaches B."""
    a, b = two_servers
    with httpx.Client(timeout=30) as client:
        headers = _session(client, a)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_reconnection"}}
        first = client.post(a, json=call, headers=headers)
        ids = [line[4:] for line in first.text.splitlines() if line.startswith("id: ")]
        assert [m["params"]["data"] for m in _events(iter(first.text.splitlines()))] == ["Before disconnect"]
        resume = {**headers, "accept": "text/event-stream", "last-event-id": ids[-1]}
        rest = list(_events(client.get(b, headers=resume).iter_lines()))
        assert [m.get("params", {}).get("data") for m in rest[:-1]] == ["After reconnect"]
        assert rest[-1]["id"] == 2 and rest[-1]["result"]["content"][0]["text"] == "Reconnection test completed"
        # The events still carry A's ids: resuming again, from the first event, also works from B.
        again = list(_events(client.get(b, headers={**resume, "last-event-id": ids[0]}).iter_lines()))
        assert [m.get("params", {}).get("data") for m in again[:-1]] == ["Before disconnect", "After reconnect"]
        # Another session, or a stream A does not have: 404, answered by A through B.
        other = {**_session(client, b), "accept": "text/event-stream", "last-event-id": ids[-1]}
        assert client.get(b, headers=other).status_code == 404
        channel = ids[-1].partition("@")[2]
        unknown = {**resume, "last-event-id": f"999999.1@{channel}"}
        assert client.get(b, headers=unknown).status_code == 404


def test_resource_update_announced_on_one_process_reaches_the_other(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    with httpx.Client(timeout=30) as client:
        headers = _session(client, a)
        # The subscription is taken by A, the GET stream is held by B, the update announced on A.
        with client.stream("GET", b, headers={**headers, "accept": "text/event-stream"}) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith("retry: ")
            subscribe = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "test://w"}}
            assert client.post(a, json=subscribe, headers=headers).json()["result"] == {}
            _trigger(client, a, headers, "test://not-subscribed")
            _trigger(client, a, headers, "test://w")
            assert next(_events(lines)) == {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "test://w"},
            }
        # 2026-07-28: a subscriptions/listen stream on B hears an update announced on A.
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        }
        listen = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "subscriptions/listen",
            "params": {"_meta": meta, "notifications": {"resourceSubscriptions": ["test://w"]}},
        }
        modern = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}
        with client.stream("POST", b, json=listen, headers=modern) as stream:
            events = _events(stream.iter_lines())
            assert next(events)["params"]["notifications"] == {"resourceSubscriptions": ["test://w"]}
            _trigger(client, a, headers, "test://w")
            update = next(events)
            assert update["method"] == "notifications/resources/updated"
            assert update["params"] == {"uri": "test://w", "_meta": {"io.modelcontextprotocol/subscriptionId": 5}}


@pytest.mark.anyio
async def test_sdk_legacy_client_on_one_process_hears_the_other(two_servers: tuple[str, str]) -> None:
    import anyio
    import mcp.types as types

    from tests.conftest import sdk_client

    a, b = two_servers
    heard: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(message.params.uri)

    async with sdk_client(b, mode="legacy", message_handler=on_message) as client:
        with pytest.warns(Warning):  # the SDK marks resources/subscribe deprecated
            await client.subscribe_resource("test://sdk")
        async with httpx.AsyncClient(timeout=30) as other:
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "test_trigger_resource_update", "arguments": {"uri": "test://sdk"}},
            }
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
            sid = _opened(
                await other.post(
                    a, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=HEADERS
                )
            )
            headers = {
                **HEADERS,
                "accept": "application/json",
                "mcp-session-id": sid,
                "mcp-protocol-version": "2025-11-25",
            }
            # The SDK opens its GET stream (on B) by itself after the handshake: announce on A until it hears.
            for _ in range(30):
                assert (await other.post(a, json=call, headers=headers)).status_code == 200
                with anyio.move_on_after(0.5):
                    while not heard:
                        await anyio.sleep(0.02)
                if heard:
                    break
    assert heard and set(heard) == {"test://sdk"}


def test_resumed_stream_on_the_other_process_gets_events_without_delay(two_servers: tuple[str, str]) -> None:
    """Events the holder pushes while it is forwarding earlier ones reach the follower at once,
    not at the next keepalive (a lost wake-up: 15 s)."""
    a, b = two_servers
    with httpx.Client(timeout=30) as client:
        headers = _session(client, a)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "test_event_burst", "arguments": {"count": 6, "delay": 1.0, "then": 12.0}},
        }
        first = client.post(a, json=call, headers=headers)
        ids = [line[4:] for line in first.text.splitlines() if line.startswith("id: ")]
        resume = {**headers, "accept": "text/event-stream", "last-event-id": ids[-1]}
        started = time.monotonic()
        heard: list[str] = []
        with client.stream("GET", b, headers=resume) as stream:
            for message in _events(stream.iter_lines()):
                heard.append(message["params"]["data"])
                if len(heard) == 6:
                    break
        assert heard == [f"burst {n}" for n in range(6)]
        # The burst starts a second after the call; all of it is heard well before the result (12 s later).
        assert time.monotonic() - started < 4
