"""A websocket upgrade that cannot be served for an outage says so: HTTP 503 with the JSON-RPC
error where the server can answer an upgrade over HTTP, otherwise a close with 1013 ("try
again later"); never the 403 that reads as bad credentials.

In process, on the consumer (the served case, on a PostgreSQL that is stopped, is in
tests/test_database_faults.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.testing import ApplicationCommunicator

from mcp_django.pipeline import Pipeline
from mcp_django.protocol.jsonrpc import Unavailable
from mcp_django.transports.websocket import CLOSE_TRY_AGAIN_LATER, MCPWebsocketConsumer

# Channels closes stale database connections around each of the consumer's messages.
pytestmark = pytest.mark.django_db


def _scope(extensions: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "websocket",
        "path": "/mcp",
        "scheme": "ws",
        "headers": [(b"host", b"localhost"), (b"authorization", b"Token abc")],
        "subprotocols": ["mcp"],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
        "query_string": b"",
        "extensions": extensions,
    }


@pytest.fixture
def database_down(monkeypatch: pytest.MonkeyPatch) -> None:
    async def authenticate(self: Pipeline, req: Any, request: Any) -> Any:
        raise Unavailable("the database")

    monkeypatch.setattr(Pipeline, "authenticate", authenticate)


@pytest.mark.anyio
async def test_an_outage_is_a_503_before_the_upgrade(database_down: None) -> None:
    app = ApplicationCommunicator(MCPWebsocketConsumer.as_asgi(), _scope({"websocket.http.response": {}}))
    await app.send_input({"type": "websocket.connect"})
    start = await app.receive_output(5)
    assert start["type"] == "websocket.http.response.start"
    assert start["status"] == 503
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"retry-after"] == b"1"
    body = await app.receive_output(5)
    assert body["type"] == "websocket.http.response.body"
    error = json.loads(body["body"])
    assert error["jsonrpc"] == "2.0" and error["id"] is None
    assert error["error"]["code"] == -32603 and "database" in error["error"]["message"]
    await app.send_input({"type": "websocket.disconnect", "code": 1006})
    await app.wait(5)


@pytest.mark.anyio
async def test_an_outage_is_a_1013_close_without_the_denial_extension(database_down: None) -> None:
    app = ApplicationCommunicator(MCPWebsocketConsumer.as_asgi(), _scope({}))
    await app.send_input({"type": "websocket.connect"})
    accept = await app.receive_output(5)
    assert accept["type"] == "websocket.accept"
    close = await app.receive_output(5)
    assert close["type"] == "websocket.close"
    assert close["code"] == CLOSE_TRY_AGAIN_LATER == 1013
    assert "database" in close["reason"]
    await app.send_input({"type": "websocket.disconnect", "code": 1013})
    await app.wait(5)
