"""Existing Django and DRF views served as MCP tools (``mcp.register_view``, docs/views.md): each
call runs the real, unpatched view on a request of its own, the MCP principal as its user."""

from .tools import ViewReference, ViewTool, clip_name, view_tools

__all__ = ["ViewReference", "ViewTool", "clip_name", "view_tools"]
