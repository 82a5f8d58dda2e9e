"""Test your tools, prompts and resources in process: ``MCPClient`` and friends.

    from mcp_django.testing import MCPClient

    client = MCPClient(user=alice)
    result = client.call_tool("refund_order", {"order_id": 3}, answer=lambda req: True)
    assert result.text == "refunded" and len(result.rounds) == 1

See docs/testing.md. ``host_thread`` (with ``HostThread``), ``mcp_django.signals.observer`` and
``mcp_django.audit.inline`` are the seams the client plugs in through: any harness of your own
may set them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .inprocess.answers import Answer, InputRequest, NoAnswer, accept, cancel, decline, error, raw
from .inprocess.client import (
    InputRoundsExceeded,
    JSONRPCError,
    MCPClient,
    ReplayGuardWarning,
    ReplayUnsafeWrite,
    Result,
    Round,
)
from .lifecycle import HostThread, host_thread

if TYPE_CHECKING:
    from .inprocess.httpx_transport import HttpxTransport


def __getattr__(name: str) -> object:
    # Imported on first use: it needs httpx, which only tests need.
    if name == "HttpxTransport":
        from .inprocess.httpx_transport import HttpxTransport

        return HttpxTransport
    raise AttributeError(name)


__all__ = [
    "Answer",
    "HostThread",
    "HttpxTransport",
    "InputRequest",
    "InputRoundsExceeded",
    "JSONRPCError",
    "MCPClient",
    "NoAnswer",
    "ReplayGuardWarning",
    "ReplayUnsafeWrite",
    "Result",
    "Round",
    "accept",
    "cancel",
    "decline",
    "error",
    "host_thread",
    "raw",
]
