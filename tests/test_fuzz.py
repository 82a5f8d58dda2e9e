"""Fuzzing the endpoint: thousands of hostile messages (tests/fuzz.py), both eras, HTTP and websockets.

Every answer must be a JSON-RPC answer with a status below 500 (an invalid id
answered with ``id: null``), nothing may be logged as an error or with a
traceback, and afterwards the server must still serve well-formed calls.

``MCP_FUZZ_MESSAGES`` sets how many HTTP messages are sent (a third as many
websocket frames go too); ``make test`` (its SQLite leg) and ``make fuzz`` send 12,000. ``MCP_FUZZ_SEED``
replays a run.

The messages go in shards of at most ``SHARD_MESSAGES``, each from a seed of its own: under
pytest-xdist each shard is a work unit of its own, handed out first (tests/conftest.py
``SPREAD_MODULES``), so 12,000 messages take about a quarter of the time on four workers
instead of being the tail of the leg.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import MODERN, mcp_settings, meta, sse_messages
from tests.fuzz import SLOW_TOOLS, Fuzzer, Message
from tests.legacy_fixtures import ws_client

pytestmark = pytest.mark.django_db(transaction=True)

COUNT = int(os.environ.get("MCP_FUZZ_MESSAGES", "2400"))
SEED = int(os.environ.get("MCP_FUZZ_SEED", "20261130"))
SHARD_MESSAGES = 3000
SHARDS = max(1, -(-COUNT // SHARD_MESSAGES))


def share(total: int, shard: int) -> int:
    """Shard ``shard``'s part of ``total``: the shards' parts add up to it."""
    return total // SHARDS + (shard < total % SHARDS)


LEGACY = "2025-11-25"
# How long one streamed answer is read before the fuzzer moves on (a standalone GET stream never ends).
STREAM_SECONDS = 1.0


class Problems(logging.Handler):
    """Every record at ERROR or above, or carrying a traceback, from any logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)

    def report(self) -> str:
        return "\n".join(f"{r.name}: {r.getMessage()}\n{self.format(r)}"[:3000] for r in self.records[:5])


@contextlib.contextmanager
def watched() -> Iterator[Problems]:
    """Problems logged anywhere while the block runs (the fixture below; other fuzzing modules' too)."""
    handler = Problems()
    handler.setFormatter(logging.Formatter("%(message)s"))
    # uvicorn's loggers do not propagate to the root: watch them where they write.
    names = ["", "uvicorn", "uvicorn.error", "mcp_django", "django", "asyncio"]
    loggers = [logging.getLogger(n) for n in names]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


@pytest.fixture
def problems() -> Iterator[Problems]:
    with watched() as handler:
        yield handler


def catalogue() -> dict[str, Any]:
    from mcp_django.registry import mcp

    # The project's handlers, not those other test modules register (some fail on purpose).
    def ours(handler: Any) -> bool:
        return not handler.source.startswith("tests.")

    tools = sorted(n for n, t in mcp.tools.items() if n not in SLOW_TOOLS and ours(t))
    return {
        "tools": tools,
        "schemas": {n: mcp.tools[n].input_schema for n in tools},
        "prompts": sorted(n for n, p in mcp.prompts.items() if ours(p)),
        "resources": [*sorted(mcp.resources), "test://template/7/data"],
        "templates": sorted(mcp.templates),
        # The arguments each prompt and template completes (a completer may query).
        "completions": {
            name: sorted(handler.completions)
            for name, handler in [*mcp.prompts.items(), *mcp.templates.items()]
            if ours(handler) and handler.completions
        },
    }


def valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def check_payload(payload: Any, message: Message) -> None:
    replies = payload if isinstance(payload, list) else [payload]
    for reply in replies:
        assert isinstance(reply, dict) and reply.get("jsonrpc") == "2.0", (reply, message.describe())
        if "error" in reply:
            assert isinstance(reply["error"].get("code"), int), (reply, message.describe())
            assert reply.get("id") is None or valid_id(reply["id"]), (reply, message.describe())


def send(client: httpx.Client, url: str, message: Message) -> int:
    """Send one message, read its answer (briefly, for a stream) and check its shape; the status."""
    with client.stream(message.http_method, url, content=message.body, headers=message.headers) as response:
        status = response.status_code
        assert status < 500, f"{status} for {message.describe()}"
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            deadline = time.monotonic() + STREAM_SECONDS
            data = b""
            try:
                for chunk in response.iter_raw():
                    data += chunk
                    if b'"result"' in chunk or b'"error"' in chunk or b"acknowledged" in chunk:
                        break
                    if time.monotonic() > deadline:
                        break
            except httpx.ReadTimeout:
                pass
            for line in data.decode().splitlines():
                if line.startswith("data:") and line[5:].strip():
                    check_payload(json.loads(line[5:]), message)
        else:
            body = response.read()
            if body and status == 405 and "text/html" in message.headers.get("accept", ""):
                # The page for a browser (transports/http.py), which asked for HTML.
                assert kind.startswith("text/html") and b"MCP endpoint" in body, f"{kind} for {message.describe()}"
            elif body:
                assert kind.startswith("application/json"), f"{status} {kind} for {message.describe()}"
                check_payload(json.loads(body), message)
            else:
                assert status in (200, 202, 204, 405), f"{status} without a body for {message.describe()}"
    return status


