"""Asks that cannot be misused, and one behaviour on every revision, through the official SDK client.

- an ask that was not awaited refuses to be a boolean (or compared, iterated): nothing after it runs;
- parallel branches that query the database before asking share one round;
- ``ctx.state`` holds strings only, on every revision;
- a missing capability is an exception the handler may catch; uncaught, -32021 names every one missing;
- ``inputResponses`` without a ``requestState`` answer nothing (see test_modern_rounds).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp.types as types
import pytest
from django.contrib.auth import get_user_model
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

import tests.asks_tools as tools
from tests.conftest import mcp_settings

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

MODES = ["2026-07-28", "legacy"]


class Seen:
    """What the SDK client saw: the tools/call POSTs (each round of 2026-07-28 is one) and the questions."""

    def __init__(self) -> None:
        self.calls = 0
        self.elicited: list[str] = []


async def _yes(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


@contextlib.asynccontextmanager
async def client(url: str, mode: str, **callbacks: Any) -> AsyncIterator[tuple[Any, Seen]]:
    seen = Seen()

    async def count(request: httpx2.Request) -> None:
        if request.headers.get("mcp-method") == "tools/call" or (
            mode == "legacy" and b'"tools/call"' in (request.content or b"")
        ):
            seen.calls += 1

    elicit = callbacks.pop("elicitation_callback", None)
    if elicit is not None:

        async def on_elicit(ctx: Any, params: Any) -> Any:
            seen.elicited.append(params.message)
            return await elicit(ctx, params)

        callbacks["elicitation_callback"] = on_elicit
    async with httpx2.AsyncClient(event_hooks={"request": [count]}, timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **callbacks) as sdk:
            yield sdk, seen


def text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    return result.content[0].text


@pytest.fixture(autouse=True)
def _reset() -> None:
    tools.runs.clear()
    tools.DELETED.clear()


# -- an ask that was not awaited ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_forgotten_await_never_deletes(live_url: str, mode: str, caplog: Any) -> None:
    caplog.set_level(logging.ERROR, logger="mcp_django")
    async with client(live_url, mode, elicitation_callback=_yes) as (sdk, seen):
        result = await sdk.call_tool("askstest_forgot_await")
    assert result.is_error
    assert tools.DELETED == []  # the code after `if not ctx.confirm(...)` never ran
    assert seen.elicited == []  # and nothing was asked either: the mistake is loud, at once
    assert tools.runs["forgot_await"] == 1
    assert "`await ctx.confirm(...)`" in caplog.text and "TypeError" in caplog.text


@pytest.mark.parametrize("how", ["compare", "iterate", "attribute"])
async def test_other_misuses_raise_type_error(live_url: str, how: str) -> None:
    async with client(live_url, "2026-07-28", elicitation_callback=_yes) as (sdk, _):
        out = text(await sdk.call_tool("askstest_misuse", {"how": how}))
    assert out.startswith("TypeError: ") and "without being awaited" in out, out


@pytest.mark.parametrize("mode", MODES)
async def test_awaited_asks_still_work_in_gather_and_taskgroup(live_url: str, mode: str) -> None:
    async with client(live_url, mode, elicitation_callback=_yes) as (sdk, _):
        assert text(await sdk.call_tool("askstest_awaited")) == "True-True-True"


def test_asking_refuses_every_stand_in_use() -> None:
    from mcp_django.asks.context import Asking

    async def answer() -> bool:
        return True

    for use in (bool, lambda a: a == 1, lambda a: a < 1, list, len, lambda a: 1 in a, lambda a: a[0]):
        asking = Asking(answer(), "confirm")
        with pytest.raises(TypeError, match=r"await ctx\.confirm"):
            use(asking)
    asking = Asking(answer(), "confirm")
    assert {asking: 1}[asking] == 1  # hashable: asyncio.gather keys its arguments
    assert asking.cr_code is not None and "confirm" in repr(asking)  # introspection still works
    with pytest.raises(StopIteration) as done:
        asking.send(None)
    assert done.value.value is True


# -- parallel asks share one round ----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_ten_branches_that_query_first_ask_in_one_round(live_url: str, mode: str) -> None:
    await get_user_model().objects.acreate_user("refunds", password="pw")
    async with client(live_url, mode, elicitation_callback=_yes) as (sdk, seen):
        out = text(await sdk.call_tool("askstest_refunds", {"count": 10}))
    assert out == "10 of 10 refunded"
    assert sorted(seen.elicited) == sorted(f"Refund order {i} of refunds?" for i in range(10))
    if mode == "legacy":
        assert (seen.calls, tools.runs["refunds"]) == (1, 1)
    else:
        assert (seen.calls, tools.runs["refunds"]) == (2, 2)  # one round: asked, then answered


async def test_first_round_holds_every_branch(raw: Any) -> None:
    await get_user_model().objects.acreate_user("refunds", password="pw")
    import anyio

    first = (await anyio.to_thread.run_sync(lambda: raw.call("askstest_refunds", {"count": 10}))).json()
    assert set(first["result"]["inputRequests"]) == {f"refund-{i}" for i in range(10)}


async def test_yielding_nested_and_quiet_branches_share_the_round(live_url: str) -> None:
    async with client(live_url, "2026-07-28", elicitation_callback=_yes) as (sdk, seen):
        assert text(await sdk.call_tool("askstest_nested")) == "True/TrueTrue/q"
    assert seen.calls == 2 and sorted(seen.elicited) == ["a?", "x?", "y?"]


async def test_a_branch_slower_than_the_bound_asks_in_the_next_round(live_url: str) -> None:
    # The slow branch cannot ask until the client has been asked "Fast?", which happens only
    # once round 1 has ended: so round 1 ended at the bound without it, however loaded the
    # machine (no clock decides the order).
    async def release_after_fast(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if params.message == "Fast?":
            tools.slow_branch_released.set()
        return await _yes(ctx, params)

    tools.slow_branch_released.clear()
    try:
        with mcp_settings(ROUND_GATHER_TIMEOUT=0.2):
            async with client(live_url, "2026-07-28", elicitation_callback=release_after_fast) as (sdk, seen):
                assert text(await sdk.call_tool("askstest_slow_branch")) == "True-True"
    finally:
        tools.slow_branch_released.clear()
    # Round 1 ends at the bound with the fast ask; the slow one comes in round 2.
    assert seen.calls == 3 and seen.elicited == ["Fast?", "Slow?"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_task_made_of_an_ask_has_a_repr(live_url: str, mode: str) -> None:
    # asyncio's task repr tests the task's coroutine for truth: a task made of an ask
    # runs the ask's own coroutine, so logging such a task never raises.
    async with client(live_url, mode, elicitation_callback=_yes) as (sdk, _):
        assert text(await sdk.call_tool("askstest_task_repr")) == "True: <Task pending"


async def test_a_single_branch_does_not_wait_for_the_bound(live_url: str) -> None:
    with mcp_settings(ROUND_GATHER_TIMEOUT=30):
        async with client(live_url, "2026-07-28", elicitation_callback=_yes) as (sdk, seen):
            started = time.monotonic()
            assert text(await sdk.call_tool("askstest_single")) == "yes"
            elapsed = time.monotonic() - started
    assert seen.calls == 2 and elapsed < 10  # far below the 30 s bound


# -- ctx.state holds strings ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["bool", "dict", "update", "ior", "setdefault", "replace", "key"])
async def test_state_refuses_non_strings_on_every_revision(live_url: str, mode: str, how: str) -> None:
    async with client(live_url, mode, elicitation_callback=_yes) as (sdk, seen):
        out = text(await sdk.call_tool("askstest_state", {"how": how}))
    assert out.startswith("TypeError: ctx.state") and seen.elicited == [], out


@pytest.mark.parametrize("mode", MODES)
async def test_string_state_survives_the_rounds(live_url: str, mode: str) -> None:
    async with client(live_url, mode, elicitation_callback=_yes) as (sdk, _):
        out = text(await sdk.call_tool("askstest_state", {"how": "fine"}))
    # 2026-07-28: "before" was set on both attempts, and carried between them in requestState.
    expected = "xx" if mode != "legacy" else "x"
    assert out == f"stored {{'fine': 'yes', 'before': '{expected}'}} go=True"


# -- missing capabilities -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_missing_capability_can_be_caught(live_url: str, mode: str) -> None:
    async with client(live_url, mode) as (sdk, _):  # no callbacks: no capabilities
        assert text(await sdk.call_tool("askstest_fallback")) == "fallback (-32021: sampling)"


ALL_THREE = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("askstest_needs_all", {"how": "gather"}),
        ("askstest_needs_all", {"how": "taskgroup"}),
        ("askstest_sync_needs_all", {}),
    ],
)
async def test_uncaught_missing_capability_names_all_of_them(
    live_url: str, mode: str, tool: str, arguments: dict[str, Any]
) -> None:
    async with client(live_url, mode) as (sdk, _):
        with pytest.raises(MCPError) as info:
            await sdk.call_tool(tool, arguments)
    assert info.value.code == -32021
    assert info.value.data == {"requiredCapabilities": ALL_THREE}


@pytest.mark.parametrize("mode", MODES)
async def test_only_the_missing_capabilities_are_named(live_url: str, mode: str) -> None:
    async with client(live_url, mode, elicitation_callback=_yes) as (sdk, _):
        with pytest.raises(MCPError) as info:
            await sdk.call_tool("askstest_needs_all")
    assert info.value.code == -32021
    assert info.value.data == {"requiredCapabilities": {"sampling": {}, "roots": {}}}


# -- decorators -----------------------------------------------------------------------------


def test_decorators_without_parentheses_register_or_refuse_clearly() -> None:
    from mcp_django.registry import Registry

    registry = Registry()

    @registry.tool
    async def bare(count: int) -> int:
        """Counts."""
        return count

    @registry.prompt
    def topic(subject: str) -> str:
        return subject

    assert bare.__name__ == "bare" and registry.tools["bare"].func is bare  # the function itself, unchanged
    assert registry.tools["bare"].input_schema["properties"]["count"]["type"] == "integer"
    assert registry.prompts["topic"].func is topic
    with pytest.raises(TypeError, match=r"@mcp\.resource\('app://\.\.\.'\)"):

        @registry.resource  # type: ignore[arg-type]
        def nowhere() -> str:
            return ""

    assert not registry.resources and not registry.templates
