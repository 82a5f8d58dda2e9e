"""Malformed messages end in a JSON-RPC error with the right HTTP status, never a 500.

Each case here was a 500 (or a stream that died) before the parsing layer bounded
nesting and answered invalid ids with ``id: null``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest

from tests.conftest import MODERN, mcp_settings, meta, sse_messages
from tests.legacy_fixtures import ws_client

pytestmark = pytest.mark.django_db(transaction=True)

LEGACY = "2025-11-25"


def deep(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def post(url: str, body: Any, **headers: str) -> httpx.Response:
    raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    return httpx.post(url, content=raw, headers=sent, timeout=30)


def answer(r: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response, whether it came as JSON or as the last event of a stream."""
    if r.headers["content-type"].startswith("text/event-stream"):
        return sse_messages(r)[-1]
    return r.json()


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def initialize(url: str, capabilities: Any = None) -> httpx.Response:
    params = {
        "protocolVersion": LEGACY,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})


def session(url: str) -> dict[str, str]:
    r = initialize(url)
    assert r.status_code == 200, r.text
    return {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}


@pytest.mark.parametrize("anonymous", [True, False])
def test_deep_id_is_answered_with_null_id(live_url: str, anonymous: bool) -> None:
    # About 600 bytes, no credentials: it used to be a 500 and a traceback.
    body = {"jsonrpc": "2.0", "id": deep(300), "method": "tools/list", "params": {"_meta": meta()}}
    with mcp_settings(ALLOW_ANONYMOUS=anonymous):
        r = post(live_url, body, **modern_headers("tools/list"))
    assert r.status_code == 400
    assert r.json()["id"] is None and r.json()["error"]["code"] == -32600


@pytest.mark.parametrize("bad_id", [[1], {"a": 1}, 1.5, True, None])
def test_invalid_ids_are_answered_with_null_id(live_url: str, bad_id: Any) -> None:
    body = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list", "params": {"_meta": meta()}}
    r = post(live_url, body, **modern_headers("tools/list"))
    assert r.status_code == 400
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": r.json()["error"]}
    assert r.json()["error"]["code"] == -32600


def test_invalid_legacy_id_is_answered_with_null_id(live_url: str) -> None:
    headers = session(live_url)
    r = post(live_url, {"jsonrpc": "2.0", "id": {"x": [1]}, "method": "tools/list"}, **headers)
    assert r.status_code == 400 and r.json()["id"] is None


def test_deep_progress_token(live_url: str) -> None:
    params = {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta(progressToken=deep(300))}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    r = post(live_url, body, **modern_headers("tools/call", "test_tool_with_progress"))
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600


def test_odd_progress_token_is_ignored(live_url: str) -> None:
    # Not a string or an integer: the call runs, without progress notifications.
    params = {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta(progressToken={"a": deep(40)})}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    r = post(live_url, body, **modern_headers("tools/call", "test_tool_with_progress"))
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert not r.json()["result"].get("isError")