def legacy_session(client: httpx.Client, url: str) -> dict[str, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
    }
    r = client.post(url, json=body, headers={"accept": "application/json, text/event-stream"})
    assert r.status_code == 200, r.text
    return {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}


def still_serving(url: str) -> None:
    """Well-formed calls of both eras, over HTTP and a websocket, after the storm."""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    params = {"name": "echo", "arguments": {"text": "still here"}, "_meta": meta()}
    with httpx.Client(timeout=30) as client:
        r = client.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers
        )
        assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "still here", r.text
        session = legacy_session(client, url)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "ok"}},
        }
        r = client.post(url, json=call, headers={"accept": "application/json, text/event-stream", **session})
        reply = sse_messages(r)[-1] if r.headers["content-type"].startswith("text/event-stream") else r.json()
        assert reply["result"]["content"][0]["text"] == "ok", r.text

    async def socket() -> None:
        async with ws_client(url) as ws:
            assert (await ws.initialize({}))["result"]["protocolVersion"] == LEGACY
            reply = await ws.request("tools/call", {"name": "echo", "arguments": {"text": "ws"}})
            assert reply["result"]["content"][0]["text"] == "ws"

    asyncio.run(socket())


def send_messages(url: str, fuzzer: Fuzzer, count: int, headers: dict[str, str] | None = None) -> dict[int, int]:
    """``count`` fuzzed HTTP messages, both eras in turn (a new legacy session every 250);
    how many got each status."""
    statuses: dict[int, int] = {}
    # Asks of legacy calls end quickly: nobody answers them here.
    with (
        mcp_settings(ASK_TIMEOUT=0.2),
        httpx.Client(timeout=httpx.Timeout(30, read=10), headers=headers) as client,
    ):
        session = legacy_session(client, url)
        for i in range(count):
            if i % 250 == 0:
                session = legacy_session(client, url)
            message = fuzzer.modern() if i % 2 else fuzzer.legacy(session)
            status = send(client, url, message)
            statuses[status] = statuses.get(status, 0) + 1
    return statuses


@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_http(live_url: str, problems: Problems, shard: int) -> None:
    # Shard 0 has the seed a single run had; the websocket shards take the odd seeds.
    count = share(COUNT, shard)
    statuses = send_messages(live_url, Fuzzer(SEED + 2 * shard, catalogue()), count)
    assert not problems.records, problems.report()
    # The generator reaches the refusals as well as the answers.
    assert statuses.get(200, 0) > count // 10 and statuses.get(400, 0) > count // 10, statuses
    still_serving(live_url)
    assert not problems.records, problems.report()


def send_frames(url: str, fuzzer: Fuzzer, frames: int, initialize: float = 0.7, **connect: Any) -> None:
    """``frames`` fuzzed websocket frames, 300 a socket (``initialize`` of them initialized first);
    each socket must survive them and still answer a ping."""

    async def unanswered(request: dict[str, Any]) -> None:
        return None  # the server's asks go unanswered: they end at ASK_TIMEOUT

    async def run() -> None:
        sent = 0
        while sent < frames:
            async with ws_client(url, unanswered, **connect) as ws:
                if fuzzer.r.random() < initialize:
                    await ws.initialize({"elicitation": {}, "sampling": {}, "roots": {}})
                for _ in range(min(300, frames - sent)):
                    text, _what = fuzzer.frame()
                    await ws.socket.send(text)
                    sent += 1
                # Calls still running (asks waiting for ASK_TIMEOUT) end before the socket closes.
                await asyncio.sleep(0.5)
                # The socket survived all of it and still answers.
                reply = await asyncio.wait_for(ws.request("ping"), 30)
                assert "result" in reply or reply["error"]["code"] == -32600, reply
                for stray in ws.stray:
                    assert stray.get("id") is None or valid_id(stray["id"]), stray

    with mcp_settings(ASK_TIMEOUT=0.2):
        asyncio.run(run())


@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_websocket(live_url: str, problems: Problems, shard: int) -> None:
    send_frames(live_url, Fuzzer(SEED + 2 * shard + 1, catalogue()), max(100, share(COUNT // 3, shard)))
    assert not problems.records, problems.report()
    still_serving(live_url)
    assert not problems.records, problems.report()
