"""Tools for the tracing tests (prefix tracetest_)."""

from __future__ import annotations

import threading

from django.contrib.auth.models import User
from opentelemetry import trace

from mcp_django import Context, SyncContext, mcp

# What the handlers saw, for the tests to compare with the exported spans.
seen: dict[str, str] = {}


@mcp.tool()
def tracetest_echo(text: str) -> str:
    """A sync tool; its argument must never appear on a span."""
    return f"echo {len(text)}"


@mcp.tool()
def tracetest_manual(label: str) -> str:
    """A sync tool with a span of its own around an ORM query, as a project's code would make."""
    with trace.get_tracer("tests.tracing").start_as_current_span("tracetest.work") as span:
        span.set_attribute("tracetest.users", User.objects.count())
        seen["thread"] = threading.current_thread().name
    return label


@mcp.tool()
async def tracetest_amanual() -> str:
    """The same in an async tool: its span joins the call's in the handler's task."""
    with trace.get_tracer("tests.tracing").start_as_current_span("tracetest.awork"):
        await User.objects.acount()
    return "done"


@mcp.tool()
async def tracetest_ask(ctx: Context, secret: str) -> str:
    """Two sequential asks: two rounds on 2026-07-28, two live asks on a legacy session."""
    first = await ctx.confirm("First?", key="first")
    second = await ctx.confirm("Second?", key="second")
    return f"{first}-{second}-{len(secret)}"


@mcp.tool()
def tracetest_ask_sync(ctx: SyncContext, secret: str) -> str:
    """One ask from a sync handler: on a legacy session it waits in the worker thread."""
    return f"{ctx.confirm('Go?', key='go')}-{len(secret)}"
