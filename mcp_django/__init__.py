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

# Lazy, so that importing mcp_django (from settings or apps.py) does not import Django models.
_LAZY = {
    "mcp": "registry",
    "Registry": "registry",
    "Context": "asks.context",
    "AsyncContext": "asks.context",
    "SyncContext": "asks.context",
    "get_context": "asks.context",
    "ToolError": "content",
    "ToolResult": "content",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(f".{module}", __name__), name)
