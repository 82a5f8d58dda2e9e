"""Legacy sessions over Streamable HTTP, driven by the official SDK client in mode="legacy"."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest

from tests import legacy_fixtures as fx
from tests.conftest import mcp_settings, sdk_client, sse_messages

pytestmark = pytest.mark.anyio

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(autouse=True)
def _reset() -> None:
    fx.reset()


async def name_ada(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def confirm_yes(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def paris(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="Paris"), model="m", stop_reason="endTurn"
    )


async def two_roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///a", name="a"), types.Root(uri="file:///b")])


def text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    return result.content[0].text


async def test_elicit(live_url: str) -> None:
    async with sdk_client(live_url, mode="legacy", elicitation_callback=name_ada) as client:
        assert client.protocol_version == "2025-11-25"
        assert text(await client.call_tool("legacytest_elicit")) == "Hello, Ada!"
    assert fx.RUNS["legacytest_elicit"] == 1


async def test_confirm_sync_handler(live_url: str) -> None:
    async with sdk_client(live_url, mode="legacy", elicitation_callback=confirm_yes) as client:
        assert text(await client.call_tool("legacytest_confirm")) == "confirmed"
    assert fx.RUNS["legacytest_confirm"] == 1


async def test_sample_and_roots(live_url: str) -> None:
    async with sdk_client(live_url, mode="legacy", sampling_callback=paris, list_roots_callback=two_roots) as client:
        assert text(await client.call_tool("legacytest_sample")) == "model said Paris"
        assert text(await client.call_tool("legacytest_roots")) == "file:///a,file:///b"
    assert fx.RUNS["legacytest_sample"] == 1
    assert fx.RUNS["legacytest_roots"] == 1


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_handler(live_url: str, action: str) -> None:
    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action=action)

    async with sdk_client(live_url, mode="legacy", elicitation_callback=answer) as client:
        assert text(await client.call_tool("legacytest_elicit")) == f"action={action}"
        assert text(await client.call_tool("legacytest_confirm")) == "not confirmed"
    assert fx.RUNS["legacytest_elicit"] == 1
    assert fx.RUNS["legacytest_confirm"] == 1


async def test_error_reply_reaches_the_handler(live_url: str) -> None:
    async def refuse(ctx: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        return types.ErrorData(code=-32050, message="the user closed the dialog")

    async with sdk_client(live_url, mode="legacy", elicitation_callback=refuse) as client:
        assert text(await client.call_tool("legacytest_error")) == "client error -32050: the user closed the dialog"
    assert fx.RUNS["legacytest_error"] == 1


async def test_timeout(live_url: str, settings: Any) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "ASK_TIMEOUT": 0.3}
    released = anyio.Event()

    async def never(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        with anyio.move_on_after(10):
            await released.wait()
        return types.ElicitResult(action="decline")

    async with sdk_client(live_url, mode="legacy", elicitation_callback=never) as client:
        assert text(await client.call_tool("legacytest_timeout")) == "timed out (-32001)"
        released.set()
    assert fx.RUNS["legacytest_timeout"] == 1


async def test_parallel_asks_are_parallel_requests(live_url: str) -> None:
    both = anyio.Event()
    entered: list[str] = []

    async def elicit_cb(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        entered.append("elicit")
        with anyio.fail_after(10):
            await both.wait()  # answered only once the sampling request has arrived too
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample_cb(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        entered.append("sample")
        both.set()
        return await paris(ctx, params)

    async with sdk_client(
        live_url,
        mode="legacy",
        elicitation_callback=elicit_cb,
        sampling_callback=sample_cb,
        list_roots_callback=two_roots,
    ) as client:
        assert text(await client.call_tool("legacytest_parallel")) == "Ada|Paris|2|yes"
        assert text(await client.call_tool("legacytest_ask_all")) == "Ada|Paris|2"
    assert sorted(entered[:2]) == ["elicit", "sample"]
    assert fx.RUNS["legacytest_parallel"] == 1
    assert fx.RUNS["legacytest_ask_all"] == 1


async def test_missing_capability_is_32021(live_url: str) -> None:
    from mcp import MCPError

    async with sdk_client(live_url, mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("legacytest_elicit")
        assert raised.value.code == -32021
        assert raised.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


async def test_sdk_cancellation_releases_a_blocked_sync_handler(live_url: str) -> None:
    asked = anyio.Event()

    async def hold(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await anyio.sleep(30)
        return types.ElicitResult(action="decline")

    async with sdk_client(live_url, mode="legacy", elicitation_callback=hold) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("legacytest_block")

            group.start_soon(call)
            with anyio.fail_after(10):
                await asked.wait()
            group.cancel_scope.cancel()
    with anyio.fail_after(10):
        while not fx.ABORTED.is_set():
            await anyio.sleep(0.02)
    assert fx.RUNS["legacytest_block"] == 1


# -- the session itself, on the wire ------------------------------------------------------


def final(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response of a POST, answered as JSON or as an SSE stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        return sse_messages(response)[-1]
    return response.json()


def _init(client: httpx.Client, url: str, **headers: str) -> tuple[str, dict[str, Any]]:
    response = client.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, headers={**HEADERS, **headers}
    )
    assert response.status_code == 200
    return response.headers["mcp-session-id"], response.json()


def test_version_negotiation(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        for asked, answered in [
            ("2024-11-05", "2024-11-05"),
            ("2025-03-26", "2025-03-26"),
            ("2025-06-18", "2025-06-18"),
            ("2025-11-25", "2025-11-25"),
            ("2099-01-01", "2025-11-25"),
        ]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {**INIT, "protocolVersion": asked}}
            result = client.post(live_url, json=body, headers=HEADERS).json()["result"]
            assert result["protocolVersion"] == answered
            assert "resultType" not in result
            assert result["capabilities"]["logging"] == {}
            assert result["serverInfo"]["name"]


def test_session_lifecycle_and_errors(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        sid, _ = _init(client, live_url)
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        assert (
            client.post(
                live_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            ).status_code
            == 202
        )
        ping = client.post(live_url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers)
        assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        level = client.post(
            live_url,
            json={"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "loud"}},
            headers=headers,
        )
        assert final(level)["error"]["code"] == -32602
        listed = final(
            client.post(live_url, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers=headers)
        )["result"]
        assert "ttlMs" not in listed and "resultType" not in listed
        # A reply to a request we never sent is refused clearly.
        stray = client.post(live_url, json={"jsonrpc": "2.0", "id": 99, "result": {}}, headers=headers)
        assert stray.status_code == 400 and stray.json()["error"]["code"] == -32600
        # GET opens the session's standalone stream (resource updates): tests/test_subscriptions.py.
        assert client.delete(live_url, headers=headers).status_code == 200
        gone = client.post(live_url, json={"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, headers=headers)
        assert gone.status_code == 404
        # No session, a forged one, a wrong version header.
        no_session = client.post(
            live_url, json={"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {}}, headers=HEADERS
        )
        assert no_session.status_code == 400
        forged = client.post(
            live_url,
            json={"jsonrpc": "2.0", "id": 7, "method": "ping"},
            headers={**headers, "mcp-session-id": sid[:-2] + "xx"},
        )
        assert forged.status_code == 404


def test_session_accepts_any_supported_version_header(live_url: str) -> None:
    """A session negotiated at 2025-11-25 takes requests labelled with another revision it speaks
    (conformance's server-sse-multiple-streams sends its spec version), as the official SDK's
    server does; a version no session speaks is 400, answered with the request's id."""
    with httpx.Client(timeout=10) as client:
        sid, _ = _init(client, live_url)
        for n, version in enumerate(["2025-03-26", "2025-06-18", "2024-11-05", "2025-11-25"]):
            headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": version}
            listed = client.post(
                live_url, json={"jsonrpc": "2.0", "id": 10 + n, "method": "tools/list"}, headers=headers
            )
            assert listed.status_code == 200, (version, listed.text)
            assert final(listed)["result"]["tools"]
        for version in ["2099-01-01", "", "2026-07-28"]:
            headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": version}
            wrong = client.post(live_url, json={"jsonrpc": "2.0", "id": 8, "method": "ping"}, headers=headers)
            assert wrong.status_code == 400, version
            body = wrong.json()
            assert body["id"] == 8 and body["error"]["code"] == -32600
            assert body["error"]["data"] == {
                "supported": ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                "requested": version,
            }
        # A notification has no id to answer with.
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2099-01-01"}
        note = client.post(live_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        assert note.status_code == 400 and note.json()["id"] is None


def test_log_level_is_honoured(live_url: str) -> None:
    with httpx.Client(timeout=10) as client:
        sid, _ = _init(client, live_url)
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        body = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "warning"}}
        assert client.post(live_url, json=body, headers=headers).json()["result"] == {}
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "legacytest_log"}}
        messages = sse_messages(client.post(live_url, json=call, headers=headers))
        logs = [m["params"] for m in messages if m.get("method") == "notifications/message"]
        assert [(m["level"], m["data"]) for m in logs] == [("warning", "a warning line")]
        assert messages[-1]["result"]["content"][0]["text"] == "logged"


