"""mcp-django: a Django project as an MCP server."""

from __future__ import annotations

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


def __getattr__(name: str) -> Any:
    # Lazy, so that importing mcp_django (e.g. from settings or apps.py) does not import Django models.
    if name in ("mcp", "Registry"):
        from . import registry

        return getattr(registry, name)
    if name in ("Context", "AsyncContext", "SyncContext", "get_context"):
        from .asks import context

        return getattr(context, name)
    if name in ("ToolError", "ToolResult"):
        from . import content

        return getattr(content, name)
    raise AttributeError(name)
