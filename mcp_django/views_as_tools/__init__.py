"""Existing Django and DRF views served as MCP tools (``mcp.register_view``, docs/views.md).

Each action of a viewset, or HTTP method of another view, becomes a tool whose call runs the real,
unpatched view on a request of its own (its method, URL, query and body; the MCP principal as its
user), so the view's permissions, throttles, filters and pagination apply as on its REST URL.
"""

from .tools import ViewReference, ViewTool, clip_name, view_tools

__all__ = ["ViewReference", "ViewTool", "clip_name", "view_tools"]
