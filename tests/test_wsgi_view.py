"""The same endpoint through Django's view stack (include("mcp_django.urls")), as a WSGI stack serves it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.conftest import MODERN, meta

pytestmark = pytest.mark.django_db


def post(client: Client, method: str, params: dict[str, Any], **headers: str) -> Any:
    params = {**params, "_meta": meta()}
    extra = {
        "HTTP_MCP_PROTOCOL_VERSION": MODERN,
        "HTTP_MCP_METHOD": method,
        "HTTP_ACCEPT": "application/json, text/event-stream",
    }
    if "name" in params:
        extra["HTTP_MCP_NAME"] = params["name"]
    extra.update(headers)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return client.post("/mcp", body, content_type="application/json", **extra)


def test_rounds_over_the_django_view() -> None:
    client = Client()
    first = post(client, "tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}})
    assert first.status_code == 200
    state = first.json()["result"]["requestState"]
    done = post(
        client,
        "tools/call",
        {
            "name": "test_input_required_result_elicitation",
            "arguments": {},
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Wes"}}},
            "requestState": state,
        },
    )
    assert done.json()["result"]["content"][0]["text"] == "Hello, Wes!"


def test_view_answers_json_even_with_progress() -> None:
    client = Client()
    params = {"name": "test_tool_with_progress", "arguments": {}}
    response = post(client, "tools/call", {**params})
    assert response["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"].startswith("Progress reported")


def test_view_errors_and_csrf_exemption() -> None:
    client = Client(enforce_csrf_checks=True)
    r = post(client, "tools/list", {}, HTTP_MCP_METHOD="prompts/list")
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    assert client.get("/mcp").status_code == 405


def test_a_legacy_sessions_streams_are_refused_where_the_server_cannot_stream(raw_inprocess: Any) -> None:
    """A session opened on the ASGI route, its GET stream asked for through the view: refused as its
    initialize would be here, not answered an empty 200 stream (which a client reconnects to for ever,
    and which took the session's stream from the ASGI route's GET: its updates went nowhere)."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    opened = raw_inprocess.client.post(
        raw_inprocess.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
    )
    session = {"HTTP_MCP_SESSION_ID": opened.headers["mcp-session-id"], "HTTP_MCP_PROTOCOL_VERSION": "2025-11-25"}
    for extra in ({"HTTP_ACCEPT": "text/event-stream"}, {"HTTP_LAST_EVENT_ID": "1.1@local.elsewhere"}):
        stream = Client().get("/mcp", **session, **extra)
        assert stream.status_code == 400 and "need the ASGI route" in stream.json()["error"]["message"], stream
    assert Client().delete("/mcp", **session).status_code == 200  # a JSON answer: served here
