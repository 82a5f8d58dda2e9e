"""Tools for the tests of the asks' safety and of one behaviour on every revision (prefix askstest_)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from mcp_django import Context, SyncContext, mcp
from mcp_django.asks import MissingCapability, confirm, elicit, list_roots, sample

runs: Counter[str] = Counter()
# askstest_slow_branch's slow branch asks only once this is set (by the test, from another thread).
slow_branch_released = threading.Event()
DELETED: list[str] = []
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@mcp.tool()
async def askstest_forgot_await(ctx: Context) -> str:
    """The classic mistake: the await is missing, so a coroutine would be truthy."""
    runs["forgot_await"] += 1
    if not ctx.confirm("Delete all?"):  # type: ignore[truthy-bool]
        return "kept"
    DELETED.append("all")
    return "deleted"


@mcp.tool()
async def askstest_misuse(ctx: Context, how: str) -> str:
    """Other uses of an ask that was not awaited."""
    asking: Any = ctx.list_roots() if how == "iterate" else ctx.elicit("Name?", NAME)
    try:
        if how == "compare":
            _ = asking == "accept"
        elif how == "iterate":
            _ = [root for root in asking]
        elif how == "attribute":
            _ = asking.data
    except TypeError as exc:
        return f"TypeError: {exc}"
    return "no error"


@mcp.tool()
async def askstest_awaited(ctx: Context) -> str:
    """The same asks, awaited, in a gather and a TaskGroup: they still work."""
    first, second = await asyncio.gather(ctx.confirm("First?", key="a"), ctx.confirm("Second?", key="b"))
    async with asyncio.TaskGroup() as group:
        third = group.create_task(ctx.confirm("Third?", key="c"))
    return f"{first}-{second}-{third.result()}"


async def _order(ctx: Context, i: int) -> bool:
    # Each branch loads its row before asking: an ORM query, or sync code in a thread.
    users = get_user_model().objects
    if i % 2:
        user = await users.aget(username="refunds")
    else:
        user = await sync_to_async(users.get)(username="refunds")
    return await ctx.confirm(f"Refund order {i} of {user.username}?", key=f"refund-{i}")


@mcp.tool()
async def askstest_task_repr(ctx: Context) -> str:
    """A task made of an ask (create_task, ensure_future, TaskGroup, gather) can be logged."""
    task = asyncio.ensure_future(ctx.confirm("Repr?", key="repr"))
    shown = repr(task)
    return f"{await task}: {shown[:13]}"


@mcp.tool()
async def askstest_refunds(ctx: Context, count: int = 10) -> str:
    """`count` branches, each querying the database before its ask: one round."""
    runs["refunds"] += 1
    answers = await asyncio.gather(*(_order(ctx, i) for i in range(count)))
    return f"{sum(answers)} of {count} refunded"


@mcp.tool()
async def askstest_nested(ctx: Context) -> str:
    """Branches that yield first, a TaskGroup in a branch, a branch that never asks."""

    async def after_sleep(key: str) -> bool:
        await asyncio.sleep(0)
        # Each branch wakes at its own time, so no two asks come in the same loop turn.
        await asyncio.sleep({"a": 0.02, "x": 0.06, "y": 0.1}[key])
        return await ctx.confirm(f"{key}?", key=key)

    async def group() -> str:
        async with asyncio.TaskGroup() as tg:
            x = tg.create_task(after_sleep("x"))
            y = tg.create_task(after_sleep("y"))
        return f"{x.result()}{y.result()}"

    async def quiet() -> str:
        await asyncio.sleep(0.05)
        return "q"

    a, b, c = await asyncio.gather(after_sleep("a"), group(), quiet())
    return f"{a}/{b}/{c}"


@mcp.tool()
async def askstest_slow_branch(ctx: Context) -> str:
    """A branch slower than ROUND_GATHER_TIMEOUT asks in a later round: it waits until the
    test releases it (once the client has been asked the fast branch's question)."""

    async def slow() -> bool:
        # Polled, not awaited on the thread: the end of the attempt cancels this branch.
        while not slow_branch_released.is_set():
            await asyncio.sleep(0.01)
        return await ctx.confirm("Slow?", key="slow")

    fast, late = await asyncio.gather(ctx.confirm("Fast?", key="fast"), slow())
    return f"{fast}-{late}"


@mcp.tool()
async def askstest_single(ctx: Context) -> str:
    """One branch: the attempt ends as soon as the ask parks."""
    await asyncio.sleep(0)
    return "yes" if await ctx.confirm("Single?", key="single") else "no"


@mcp.tool()
async def askstest_state(ctx: Context, how: str) -> str:
    """Non-string state values are refused at once."""
    try:
        if how == "bool":
            ctx.state["flag"] = False  # type: ignore[assignment]
        elif how == "dict":
            ctx.state["data"] = {"a": 1}  # type: ignore[assignment]
        elif how == "update":
            ctx.state.update(count=3)  # type: ignore[arg-type]
        elif how == "setdefault":
            ctx.state.setdefault("n", 1)  # type: ignore[arg-type]
        elif how == "ior":
            ctx.state |= {"n": 1}  # type: ignore[dict-item]
        elif how == "replace":
            ctx.state = {"n": 1}  # type: ignore[dict-item]
        elif how == "key":
            ctx.state[1] = "one"  # type: ignore[index]
        else:
            ctx.state["fine"] = "yes"
    except TypeError as exc:
        return f"TypeError: {exc}"
    ctx.state["before"] = ctx.state.get("before", "") + "x"
    ok = await ctx.confirm("Go?", key="go")
    return f"stored {dict(ctx.state)} go={ok}"


@mcp.tool()
async def askstest_fallback(ctx: Context) -> str:
    """Does without the model when the client cannot sample."""
    try:
        reply = await ctx.sample("Summarise the order", key="summary")
    except MissingCapability as exc:
        return f"fallback ({exc.code}: {','.join(exc.capabilities)})"
    return f"model: {reply.text}"


@mcp.tool()
async def askstest_needs_all(ctx: Context, how: str = "gather") -> str:
    """Three asks in one round, each needing its own capability."""
    asks = (ctx.elicit("Name?", NAME, key="name"), ctx.sample("Hi?", key="hi"), ctx.list_roots(key="roots"))
    if how == "taskgroup":
        async with asyncio.TaskGroup() as group:
            for ask in asks:
                group.create_task(ask)
        return "all answered"
    await asyncio.gather(*asks)
    return "all answered"


@mcp.tool()
def askstest_sync_needs_all(ctx: SyncContext) -> str:
    """A sync handler's ask_all names every missing capability too."""
    ctx.ask_all(elicit("Name?", NAME, key="name"), sample("Hi?", key="hi"), list_roots(key="roots"))
    return "all answered"


# -- every shape of parallel asks (tests/test_parallel_asks.py) -------------------------------


async def _branch(ctx: Context, kind: str, key: str) -> bool:
    """One branch: it asks at once, after a loop turn, or after a database query in a thread."""
    if kind == "sleep":
        await asyncio.sleep(0)
    elif kind == "db":
        await sync_to_async(get_user_model().objects.count)()
    elif kind == "orm":
        await get_user_model().objects.acount()
    return await ctx.confirm(f"{key}?", key=key)


@mcp.tool()
async def askstest_shape(ctx: Context, how: str, kinds: list[str]) -> str:
    """One branch per kind, started by `how`: gather, taskgroup, create_task or ask_all (kinds: ask only)."""
    runs["shape"] += 1
    keys = [f"{kind}-{i}" for i, kind in enumerate(kinds)]
    if how == "gather":
        answers = list(await asyncio.gather(*(_branch(ctx, kind, key) for kind, key in zip(kinds, keys, strict=True))))
    elif how == "gather_asks":  # the asks themselves, no coroutine of the handler's around them
        answers = list(await asyncio.gather(*(ctx.confirm(f"{key}?", key=key) for key in keys)))
    elif how == "taskgroup":
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_branch(ctx, kind, key)) for kind, key in zip(kinds, keys, strict=True)]
        answers = [task.result() for task in tasks]
    elif how == "create_task":
        tasks = [asyncio.create_task(_branch(ctx, kind, key)) for kind, key in zip(kinds, keys, strict=True)]
        answers = [await task for task in tasks]
    elif how == "nested":  # a TaskGroup inside one branch of a gather, next to busy branches
        head, *rest = zip(kinds, keys, strict=True)

        async def group() -> list[bool]:
            async with asyncio.TaskGroup() as inner:
                tasks = [inner.create_task(_branch(ctx, kind, key)) for kind, key in rest]
            return [task.result() for task in tasks]

        first, others = await asyncio.gather(_branch(ctx, *head), group())
        answers = [first, *others]
    elif how == "ask_all":
        answers = await ctx.ask_all(*(confirm(f"{key}?", key=key) for key in keys))
    else:
        raise ValueError(how)
    return " ".join(f"{key}={answer}" for key, answer in zip(keys, answers, strict=True))


