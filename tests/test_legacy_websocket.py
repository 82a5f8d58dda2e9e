"""MCP over websockets (Channels): the legacy flows, 2026-07-28 per message, auth, disconnects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from tests import legacy_fixtures as fx
from tests.conftest import ALL_CAPS, meta
from tests.legacy_fixtures import ws_client

pytestmark = pytest.mark.anyio

CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": True}}


@pytest.fixture(autouse=True)
def _reset() -> None:
    fx.reset()


def answers(**by_method: dict[str, Any]) -> fx.Answer:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        return by_method[request["method"].replace("/", "_")]

    return answer


ADA = {"result": {"action": "accept", "content": {"name": "Ada"}}}
PARIS = {"result": {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}}
ROOTS = {"result": {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}}


def text(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    return reply["result"]["content"][0]["text"]


async def call(client: fx.WsClient, name: str) -> dict[str, Any]:
    return await client.request("tools/call", {"name": name, "arguments": {}})


async def test_initialize_and_lifecycle(live_url: str) -> None:
    async with ws_client(live_url) as client:
        early = await client.request("tools/list", {})
        assert early["error"]["code"] == -32600
        reply = await client.initialize(CAPS, "2024-11-05")
        assert reply["result"]["protocolVersion"] == "2024-11-05"
        again = await client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        assert again["error"]["code"] == -32600
        assert (await client.request("ping"))["result"] == {}
        assert (await client.request("logging/setLevel", {"level": "warning"}))["result"] == {}
        assert text(await call(client, "legacytest_log")) == "logged"
        logs = [n["params"]["data"] for n in client.notifications if n["method"] == "notifications/message"]
        assert logs == ["a warning line"]
        assert (await client.request("resources/subscribe", {"uri": "test://watched-resource"}))["result"] == {}
        missing = await client.request("resources/read", {"uri": "test://nope"})
        assert missing["error"]["code"] == -32002


async def test_unsupported_version_gets_latest(live_url: str) -> None:
    async with ws_client(live_url) as client:
        assert (await client.initialize({}, "2031-01-01"))["result"]["protocolVersion"] == "2025-11-25"


async def test_asks(live_url: str) -> None:
    answer = answers(elicitation_create=ADA, sampling_createMessage=PARIS, roots_list=ROOTS)
    async with ws_client(live_url, answer) as client:
        await client.initialize(CAPS)
        assert text(await call(client, "legacytest_elicit")) == "Hello, Ada!"
        assert text(await call(client, "legacytest_sample")) == "model said Paris"
        assert text(await call(client, "legacytest_roots")) == "file:///a,file:///b"
        assert text(await call(client, "legacytest_parallel")) == "Ada|Paris|2|yes"
        assert text(await call(client, "legacytest_ask_all")) == "Ada|Paris|2"
    for name in ("elicit", "sample", "roots", "parallel", "ask_all"):
        assert fx.RUNS[f"legacytest_{name}"] == 1


async def test_confirm_decline_cancel_and_error(live_url: str) -> None:
    replies = iter(
        [
            {"result": {"action": "accept", "content": {"confirm": True}}},
            {"result": {"action": "decline"}},
            {"result": {"action": "cancel"}},
            {"error": {"code": -32050, "message": "closed"}},
            {"result": {"action": "accept", "content": {"name": 5}}},
            {"result": {"action": "maybe"}},
        ]
    )
    asked: list[str] = []

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request["params"].get("message", ""))
        return next(replies)

    async with ws_client(live_url, answer) as client:
        await client.initialize(CAPS)
        assert text(await call(client, "legacytest_confirm")) == "confirmed"
        assert text(await call(client, "legacytest_elicit")) == "action=decline"
        assert text(await call(client, "legacytest_elicit")) == "action=cancel"
        assert text(await call(client, "legacytest_error")) == "client error -32050: closed"
        # Content that does not fit the form is asked again (a new request saying what was wrong);
        # a malformed answer never completes the call.
        bad = await call(client, "legacytest_elicit")
        assert bad["error"]["code"] == -32602
        assert "(The previous answer was not accepted: name: 5 is not of type" in asked[-1]
    assert fx.RUNS["legacytest_confirm"] == 1
    assert fx.RUNS["legacytest_elicit"] == 3
    assert fx.RUNS["legacytest_error"] == 1


async def test_url_elicitation(live_url: str) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        assert request["params"]["mode"] == "url" and request["params"]["elicitationId"] == "consent-1"
        return {"result": {"action": "accept"}}

    async with ws_client(live_url, answer) as client:
        await client.initialize(CAPS)
        assert text(await call(client, "legacytest_url")) == "url action=accept"
        done = [n for n in client.notifications if n["method"] == "notifications/elicitation/complete"]
        assert done == [
            {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": "consent-1"}}
        ]


async def test_timeout(live_url: str, settings: Any) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "ASK_TIMEOUT": 0.3}

    async def silent(request: dict[str, Any]) -> None:
        return None

    async with ws_client(live_url, silent) as client:
        await client.initialize(CAPS)
        assert text(await call(client, "legacytest_timeout")) == "timed out (-32001)"
        asked = client.server_requests[0]["id"]
        cancelled = [n["params"] for n in client.notifications if n["method"] == "notifications/cancelled"]
        assert cancelled == [{"requestId": asked, "reason": "timed out"}]
    assert fx.RUNS["legacytest_timeout"] == 1


async def test_missing_capability(live_url: str) -> None:
    async with ws_client(live_url) as client:
        await client.initialize({"elicitation": {}})
        reply = await call(client, "legacytest_sample")
        assert reply["error"]["code"] == -32021
        assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
        assert (await call(client, "legacytest_url"))["error"]["code"] == -32021
    assert fx.RUNS["legacytest_sample"] == 1


async def test_cancelled_notification_and_disconnect_release_sync_handlers(live_url: str) -> None:
    asked = asyncio.Event()

    async def hold(request: dict[str, Any]) -> None:
        asked.set()
        return None

    async with ws_client(live_url, hold) as client:
        await client.initialize(CAPS)
        request_id, reply = await client.send("tools/call", {"name": "legacytest_block", "arguments": {}})
        await asyncio.wait_for(asked.wait(), 10)
        await client.notify("notifications/cancelled", {"requestId": request_id})
        await asyncio.wait_for(asyncio.to_thread(fx.ABORTED.wait, 10), 11)
        assert fx.ABORTED.is_set()
        # Still usable after a cancellation; no response was sent for the cancelled call.
        assert (await client.request("ping"))["result"] == {}
        assert not reply.done()
    fx.ABORTED.clear()
    asked.clear()
    async with ws_client(live_url, hold) as client:
        await client.initialize(CAPS)
        await client.send("tools/call", {"name": "legacytest_block", "arguments": {}})
        await asyncio.wait_for(asked.wait(), 10)
    # The socket closed: the handler blocked in its ask is released.
    assert await asyncio.to_thread(fx.ABORTED.wait, 10)
    assert fx.RUNS["legacytest_block"] == 2


async def test_modern_requests_on_the_socket(live_url: str) -> None:
    async with ws_client(live_url) as client:
        params = {"name": "test_input_required_result_elicitation", "arguments": {}, "_meta": meta(ALL_CAPS)}
        first = await client.request("tools/call", params)
        assert first["result"]["resultType"] == "input_required"
        retry = {
            **params,
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": first["result"]["requestState"],
        }
        done = await client.request("tools/call", retry)
        assert done["result"]["content"][0]["text"] == "Hello, Ada!"
        assert done["result"]["resultType"] == "complete"
        unsupported = await client.request("tools/list", {"_meta": meta(version="2099-01-01")})
        assert unsupported["error"]["code"] == -32022
        assert (await client.request("ping", {"_meta": meta()}))["error"]["code"] == -32601
        assert client.server_requests == []


async def test_bad_frames(live_url: str) -> None:
    async with ws_client(live_url) as client:
        await client.socket.send("{not json")
        await client.socket.send('{"jsonrpc": "2.0", "id": 9}')
        await client.socket.send(b"binary")
        # Frames are answered in order: once ping's reply is in, so are the three errors.
        assert (await client.request("ping"))["result"] == {}
        assert [(m["id"], m["error"]["code"]) for m in client.stray] == [(None, -32700), (9, -32600), (None, -32700)]


async def test_authentication(live_url: str, settings: Any) -> None:
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import User
    from django.test import Client
    from rest_framework.authtoken.models import Token

    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "ALLOW_ANONYMOUS": False}

    def make() -> tuple[str, str]:
        user = User.objects.create_user("carol")
        browser = Client()
        browser.force_login(user)
        return Token.objects.create(user=user).key, browser.cookies["sessionid"].value

    token, session = await sync_to_async(make)()
    with pytest.raises(InvalidStatus) as refused:
        async with ws_client(live_url):
            pass
    # The 401 and challenge a POST gets, so a client can find how to sign in.
    assert refused.value.response.status_code == 401
    assert refused.value.response.headers["www-authenticate"].startswith("Bearer ")
    for headers in ({"Authorization": f"Token {token}"}, {"Cookie": f"sessionid={session}"}):
        async with ws_client(live_url, additional_headers=headers) as client:
            await client.initialize({})
            assert text(await call(client, "legacytest_whoami")).startswith("auth.user:")
    with pytest.raises(InvalidStatus):
        async with ws_client(live_url, additional_headers={"Authorization": "Token nope"}):
            pass
    with pytest.raises(InvalidStatus):
        async with ws_client(
            live_url, additional_headers={"Authorization": f"Token {token}", "Origin": "http://evil.example"}
        ):
            pass


async def test_subprotocol_required(live_url: str) -> None:
    from websockets.asyncio.client import connect

    with pytest.raises(InvalidStatus):
        async with connect(live_url.replace("http://", "ws://")):
            pass


async def test_tasks_methods_do_not_exist_on_a_legacy_session(live_url: str) -> None:
    from tests.test_tasks import LEGACY_TASKS

    async with ws_client(live_url) as client:
        await client.initialize(CAPS)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            error = (await client.request(method, {"taskId": "x", "inputResponses": {}}))["error"]
            assert error == {"code": -32601, "message": f"Method not found: {method} {LEGACY_TASKS}2025-11-25)"}
