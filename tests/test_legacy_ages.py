"""Legacy clients of every revision (2024-11-05 to 2025-11-25) served as their revision says.

- the empty-data priming event and the early stream close (SEP-1699) only from 2025-11-25;
- ``notifications/*/list_changed`` on legacy sessions (initialize declares ``listChanged``);
- a cancelled call withdraws its own pending server-to-client request;
- a 2025-11-25 elicitation form fitted to a 2025-06-18 client, or refused naming what.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import mcp.types as types
import pytest

from tests import legacy_fixtures as fx
from tests.conftest import sdk_client, sse_messages
from tests.legacy_fixtures import ws_client

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}


@pytest.fixture(autouse=True)
def _reset() -> None:
    fx.reset()


def session(client: httpx.Client, url: str, version: str, caps: dict[str, Any] | None = None) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": caps or {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    response = client.post(url, json=init, headers=HEADERS)
    assert response.json()["result"]["protocolVersion"] == version
    headers = {**HEADERS, "mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": version}
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def events(lines: Iterator[str]) -> Iterator[tuple[str | None, str]]:
    """(id, data) of each SSE event: comments and retry-only blocks are not events."""
    event_id, data = None, None
    for line in lines:
        if line == "":
            if data is not None:
                yield event_id, data
            event_id, data = None, None
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip() if data is None else data + "\n" + line[5:].strip()


# -- SEP-1699 gated on 2025-11-25 ------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
def test_older_sessions_get_no_priming_event_and_no_early_close(live_url: str, version: str) -> None:
    with httpx.Client(timeout=10) as client:
        headers = session(client, live_url, version)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_reconnection"}}
        response = client.post(live_url, json=call, headers=headers)
        found = list(events(iter(response.text.splitlines())))
        # Every event's data is a JSON-RPC message (no empty priming event an older SDK fails to parse) ...
        messages = [json.loads(data) for _id, data in found]
        # ... and the stream was not cut before the result (an older SDK would wait forever to resume).
        assert [m.get("params", {}).get("data") for m in messages[:-1]] == ["Before disconnect", "After reconnect"]
        assert messages[-1]["result"]["content"][0]["text"] == "Reconnection test completed"
        # The standalone GET stream opens with a comment, never with an empty event.
        with client.stream("GET", live_url, headers={**headers, "accept": "text/event-stream"}) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith(":")
            subscribe = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "test://old"}}
            assert client.post(live_url, json=subscribe, headers=headers).json()["result"] == {}
            trigger = {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "test_trigger_resource_update", "arguments": {"uri": "test://old"}},
            }
            client.post(live_url, json=trigger, headers={**headers, "accept": "application/json"})
            _id, data = next(events(lines))
            assert json.loads(data)["params"] == {"uri": "test://old"}


def test_2025_11_25_sessions_keep_priming_and_early_close(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        headers = session(client, live_url, "2025-11-25")
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_reconnection"}}
        found = list(events(iter(client.post(live_url, json=call, headers=headers).text.splitlines())))
        assert found[0][1] == "" and found[0][0] is not None
        assert [json.loads(d)["params"]["data"] for _i, d in found[1:]] == ["Before disconnect"]


# -- list_changed on legacy sessions ----------------------------------------------------------


def test_legacy_get_stream_hears_list_changes(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        headers = session(client, live_url, "2025-06-18")
        with client.stream("GET", live_url, headers={**headers, "accept": "text/event-stream"}) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith(":")
            for tool in ("test_trigger_tool_change", "test_trigger_prompt_change"):
                call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": tool}}
                client.post(live_url, json=call, headers={**headers, "accept": "application/json"})
            heard = [json.loads(data)["method"] for _id, data in (next(events(lines)) for _ in range(4))]
        assert heard == ["notifications/tools/list_changed"] * 2 + ["notifications/prompts/list_changed"] * 2


@pytest.mark.anyio
async def test_sdk_legacy_client_and_websocket_hear_list_changes(live_url: str) -> None:
    heard: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append("tools")

    async with sdk_client(live_url, mode="legacy", message_handler=on_message) as client:
        # The SDK opens its GET stream by itself after the handshake: trigger until it hears.
        async with asyncio.timeout(30):
            while not heard:
                await client.call_tool("test_trigger_tool_change", {})
                await asyncio.sleep(0.2)
    assert set(heard) == {"tools"}

    async with ws_client(live_url) as ws:
        await ws.initialize({}, "2025-03-26")
        assert "result" in await ws.request("tools/call", {"name": "test_trigger_prompt_change", "arguments": {}})
        async with asyncio.timeout(30):
            while len(ws.notifications) < 2:
                await asyncio.sleep(0.01)
        methods = [n["method"] for n in ws.notifications]
        assert methods == ["notifications/prompts/list_changed"] * 2


# -- a cancelled call withdraws its ask -------------------------------------------------------


def test_cancelled_http_call_withdraws_its_pending_ask(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        headers = session(client, live_url, "2025-11-25", CAPS)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "legacytest_elicit"}}
        with client.stream("POST", live_url, json=call, headers=headers) as stream:
            messages = (json.loads(d) for _i, d in events(stream.iter_lines()) if d)
            ask = next(messages)
            assert ask["method"] == "elicitation/create"
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            assert client.post(live_url, json=cancel, headers=headers).status_code == 202
            withdrawn = next(messages)
        assert withdrawn["method"] == "notifications/cancelled"
        assert withdrawn["params"]["requestId"] == ask["id"]
    # The cancelled call's audit row is written as its task unwinds, after the answer: it
    # must be in before the test's database is flushed (in-memory SQLite would be locked).
    _wait_for_row(kind="cancelled", request_id="7")


def _wait_for_row(**lookup: str) -> None:
    from django.db import OperationalError

    from mcp_django.models import AuditEvent

    deadline = time.monotonic() + 10
    while True:
        try:
            if AuditEvent.objects.filter(**lookup).exists():
                return
        except OperationalError:  # in-memory SQLite: the table is locked while the row is written
            pass
        assert time.monotonic() < deadline, f"no audit row {lookup}"
        time.sleep(0.02)


@pytest.mark.anyio
async def test_cancelled_websocket_call_withdraws_its_pending_ask(live_url: str) -> None:
    asked = asyncio.Event()

    async def hold(request: dict[str, Any]) -> None:
        asked.set()
        return None

    async with ws_client(live_url, hold) as client:
        await client.initialize(CAPS)
        request_id, _reply = await client.send("tools/call", {"name": "legacytest_elicit", "arguments": {}})
        await asyncio.wait_for(asked.wait(), 10)
        await client.notify("notifications/cancelled", {"requestId": request_id})
        async with asyncio.timeout(30):
            while not client.notifications:
                await asyncio.sleep(0.02)
        ask_id = client.server_requests[0]["id"]
        assert [(n["method"], n["params"]["requestId"]) for n in client.notifications] == [
            ("notifications/cancelled", ask_id)
        ]


# -- elicitation forms fitted to the session's revision ---------------------------------------


def test_2025_11_25_form_is_fitted_to_a_2025_06_18_client(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        headers = session(client, live_url, "2025-06-18", CAPS)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "legacytest_modern_form"}}
        with client.stream("POST", live_url, json=call, headers=headers) as stream:
            messages = (json.loads(d) for _i, d in events(stream.iter_lines()) if d)
            ask = next(messages)
            # What the 2025-06-18 schema allows, validated by that revision's SDK types.
            assert "mode" not in ask["params"]
            assert ask["params"]["requestedSchema"] == {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name", "format": "email"},
                    "age": {"type": "integer", "minimum": 0},
                    "colour": {"type": "string", "title": "Colour", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
                    "subscribe": {"type": "boolean", "default": True},
                },
                "required": ["name"],
            }
            reply = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "a@b.c"}}}
            assert client.post(live_url, json=reply, headers=headers).status_code == 202
            final = next(messages)
        assert final["result"]["content"][0]["text"] == 'action=accept content={"name": "a@b.c"}'
        # A 2025-11-25 session gets the form unchanged.
        modern = session(client, live_url, "2025-11-25", CAPS)
        with client.stream("POST", live_url, json=call, headers=modern) as stream:
            ask = json.loads(next(d for _i, d in events(stream.iter_lines()) if d))
            assert ask["params"]["mode"] == "form"
            assert ask["params"]["requestedSchema"] == fx.MODERN_FORM


def test_a_form_a_2025_06_18_client_cannot_read_is_refused_naming_what(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        headers = session(client, live_url, "2025-06-18", CAPS)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "legacytest_multi_select"}}
        messages = sse_messages(client.post(live_url, json=call, headers=headers))
        # Nothing was asked: the only message is the call's answer.
        assert len(messages) == 1
        answer = messages[0]
        text = json.dumps(answer)
        assert "tags (a multi-select enum)" in text and "2025-11-25" in text
