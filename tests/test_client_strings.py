"""A client's string that holds a value the database refuses (a NUL) is a client error (issue 29).

PostgreSQL's text cannot hold NUL: a name, a URI or a typed value that reached a query
with one was a ``psycopg.DataError``, answered -32603 with a traceback in the log. Each
place a client string reaches a query refuses it first (-32602, on every database), and a
value a handler's own query refuses (a DRF view's search) is the request's fault too: a
tool's error result, or -32602, with one log line. Over websockets (any string, either era)
and HTTP (a name the ``Mcp-Name`` header carries in base64). The fuzz tests send such
strings at random (tests/fuzz.py; on PostgreSQL, tests/test_fuzz_postgresql.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

from mcp_django import mcp
from tests.conftest import MODERN, meta
from tests.legacy_fixtures import ws_client
from tests.test_fuzz import Problems, watched

pytestmark = pytest.mark.django_db(transaction=True)

NUL = "a\x00b"
# Each request, and whether the answer is a -32602 error or a tool's error result.
REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("resources/read", {"uri": "shop://products/" + NUL}),  # a template's variable, looked up by the handler
    ("resources/read", {"uri": "test://template/" + NUL + "/data"}),
    (
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "shop://products/{sku}"}, "argument": {"name": "sku", "value": NUL}},
    ),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "order_help"}, "argument": {"name": "product", "value": NUL}},
    ),
    ("completion/complete", {"ref": {"type": "ref/resource", "uri": NUL}, "argument": {"name": "x", "value": "y"}}),
]
# A handler's own query: the database itself refuses the value (PostgreSQL; SQLite finds no one).
LOOKUPS: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {"name": "strings_count_users", "arguments": {"username": NUL}}),
    ("prompts/get", {"name": "strings_user_prompt", "arguments": {"username": NUL}}),
]


@mcp.tool()
def strings_count_users(username: str) -> str:
    """How many users have this name (the handler's own query)."""
    return str(get_user_model().objects.filter(username=username).count())


@mcp.prompt()
def strings_user_prompt(username: str) -> str:
    """A prompt that looks the user up."""
    return f"{get_user_model().objects.filter(username=username).count()} users"


@pytest.fixture
def problems() -> Iterator[Problems]:
    with watched() as handler:
        yield handler


def _key() -> str:
    user = get_user_model().objects.create_superuser("root", password="pw")
    return str(Token.objects.create(user=user).key)


def _check(method: str, params: dict[str, Any], answer: dict[str, Any]) -> None:
    if (method, params) in LOOKUPS:
        if connection.vendor != "postgresql":
            assert "result" in answer and not answer["result"].get("isError"), answer  # SQLite stores NUL
        elif method == "tools/call":
            result = answer["result"]  # a tool's failure is a result the model reads
            assert result["isError"] is True, answer
            assert "the database refused a value" in result["content"][0]["text"], answer
        else:
            assert answer["error"]["code"] == -32602, answer
            assert "the database refused a value" in answer["error"]["message"], answer
        return
    assert answer["error"]["code"] == -32602, (method, params, answer)
    assert "NUL" in answer["error"]["message"], answer


def test_nul_strings_over_websockets(live_url: str, problems: Problems) -> None:
    key = _key()

    async def run() -> None:
        async with ws_client(live_url, additional_headers={"Authorization": f"Token {key}"}) as ws:
            await ws.initialize({})
            for method, params in [*REFUSED, *LOOKUPS]:
                _check(method, params, await ws.request(method, params))  # legacy
                _check(method, params, await ws.request(method, {**params, "_meta": meta()}))  # 2026-07-28

    asyncio.run(run())
    assert not problems.records, problems.report()


def test_nul_strings_over_http(live_url: str, problems: Problems) -> None:
    key = _key()
    with httpx.Client(timeout=30) as client:
        for number, (method, params) in enumerate([*REFUSED, *LOOKUPS]):
            name = params.get("uri", params.get("name"))
            headers = {
                "authorization": f"Token {key}",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": MODERN,
                "mcp-method": method,
            }
            if method in ("resources/read", "tools/call", "prompts/get"):
                headers["mcp-name"] = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
            body = {"jsonrpc": "2.0", "id": number, "method": method, "params": {**params, "_meta": meta()}}
            answer = client.post(live_url, content=json.dumps(body), headers=headers)
            assert answer.status_code < 500, answer.text
            _check(method, params, answer.json())
    assert not problems.records, problems.report()


def test_nul_in_the_authorization_servers_parameters(live_url: str, problems: Problems) -> None:
    """The demo's authorization server (django-oauth-toolkit) looked a NUL-holding client_id,
    token or registration field up as it came: a 500 and a traceback on PostgreSQL. Refused
    first, 400 invalid_request, by mcp_django.contrib.oauth.refuse_nul."""
    origin = live_url.rsplit("/mcp", 1)[0]
    code = {"grant_type": "authorization_code", "code": NUL, "client_id": NUL, "redirect_uri": "http://127.0.0.1:9/cb"}
    registration = {
        "client_name": NUL,
        "redirect_uris": ["http://127.0.0.1:9/cb"],
        "token_endpoint_auth_method": "none",
    }
    with httpx.Client(timeout=30) as client:
        answers = [
            client.post(f"{origin}/o/token/", data=code),
            client.post(f"{origin}/o/revoke_token/", data={"token": NUL, "client_id": NUL}),
            client.post(f"{origin}/o/register/", json=registration),
            client.get(f"{origin}/o/authorize/", params={"client_id": NUL, "response_type": "code"}),
        ]
        for answer in answers:
            assert answer.status_code == 400, (answer.request.url, answer.status_code, answer.text[:300])
            assert answer.json()["error"] == "invalid_request", answer.text
        # Without one, the same endpoints answer as they did (here: an unknown client).
        assert client.post(f"{origin}/o/token/", data={**code, "code": "x", "client_id": "x"}).status_code == 401
    # Only the authorization server's URLs: a tool's argument may hold a NUL, at the WSGI view too.
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": NUL}}}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
    echoed = Client().post(
        "/mcp",
        json.dumps({**body, "params": {**body["params"], "_meta": meta()}}),
        content_type="application/json",
        headers={**headers, "accept": "application/json, text/event-stream"},
    )
    assert echoed.status_code == 200 and echoed.json()["result"]["content"][0]["text"] == NUL, echoed.content
    assert not problems.records, problems.report()