@mcp.tool()
def askstest_sync_shape(ctx: SyncContext, count: int) -> str:
    """A sync handler's parallel asks: ctx.ask_all."""
    runs["sync_shape"] += 1
    keys = [f"ask-{i}" for i in range(count)]
    answers = ctx.ask_all(*(confirm(f"{key}?", key=key) for key in keys))
    return " ".join(f"{key}={answer}" for key, answer in zip(keys, answers, strict=True))


@mcp.tool()
async def askstest_depends(ctx: Context) -> str:
    """A branch that waits for another branch's answer before it asks: it can only ask in a later round."""
    answered = asyncio.Event()

    async def first() -> bool:
        ok = await ctx.confirm("First?", key="first")
        answered.set()
        return ok

    async def second() -> bool:
        await answered.wait()
        return await ctx.confirm("Second?", key="second")

    a, b = await asyncio.gather(first(), second())
    return f"{a}-{b}"


class HostHooks:
    """Set by tests/test_parallel_asks.py: what the host does on its loop while a handler runs."""

    def __init__(self) -> None:
        self.handler_running = asyncio.Event()
        self.host_looked = asyncio.Event()


host_hooks: HostHooks | None = None


@mcp.tool()
async def askstest_host_loop(ctx: Context) -> str:
    """Two branches; the second asks only once the host (a task of its own) has looked at the loop."""
    hooks = host_hooks
    assert hooks is not None

    async def second() -> bool:
        await hooks.host_looked.wait()
        return await ctx.confirm("Second?", key="second")

    hooks.handler_running.set()
    a, b = await asyncio.gather(ctx.confirm("First?", key="first"), second())
    return f"{a}-{b}"
