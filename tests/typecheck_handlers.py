"""Handlers checked by mypy (``make typecheck``), never run: the typing of ``ctx`` and the decorators.

Each ``# type: ignore[code]`` below marks a mistake mypy must report; with
``warn_unused_ignores`` on, ``make typecheck`` fails as soon as one is no longer
reported (the typing regressed), and so does any unexpected error elsewhere.
"""

from __future__ import annotations

import asyncio

from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest

from mcp_django import Context, SyncContext, mcp
from mcp_django.asks import ElicitResult, MissingCapability
from mcp_django.asks.context import get_context
from mcp_django.testing import MCPClient, Result

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@mcp.tool()
async def forgot_await(ctx: Context) -> str:
    # The mistake that deleted data: a coroutine is always true.
    if not ctx.confirm("Delete all?"):  # type: ignore[truthy-bool]
        return "kept"
    name = ctx.elicit("Name?", NAME).data  # type: ignore[attr-defined]
    return f"deleted for {name}"


@mcp.tool
async def awaited(ctx: Context, count: int) -> str:
    if not await ctx.confirm("Delete all?"):
        return "kept"
    form: ElicitResult = await ctx.elicit("Name?", NAME)
    ok, reply = await asyncio.gather(ctx.confirm("Sure?"), ctx.sample("Summarise"))
    try:
        roots = await ctx.list_roots()
    except MissingCapability as exc:
        return f"no roots: {exc.capabilities}"
    return f"{count} {form.action} {ok and reply.text} {len(roots)}"


@mcp.tool()
def sync_handler(ctx: SyncContext, item: str) -> str:
    # A sync handler's asks return the answers themselves.
    if not ctx.confirm(f"Buy {item}?"):
        return "not bought"
    ctx.state["item"] = item
    ctx.state["count"] = 3  # type: ignore[assignment]
    return ctx.elicit("Deliver to?", NAME).action


async def callers(ctx: Context) -> None:
    # The decorators keep the signature: a wrong argument is still a type error.
    await awaited(ctx, 3)
    await awaited(ctx, "3")  # type: ignore[arg-type]
    sync_handler(ctx, item=1)  # type: ignore[arg-type]


def client_calls(user: AbstractBaseUser, ctx: SyncContext) -> None:
    # The test client's public API is typed: a user, a result, the replay guard's findings.
    result: Result = MCPClient(user=user).call_tool("awaited", {"count": 3})
    fixes = [write.fix.upper() for write in result.unsafe_writes]
    MCPClient(user="alice")  # type: ignore[arg-type]
    tools: list[dict[str, object]] = MCPClient().list_tools()
    # A request's JSON-RPC id is a string or an integer, never None.
    ctx.request_id + 1  # type: ignore[operator]
    print(fixes, tools, get_context(HttpRequest()))
