"""Tools registered only for the tests of the 2026-07-28 engine (prefix modtest_)."""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from typing import Any

from mcp_django import Context, SyncContext, mcp
from mcp_django.asks import confirm, sample

runs: Counter[str] = Counter()
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@mcp.tool()
async def modtest_gather(ctx: Context) -> str:
    """Two asks in parallel: one round."""
    runs["gather"] += 1
    name, reply = await asyncio.gather(ctx.elicit("Name?", NAME, key="name"), ctx.sample("Hi?", key="model"))
    return f"{name.data['name']}/{reply.text}"


@mcp.tool()
async def modtest_taskgroup(ctx: Context) -> str:
    """Asks in a TaskGroup share one round too."""
    async with asyncio.TaskGroup() as group:
        a = group.create_task(ctx.confirm("First?", key="first"))
        b = group.create_task(ctx.confirm("Second?", key="second"))
    return f"{a.result()}-{b.result()}"


@mcp.tool()
async def modtest_swallow(ctx: Context) -> str:
    """A handler that catches Exception around its ask must not swallow the end of the attempt."""
    runs["swallow"] += 1
    try:
        ok = await ctx.confirm("Go?", key="go")
    except Exception:
        return "swallowed"
    return f"go={ok}"


@mcp.tool()
def modtest_sync_swallow(ctx: SyncContext) -> str:
    """The same in a sync handler (where the ask raises to end the attempt)."""
    try:
        ok = ctx.confirm("Go?", key="go")
    except Exception:
        return "swallowed"
    return f"go={ok}"


@mcp.tool()
def modtest_sync_multi(ctx: SyncContext, item: str) -> str:
    """A sync handler asking two things at once, then one more, with state between attempts."""
    runs["sync_multi"] += 1
    ctx.state["attempts"] = str(int(ctx.state.get("attempts", "0")) + 1)
    ok, reply = ctx.ask_all(confirm(f"Buy {item}?"), sample(f"Describe {item}"))
    if not ok:
        return "not bought"
    name = ctx.elicit("Deliver to?", NAME)
    return f"{item} for {name.data['name']}: {reply.text} (attempt {ctx.state['attempts']})"


@mcp.tool()
async def modtest_question(ctx: Context, wording: str) -> str:
    """The ask's question depends on the arguments: a stale answer must not be reused."""
    return "yes" if await ctx.confirm(wording, key="q") else "no"


@mcp.tool()
async def modtest_rounds(ctx: Context, n: int) -> str:
    """n sequential rounds."""
    for i in range(n):
        await ctx.confirm(f"Round {i}?", key=f"r{i}")
    return f"{n} rounds"


@mcp.tool()
async def modtest_url(ctx: Context) -> str:
    """A URL-mode elicitation."""
    result = await ctx.elicit_url("Sign in", "https://example.com/consent", key="consent")
    return result.action


@mcp.tool()
async def modtest_optional(ctx: Context) -> str:
    """Checks the capability first and does without when it is missing."""
    if not ctx.supports("elicitation"):
        return "no elicitation: used the default"
    result = await ctx.elicit("Name?", NAME, key="name")
    return result.data["name"] if result else "declined"


@mcp.tool()
async def modtest_twice(ctx: Context) -> str:
    """The same question twice gets two keys, deterministically."""
    a = await ctx.confirm("Sure?")
    b = await ctx.confirm("Sure?")
    return f"{a},{b}"


@mcp.tool()
async def modtest_dataclass_elicit(ctx: Context) -> dict[str, Any]:
    from dataclasses import dataclass

    @dataclass
    class Address:
        street: str
        zip_code: int

    result = await ctx.elicit("Address?", Address, key="address")
    return {"action": result.action, "data": result.data}


@mcp.tool()
async def modtest_notify(ctx: Context) -> str:
    await ctx.info("hello log")
    await ctx.debug("debug log")
    await ctx.error("error log", logger="modtest")
    return "done"


@mcp.prompt()
async def modtest_prompt(ctx: Context, topic: str) -> str:
    """A prompt that asks first."""
    tone = await ctx.elicit(
        "Tone?", {"type": "object", "properties": {"tone": {"type": "string"}}, "required": ["tone"]}, key="tone"
    )
    return f"Write about {topic} in a {tone.data['tone']} tone."


@mcp.resource("modtest://secret/{name}", mime_type="text/plain")
async def modtest_resource(ctx: Context, name: str) -> str:
    """A resource that confirms before it is read."""
    if not await ctx.confirm(f"Read {name}?", key="read"):
        return "refused"
    return f"secret {name}"


WORDING = {"text": "Proceed?"}


@mcp.tool()
async def modtest_stale(ctx: Context) -> str:
    """The question comes from outside the arguments (like data that changed between rounds)."""
    return "yes" if await ctx.confirm(WORDING["text"], key="proceed") else "no"


class Marker:
    """Something an attempt's frame holds: once the attempt is over it must be freed by reference counting."""


# Weak references to each attempt's Marker, oldest first.
markers: list[weakref.ref[Marker]] = []


@mcp.tool()
async def modtest_marked(ctx: Context) -> str:
    """Holds a Marker in its frame while it waits for an answer."""
    marker = Marker()
    markers.append(weakref.ref(marker))
    await ctx.confirm("Keep going?", key="keep")
    return "done"


@mcp.tool()
async def modtest_cleanup(ctx: Context) -> str:
    """Its finally must run when an attempt ends at an unanswered ask."""
    try:
        await ctx.confirm("Keep going?", key="keep")
    finally:
        runs["cleanup"] += 1
    return "done"


@mcp.tool()
async def modtest_asks_while_unwinding(ctx: Context) -> str:
    """Catches the end of its attempt at the first ask and asks again: that ask is too late."""
    try:
        await ctx.confirm("First?", key="first")
    except asyncio.CancelledError:
        try:
            await ctx.confirm("Late?", key="late")
        except RuntimeError:
            runs["late ask refused"] += 1
        raise
    return "done"


@mcp.tool()
async def modtest_async_cleanup(ctx: Context) -> str:
    """Its cleanup awaits something after the attempt ended at its first ask."""
    try:
        await ctx.confirm("Keep going?", key="keep")
    finally:
        await asyncio.sleep(0.01)
        runs["async cleanup"] += 1
    return "done"


@mcp.tool()
async def modtest_gather_two(ctx: Context) -> str:
    """Two asks in one round through asyncio.gather (tasks the host's factory may start eagerly)."""
    first, second = await asyncio.gather(ctx.confirm("One?", key="one"), ctx.confirm("Two?", key="two"))
    return f"{first}-{second}"


@mcp.tool()
def modtest_unserializable():  # type: ignore[no-untyped-def]
    """Returns a value with no JSON form (a bug of the tool's)."""
    return object()
