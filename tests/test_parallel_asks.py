"""Parallel asks share one round however the handler starts them, and the host's loop stays the host's.

Every shape (``asyncio.gather`` of asks or of branches, a ``TaskGroup``, ``create_task``,
``ctx.ask_all``, a TaskGroup inside a branch), with branches that ask at once, after a loop
turn, or after a database query (in a thread, or through the async ORM): under 2026-07-28 one
``input_required`` round holds every ask; on a legacy revision the asks are requests the client
holds at the same time. The client proves it: it answers none of the questions until it has
all of them, so asks that came one after the other would never be answered.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import mcp.types as types
import pytest

import tests.asks_tools as tools
from tests.conftest import mcp_settings
from tests.test_asks_safety import MODES, client, text

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _reset() -> None:
    tools.runs.clear()


class AllAtOnce:
    """An elicitation callback that answers only once ``count`` questions are open together."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.open = 0
        self.everything_asked = anyio.Event()

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.open += 1
        if self.open == self.count:
            self.everything_asked.set()
        # Only a failing test waits this long: a question that never comes.
        with anyio.fail_after(30):
            await self.everything_asked.wait()
        return types.ElicitResult(action="accept", content={"confirm": True})


SHAPES = [
    ("gather_asks", ["ask", "ask", "ask"]),
    ("gather", ["ask", "sleep", "db", "orm"]),
    ("taskgroup", ["ask", "sleep", "db", "orm"]),
    ("create_task", ["ask", "sleep", "db", "orm"]),
    ("nested", ["sleep", "ask", "db", "orm"]),
    ("gather", ["db", "db", "sleep"]),  # no branch asks before a query or a loop turn
    ("ask_all", ["ask", "ask", "ask"]),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("how", "kinds"), SHAPES)
async def test_parallel_asks_share_one_round(live_url: str, mode: str, how: str, kinds: list[str]) -> None:
    keys = [f"{kind}-{i}" for i, kind in enumerate(kinds)]
    # No clock ends the round: only the branches themselves, each parked on its ask.
    with mcp_settings(ROUND_GATHER_TIMEOUT=600):
        async with client(live_url, mode, elicitation_callback=AllAtOnce(len(keys))) as (sdk, seen):
            out = text(await sdk.call_tool("askstest_shape", {"how": how, "kinds": kinds}))
    assert out == " ".join(f"{key}=True" for key in keys)
    assert sorted(seen.elicited) == sorted(f"{key}?" for key in keys)
    # 2026-07-28: one round (asked, then answered, so the handler ran twice); legacy: one run.
    assert (seen.calls, tools.runs["shape"]) == ((1, 1) if mode == "legacy" else (2, 2))


@pytest.mark.parametrize("mode", MODES)
async def test_sync_ask_all_shares_one_round(live_url: str, mode: str) -> None:
    async with client(live_url, mode, elicitation_callback=AllAtOnce(3)) as (sdk, seen):
        out = text(await sdk.call_tool("askstest_sync_shape", {"count": 3}))
    assert out == "ask-0=True ask-1=True ask-2=True"
    assert (seen.calls, tools.runs["sync_shape"]) == ((1, 1) if mode == "legacy" else (2, 2))


async def _yes(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.parametrize("mode", MODES)
async def test_a_branch_waiting_for_another_branchs_answer_asks_next(live_url: str, mode: str) -> None:
    # Why ROUND_GATHER_TIMEOUT stays: the second branch waits for the first one's answer, which
    # under 2026-07-28 comes only in the next request. Nothing the engine can see tells this
    # wait from a slow query; without the bound the first round would never end.
    with mcp_settings(ROUND_GATHER_TIMEOUT=0.2):
        async with client(live_url, mode, elicitation_callback=_yes) as (sdk, seen):
            assert text(await sdk.call_tool("askstest_depends")) == "True-True"
    assert seen.elicited == ["First?", "Second?"]
    assert seen.calls == (1 if mode == "legacy" else 3)


@pytest.mark.django_db
@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_the_hosts_task_factory_stays_in_place_and_is_called(revision: str) -> None:
    from mcp_django.inprocess import serving
    from mcp_django.testing import MCPClient

    loop = serving.event_loop()  # the loop the in-process client serves on: the host's
    made: list[str] = []

    def host_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(getattr(coro, "__qualname__", type(coro).__name__))
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def set_factory(factory: Any) -> None:
        loop.set_task_factory(factory)

    hooks = tools.HostHooks()
    host_done = asyncio.Event()
    seen: dict[str, Any] = {}

    async def host() -> None:
        await hooks.handler_running.wait()
        # The handler is in the middle of its attempt (its first ask parked or about to).
        seen["factory"] = loop.get_task_factory()
        seen["own"] = loop.create_task(host_done.wait(), name="the host's own task")
        await asyncio.sleep(0)
        seen["factory after"] = loop.get_task_factory()
        hooks.host_looked.set()

    asyncio.run_coroutine_threadsafe(set_factory(host_factory), loop).result(10)
    tools.host_hooks = hooks
    try:
        watcher = asyncio.run_coroutine_threadsafe(host(), loop)
        result = MCPClient(revision=revision).call_tool("askstest_host_loop", answer=lambda request: True)
        watcher.result(10)
        assert result.text == "True-True"
        if revision == "2026-07-28":
            assert [sorted(r.keys) for r in result.rounds] == [["first", "second"]]
        assert seen["factory"] is host_factory and seen["factory after"] is host_factory
        assert asyncio.run_coroutine_threadsafe(_factory_of(loop), loop).result(10) is host_factory
        # The host's factory made the handler's tasks too, and its own task lives on, untouched.
        assert any("askstest_host_loop" in name for name in made), made
        assert "Event.wait" in made
        own = seen["own"]
        assert not own.done()
    finally:
        tools.host_hooks = None
        loop.call_soon_threadsafe(host_done.set)
        asyncio.run_coroutine_threadsafe(set_factory(None), loop).result(10)


async def _factory_of(loop: asyncio.AbstractEventLoop) -> Any:
    return loop.get_task_factory()
