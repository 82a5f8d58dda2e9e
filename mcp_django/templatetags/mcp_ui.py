"""``{% load mcp_ui %}``: the MCP Apps extension's tags (mcp_django/mcp_ui/render.py),
here because Django looks for tag libraries in an installed app's ``templatetags`` package."""

from ..mcp_ui.render import register

__all__ = ["register"]