def test_deep_capabilities_in_legacy_initialize(live_url: str) -> None:
    r = initialize(live_url, {"experimental": deep(300, {})})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600 and r.json()["id"] is None
    # Deep but within the bound: a session opens and its id works.
    r = initialize(live_url, {"experimental": {"x": deep(50, {})}})
    assert r.status_code == 200
    headers = {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
    assert post(live_url, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, **headers).json()["result"] == {}


@pytest.mark.parametrize(
    "params",
    [
        {"ref": {"type": "ref/prompt", "name": ["x"]}, "argument": {"name": "a", "value": "b"}},
        {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": {"n": 1}, "value": "b"}},
        {"ref": {"type": "ref/resource", "uri": {"u": 1}}, "argument": {"name": "a", "value": "b"}},
        {"ref": {"type": "ref/resource", "uri": ["file:///{path}"]}, "argument": {"name": "a", "value": "b"}},
        {"ref": {"type": "ref/resource", "uri": "file:///x"}, "argument": {"name": "a", "value": 3}},
        {"ref": {"type": ["ref/prompt"]}, "argument": {"name": "a", "value": "b"}},
    ],
)
@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_odd_completion_params(live_url: str, params: dict[str, Any], era: str) -> None:
    if era == "modern":
        body = {"jsonrpc": "2.0", "id": 3, "method": "completion/complete", "params": {**params, "_meta": meta()}}
        r = post(live_url, body, **modern_headers("completion/complete"))
        assert r.status_code == 400
    else:
        body = {"jsonrpc": "2.0", "id": 3, "method": "completion/complete", "params": params}
        r = post(live_url, body, **session(live_url))
        assert r.status_code == 200
    assert answer(r)["id"] == 3 and answer(r)["error"]["code"] == -32602


def test_deep_websocket_frame(live_url: str) -> None:
    async def run() -> None:
        async with ws_client(live_url) as client:
            await client.socket.send(json.dumps({"jsonrpc": "2.0", "id": deep(300), "method": "ping"}))
            await client.socket.send(json.dumps({"jsonrpc": "2.0", "id": [1], "method": "ping"}))
            params = {"protocolVersion": LEGACY, "capabilities": deep(300, {})}
            await client.socket.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": params}))
            async with asyncio.timeout(30):
                while len(client.stray) < 3:
                    await asyncio.sleep(0.02)
            assert [m["id"] for m in client.stray] == [None, None, None]
            assert all(m["error"]["code"] == -32600 for m in client.stray)
            assert (await client.initialize({}))["result"]["protocolVersion"] == LEGACY
            assert (await client.request("ping"))["result"] == {}

    asyncio.run(run())


# -- reading the body: bounded in size and in time ----------------------------------------


def raw_exchange(
    url: str, head: str, chunks: list[bytes], pause: float = 0.0, wait: float = 5.0
) -> tuple[bytes, float]:
    """Send a hand-made request (headers, then chunks) and read the answer: (bytes, seconds)."""
    import socket
    import time
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    started = time.monotonic()
    with socket.create_connection((parts.hostname, parts.port), timeout=wait) as sock:
        sock.sendall(head.encode())
        received = b""
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except OSError:
                break  # the server closed the connection: what it said is read below
            time.sleep(pause)
        try:
            while b"\r\n\r\n" not in received or not _complete(received):
                data = sock.recv(65536)
                if not data:
                    break
                received += data
        except TimeoutError:
            pass
    return received, time.monotonic() - started


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


def _head(length: str | None, *, chunked: bool = False) -> str:
    lines = [
        "POST /mcp HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
    ]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return "\r\n".join(lines) + "\r\n\r\n"


def _status_and_error(received: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def test_declared_oversized_body_is_refused_before_it_is_read(live_url: str) -> None:
    # Nothing of the body is sent: the answer comes from Content-Length alone.
    received, took = raw_exchange(live_url, _head(str(64 * 1024 * 1024)), [])
    status, body = _status_and_error(received)
    assert status == 413 and body["error"]["code"] == -32600 and body["id"] is None
    assert took < 4


def test_reading_stops_at_the_limit(live_url: str) -> None:
    # A chunked body that never ends: the server answers once the limit is passed.
    chunk = b"400\r\n" + b" " * 1024 + b"\r\n"
    with mcp_settings(MAX_REQUEST_BYTES=8 * 1024):
        received, took = raw_exchange(live_url, _head(None, chunked=True), [chunk] * 12)
    status, body = _status_and_error(received)
    assert status == 413 and body["error"]["code"] == -32600
    assert took < 4


def test_a_trickling_client_is_answered_408_and_closed(live_url: str) -> None:
    with mcp_settings(REQUEST_READ_TIMEOUT=1):
        received, took = raw_exchange(live_url, _head("200"), [b" "] * 40, pause=0.1, wait=8)
    status, body = _status_and_error(received)
    assert status == 408 and body["error"]["code"] == -32600
    assert b"connection: close" in received.lower()
    assert took < 4


# -- replies addressed to channels that are not a worker's ---------------------------------


def test_reply_to_a_made_up_channel_is_refused_and_not_kept(live_url: str, caplog: pytest.LogCaptureFixture) -> None:
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    headers = session(live_url)
    big = "x" * (512 * 1024)
    made_up = "mcp-django.specific.made-up!abc"
    ids = [f"mcp-django:1:{made_up}", "mcp-django:2:字ßé", "mcp-django:3:" + "a" * 300]
    with caplog.at_level(logging.WARNING):
        for reply_id in ids:
            r = post(live_url, {"jsonrpc": "2.0", "id": reply_id, "result": {"pad": big}}, **headers)
            if reply_id != ids[0] or isinstance(get_channel_layer(), InMemoryChannelLayer):
                assert r.status_code == 400 and r.json()["error"]["code"] == -32600, r.text
    # No traceback per request for a client's made-up id, and one line at most for all of them.
    assert not [rec for rec in caplog.records if rec.exc_info], caplog.text
    assert sum("refused a reply addressed to" in rec.getMessage() for rec in caplog.records) <= 1
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):
        # Nothing was queued for a channel nobody reads: the in-memory layer would keep it for good.
        assert made_up not in layer.channels


# -- the last resort, and the Django view ---------------------------------------------------


def test_a_bug_in_the_endpoint_is_still_a_jsonrpc_answer(live_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_django.transports.http import HttpEndpoint

    async def broken(self: Any, req: Any, disconnected: Any = None) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(HttpEndpoint, "handle", broken)
    r = post(live_url, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 500 and r.headers["content-type"] == "application/json"
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "Internal error"}}


def test_legacy_message_on_the_django_view_answers_a_bad_id_with_null() -> None:
    from django.test import Client

    body = json.dumps({"jsonrpc": "2.0", "id": deep(40), "method": "initialize", "params": {}})
    r = Client().post("/mcp", body, content_type="application/json", HTTP_ACCEPT="application/json")
    assert r.status_code >= 400 and r.status_code < 500
    assert r.json()["id"] is None
