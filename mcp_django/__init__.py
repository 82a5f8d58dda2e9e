"""mcp-django: a Django project as an MCP server."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AsyncContext",
    "Context",
    "Registry",
    "SyncContext",
    "ToolError",
    "ToolResult",
    "__version__",
    "get_context",
    "mcp",
]

if TYPE_CHECKING:
    from .asks.context import AsyncContext, Context, SyncContext, get_context
    from .content import ToolError, ToolResult
    from .registry import Registry, mcp


# Each lazy name's module, so that importing mcp_django (e.g. from settings or apps.py) does not import Django models.
_LAZY = (
    dict.fromkeys(("mcp", "Registry"), "registry")
    | dict.fromkeys(("Context", "AsyncContext", "SyncContext", "get_context"), "asks.context")
    | dict.fromkeys(("ToolError", "ToolResult"), "content")
)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(name)
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
