"""``{% load mcp_ui %}``: the MCP Apps extension's tags (mcp_django/mcp_ui/templatetags.py),
here because Django looks for tag libraries in an installed app's ``templatetags`` package."""

from ..mcp_ui.templatetags import register

__all__ = ["register"]