def test_session_is_bound_to_its_principal(live_url: str) -> None:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    alice = Token.objects.create(user=User.objects.create_user("alice")).key
    bob = Token.objects.create(user=User.objects.create_user("bob")).key
    with httpx.Client(timeout=10) as client:
        sid, _ = _init(client, live_url, authorization=f"Token {alice}")
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "legacytest_whoami"}}
        mine = client.post(live_url, json=call, headers={**headers, "authorization": f"Token {alice}"})
        assert final(mine)["result"]["content"][0]["text"].startswith("auth.user:")
        theirs = client.post(live_url, json=call, headers={**headers, "authorization": f"Token {bob}"})
        assert theirs.status_code == 403
        anonymous = client.post(live_url, json=call, headers=headers)
        assert anonymous.status_code == 403
        assert client.delete(live_url, headers={**headers, "authorization": f"Token {bob}"}).status_code == 403


def test_stream_closed_by_the_server_is_resumed(live_url: str) -> None:
    """SEP-1699: test_reconnection closes its stream after one log; GET + Last-Event-ID brings the rest."""
    with httpx.Client(timeout=10) as client:
        sid, _ = _init(client, live_url)
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_reconnection"}}
        first = client.post(live_url, json=call, headers=headers)
        ids = [line[4:] for line in first.text.splitlines() if line.startswith("id: ")]
        assert first.text.startswith(f"id: {ids[0]}\nretry: ")
        messages = sse_messages(first)
        assert [m["params"]["data"] for m in messages] == ["Before disconnect"]
        resumed = client.get(live_url, headers={**headers, "accept": "text/event-stream", "last-event-id": ids[-1]})
        rest = sse_messages(resumed)
        assert [m.get("params", {}).get("data") for m in rest[:-1]] == ["After reconnect"]
        assert rest[-1]["id"] == 2 and rest[-1]["result"]["content"][0]["text"] == "Reconnection test completed"
        # Another session cannot read it; an unknown event id is 404.
        sid2, _ = _init(client, live_url)
        other = {**headers, "mcp-session-id": sid2, "accept": "text/event-stream", "last-event-id": ids[-1]}
        assert client.get(live_url, headers=other).status_code == 404
        unknown = {**headers, "accept": "text/event-stream", "last-event-id": "nonsense"}
        assert client.get(live_url, headers=unknown).status_code == 404


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_answer_that_does_not_fit_the_form_is_asked_again(live_url: str, mode: str) -> None:
    """`confirm: "yes please"` is not a boolean: rather than failing the call with -32602, the
    question is asked again (legacy: the request sent again; 2026-07-28: a new round, same key),
    its message saying what was wrong, and the corrected answer completes the call."""
    messages: list[str] = []

    async def yes_please_then_true(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": "yes please" if len(messages) == 1 else True})

    async with sdk_client(live_url, mode=mode, elicitation_callback=yes_please_then_true) as client:
        assert text(await client.call_tool("legacytest_confirm")) == "confirmed"
    assert messages[0] == "Go ahead?" and len(messages) == 2
    assert messages[1].startswith("Go ahead?\n\n(The previous answer was not accepted: confirm: ")
    assert messages[1].endswith('confirm: "yes please" is not of type "boolean". Please answer again.)')


async def test_a_client_that_keeps_answering_wrongly_fails_the_call(live_url: str) -> None:
    """On a legacy session the request is sent again a few times, then the call fails (-32602)."""
    calls = 0

    async def always_wrong(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal calls
        calls += 1
        return types.ElicitResult(action="accept", content={"confirm": "yes please"})

    async with sdk_client(live_url, mode="legacy", elicitation_callback=always_wrong) as client:
        with pytest.raises(Exception) as caught:
            await client.call_tool("legacytest_confirm")
    assert getattr(caught.value, "code", None) == -32602 or "-32602" in str(caught.value)
    assert "is not of type" in str(caught.value)
    assert calls == 4  # asked once, then again three times


def test_a_stream_or_session_end_refused_for_bad_credentials_or_an_unknown_worker(raw_inprocess: Any) -> None:
    """GET and DELETE authenticate as POST does (401 for a bad token, not a 500); a Last-Event-ID
    naming a worker this process does not have (one process, the in-memory layer) is a 404."""
    client, url = raw_inprocess.client, raw_inprocess.url
    opened = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, headers=HEADERS)
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    for method in ("GET", "DELETE"):
        refused = client.request(method, url, headers={**session, "authorization": "Token nope"})
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == -32600 and "www-authenticate" in refused.headers
    elsewhere = {**session, "accept": "text/event-stream", "last-event-id": "1.1@mcp-django.elsewhere!0"}
    lost = client.get(url, headers=elsewhere)
    assert lost.status_code == 404 and "no stream to resume" in lost.json()["error"]["message"]
    assert client.delete(url, headers=session).status_code == 200


def test_a_browser_on_an_allowed_origin_can_read_a_legacy_sessions_answers(raw_inprocess: Any) -> None:
    """CORS headers on every answer after the Origin check, a legacy session's and a refusal too (they
    were on 2026-07-28's answers only: a browser could not read initialize, nor the session id it exposes)."""
    client, url = raw_inprocess.client, raw_inprocess.url
    origin = {"origin": "https://app.example.com"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    with mcp_settings(ALLOWED_ORIGINS=["https://app.example.com"]):
        opened = client.post(url, json=initialize, headers={**HEADERS, **origin})
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25", **origin}
        answers = {
            "initialize": opened,
            "not JSON": client.post(url, content=b"{", headers={**HEADERS, **origin}),
            "bad token": client.get(url, headers={**session, "authorization": "Token nope"}),
            "DELETE": client.delete(url, headers=session),
            "PUT": client.put(url, content=b"{}", headers=origin),
        }
    assert [answer.status_code for answer in answers.values()] == [200, 400, 401, 200, 405]
    for name, answer in answers.items():
        assert answer.headers.get("access-control-allow-origin") == "https://app.example.com", name
