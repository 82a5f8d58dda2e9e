"""Real multi-round flows driven by the official MCP Python SDK client (2026-07-28)."""

from __future__ import annotations

from typing import Any

import httpx2
import mcp.types as types
import pytest
from django.contrib.auth import get_user_model
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

import tests.modern_tools as tools
from tests.conftest import sdk_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def _fill(schema: dict[str, Any]) -> dict[str, Any]:
    """An answer that fits a flat form: true for booleans, "x" for strings."""
    kinds = {"boolean": True, "string": "x", "integer": 1, "number": 1.0}
    return {name: kinds.get(prop.get("type"), "x") for name, prop in schema.get("properties", {}).items()}


class Answers:
    """Callbacks that answer by input key and remember what they were asked."""

    def __init__(self, elicit: dict[str, Any] | None = None, model: str = "Paris") -> None:
        self.elicit = elicit or {}
        self.model = model
        self.asked: list[tuple[str, str]] = []

    async def on_elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append((str(ctx.request_id), "elicit"))
        answer = self.elicit.get(str(ctx.request_id)) or _fill(getattr(params, "requested_schema", None) or {})
        if answer in ("decline", "cancel"):
            return types.ElicitResult(action=answer)
        return types.ElicitResult(action="accept", content=answer)

    async def on_sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append((str(ctx.request_id), "sample"))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=self.model),
            model="test-model",
            stop_reason="endTurn",
        )

    async def on_roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append((str(ctx.request_id), "roots"))
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/app", name="app")])

    def callbacks(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.on_elicit,
            "sampling_callback": self.on_sample,
            "list_roots_callback": self.on_roots,
        }


async def test_elicitation_flow(live_url: str) -> None:
    answers = Answers({"user_name": {"name": "Ada"}})
    async with sdk_client(live_url, **answers.callbacks()) as client:
        result = await client.call_tool("test_input_required_result_elicitation")
    assert result.content[0].text == "Hello, Ada!"
    assert answers.asked == [("user_name", "elicit")]


async def test_decline(live_url: str) -> None:
    answers = Answers({"user_name": "decline"})
    async with sdk_client(live_url, **answers.callbacks()) as client:
        result = await client.call_tool("test_input_required_result_elicitation")
    assert result.content[0].text == "Hello, stranger!"


async def test_multi_round_and_state(live_url: str) -> None:
    answers = Answers({"step1": {"name": "Alice"}, "step2": {"color": "blue"}})
    async with sdk_client(live_url, **answers.callbacks()) as client:
        result = await client.call_tool("test_input_required_result_multi_round")
        state = await client.call_tool("test_input_required_result_request_state")
    assert result.content[0].text == "Alice likes blue."
    assert [key for key, _ in answers.asked[:2]] == ["step1", "step2"]
    assert state.content[0].text == "state-ok: confirmation received"


async def test_one_round_for_parallel_asks(live_url: str) -> None:
    """Count the POSTs: gather's two asks cost one extra round, not two."""
    posts: list[str] = []

    async def count(request: httpx2.Request) -> None:
        posts.append(request.headers.get("mcp-method", ""))

    answers = Answers({"user_name": {"name": "Ada"}})
    async with httpx2.AsyncClient(event_hooks={"request": [count]}, timeout=30) as http:
        async with Client(
            streamable_http_client(live_url, http_client=http), mode="2026-07-28", cache=None, **answers.callbacks()
        ) as client:
            await client.list_tools()
            posts.clear()
            result = await client.call_tool("test_input_required_result_multiple_inputs")
    assert result.content[0].text == "All inputs received: Ada, 'Paris', 1 root(s)."
    assert posts == ["tools/call", "tools/call"]
    assert sorted(kind for _, kind in answers.asked) == ["elicit", "roots", "sample"]


async def test_sync_handler_flow(live_url: str) -> None:
    tools.runs.clear()
    answers = Answers(model="Green tea")
    answers.elicit = {}

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = params.requested_schema
        content = {"confirm": True} if "confirm" in schema["properties"] else {"name": "Bob"}
        return types.ElicitResult(action="accept", content=content)

    callbacks = {**answers.callbacks(), "elicitation_callback": on_elicit}
    async with sdk_client(live_url, **callbacks) as client:
        result = await client.call_tool("modtest_sync_multi", {"item": "tea"})
    assert result.content[0].text == "tea for Bob: Green tea (attempt 3)"
    assert tools.runs["sync_multi"] == 3


async def test_prompt_and_resource(live_url: str) -> None:
    answers = Answers({"user_context": {"context": "tests"}, "read": {"confirm": True}})
    async with sdk_client(live_url, **answers.callbacks()) as client:
        prompt = await client.get_prompt("test_input_required_result_prompt")
        resource = await client.read_resource("modtest://secret/plans")
    assert prompt.messages[0].content.text == "Use the following context: tests"
    assert resource.contents[0].text == "secret plans"


async def test_missing_capability_is_an_error(live_url: str) -> None:
    async with sdk_client(live_url) as client:  # no callbacks: no capabilities declared
        with pytest.raises(MCPError) as info:
            await client.call_tool("test_input_required_result_elicitation")
    assert info.value.code == -32021
    assert info.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


async def test_url_elicitation(live_url: str) -> None:
    seen: list[str] = []

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        seen.append(params.url)
        return types.ElicitResult(action="accept")

    async with sdk_client(live_url, elicitation_callback=on_elicit) as client:
        result = await client.call_tool("modtest_url")
    assert result.content[0].text == "accept" and seen == ["https://example.com/consent"]


async def test_tampered_state_refused(live_url: str) -> None:
    async with sdk_client(live_url, **Answers().callbacks()) as client:
        first = await client.session.call_tool(
            "test_input_required_result_tampered_state", {}, allow_input_required=True
        )
        assert first.result_type == "input_required"
        with pytest.raises(MCPError) as info:
            await client.session.call_tool(
                "test_input_required_result_tampered_state",
                {},
                allow_input_required=True,
                input_responses={"confirm": types.ElicitResult(action="accept", content={"ok": True})},
                request_state=first.request_state + "x",
            )
    assert info.value.code == -32602 and info.value.message == "the requestState is not valid"


async def test_token_principal(live_url: str) -> None:
    user = await get_user_model().objects.acreate_user("dora", password="pw")
    token = await Token.objects.acreate(user=user)
    async with sdk_client(live_url, token=token.key, **Answers().callbacks()) as client:
        who = await client.call_tool("whoami")
        swallowed = await client.call_tool("modtest_swallow")
    assert who.structured_content == {"principal": f"auth.user:{user.pk}", "username": "dora"}
    assert swallowed.content[0].text == "go=True"


async def test_discover_and_auto_mode(live_url: str) -> None:
    async with sdk_client(live_url, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        discovered = await client.session.send_discover("2026-07-28")
        listed = await client.list_tools()
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-django-demo"
    assert {t.name for t in listed.tools} >= {"test_simple_text", "echo", "plan_trip"}


async def test_progress_and_logs_reach_the_sdk(live_url: str) -> None:
    progress: list[float] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with sdk_client(live_url, logging_callback=on_log, log_level="info") as client:
        await client.call_tool("test_tool_with_progress", progress_callback=on_progress)
        await client.call_tool("test_tool_with_logging")
    assert progress == [0, 50, 100]
    assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"]
