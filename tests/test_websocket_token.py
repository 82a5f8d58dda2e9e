"""Credentials in a websocket subprotocol, for clients that cannot send headers (browsers, the TS SDK)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import websockets
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from tests.conftest import mcp_settings

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def carrying(authorization: str) -> str:
    """The subprotocol that carries an Authorization header value."""
    return "mcp.authorization." + base64.urlsafe_b64encode(authorization.encode()).decode().rstrip("=")


def respelt(subprotocol: str) -> str:
    """The same bytes with an unused low bit of the last character set (Python's decoder ignores it)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    encoded = subprotocol[len("mcp.authorization.") :]
    assert len(encoded) % 4 in (2, 3)  # the last character has unused bits
    other = alphabet[alphabet.index(encoded[-1]) ^ 1]
    spelt = subprotocol[:-1] + other
    assert base64.urlsafe_b64decode(encoded[:-1] + other + "==") == base64.urlsafe_b64decode(encoded + "==")
    return spelt


@sync_to_async
def _token(username: str) -> str:
    return Token.objects.create(user=get_user_model().objects.create_user(username)).key


async def _whoami(socket: Any) -> dict[str, Any]:
    await socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
    assert "result" in json.loads(await socket.recv())
    call = {"name": "whoami", "arguments": {}}
    await socket.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
    return json.loads(await socket.recv())


async def test_a_token_in_the_subprotocol_authenticates_the_socket(live_url: str) -> None:
    key = await _token("alice")
    ws_url = live_url.replace("http://", "ws://")
    with mcp_settings(ALLOW_ANONYMOUS=False):
        async with websockets.connect(ws_url, subprotocols=["mcp", carrying(f"Token {key}")]) as socket:
            # Only "mcp" is selected: the credential never comes back in the handshake.
            assert socket.subprotocol == "mcp"
            assert socket.response.headers["Sec-WebSocket-Protocol"] == "mcp"
            answer = await _whoami(socket)
    assert answer["result"]["structuredContent"]["username"] == "alice"


@pytest.mark.parametrize(
    ("offered", "status"),
    [
        # An unknown token: the 401 and challenge a POST gets. A malformed offer: 403.
        pytest.param(lambda key: [carrying("Token wrong")], 401, id="unknown token"),
        pytest.param(lambda key: ["mcp.authorization.not*base64"], 403, id="not base64url"),
        pytest.param(lambda key: ["mcp.authorization."], 403, id="empty"),
        pytest.param(lambda key: ["mcp.authorization.AA"], 403, id="not text"),
        pytest.param(lambda key: [respelt(carrying(f"Token {key}"))], 403, id="not canonical"),
        pytest.param(lambda key: [carrying(f"Token {key}"), carrying(f"Token {key}")], 403, id="twice"),
    ],
)
async def test_bad_credentials_in_the_subprotocol_refuse_the_upgrade(live_url: str, offered: Any, status: int) -> None:
    key = await _token("bea")
    ws_url = live_url.replace("http://", "ws://")
    # Anonymous callers are welcome here: a bad credential is still refused, never ignored.
    with mcp_settings(ALLOW_ANONYMOUS=True):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws_url, subprotocols=["mcp", *offered(key)]):
                pass
    assert refused.value.response.status_code == status


async def test_the_subprotocol_and_an_authorization_header_together_are_refused(live_url: str) -> None:
    key = await _token("cat")
    ws_url = live_url.replace("http://", "ws://")
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(
            ws_url,
            subprotocols=["mcp", carrying(f"Token {key}")],
            additional_headers={"Authorization": f"Token {key}"},
        ):
            pass
    assert refused.value.response.status_code == 403


async def test_a_socket_opened_with_a_subprotocol_token_ends_when_the_token_is_deleted(live_url: str) -> None:
    key = await _token("dan")
    ws_url = live_url.replace("http://", "ws://")
    async with websockets.connect(ws_url, subprotocols=["mcp", carrying(f"Token {key}")]) as socket:
        assert (await _whoami(socket))["result"]["structuredContent"]["username"] == "dan"
        await sync_to_async(Token.objects.filter(key=key).delete)()
        call = {"name": "whoami", "arguments": {}}
        await socket.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
        assert json.loads(await socket.recv())["error"]["code"] == -32600
        with pytest.raises(websockets.ConnectionClosed):
            await socket.recv()
    assert socket.close_code == 4401
