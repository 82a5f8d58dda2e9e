"""Pipeline stages and an exception handler as a project writes them (MCP_DJANGO["PIPELINE"],
["EXCEPTION_HANDLER"]), for tests/test_extension_points.py."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_django.asks.call import Call
from mcp_django.pipeline import Answer, exception_handler
from mcp_django.protocol.jsonrpc import MCPError

# What log_calls saw: (transport, era, method, principal), and the clock business_hours reads.
SEEN: list[tuple[str, str, str, str]] = []
NOW: list[datetime.datetime] = []
CLOSED = -32050


def log_calls(call: Call, call_next: Callable[[Call], dict[str, Any]]) -> dict[str, Any]:
    """A sync stage (run in a worker thread): each call's method and principal."""
    SEEN.append((call.transport, str(call.era), call.method, call.principal.label))
    return call_next(call)


async def business_hours(call: Call, call_next: Callable[[Call], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """An async stage: no tool outside 9 to 5 on weekdays."""
    now = NOW[-1] if NOW else datetime.datetime.now()
    if call.method == "tools/call" and not (now.weekday() < 5 and 9 <= now.hour < 17):
        raise MCPError(CLOSED, "tools are served 9 to 5 on weekdays")
    return await call_next(call)


def tagged_errors(exc: Exception, call: Call) -> Answer:
    """The default handler's answer, with a mark of its own in the error's data."""
    status, payload, headers = exception_handler(exc, call)
    payload["error"]["data"] = {**(payload["error"].get("data") or {}), "handledBy": "tests"}
    return status, payload, headers
