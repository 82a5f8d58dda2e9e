"""The template tags of a view's template (``{% load mcp_ui %}``, docs/apps.md), found by Django
as ``mcp_django/templatetags/mcp_ui.py``: ``{% mcp_app_script %}`` (the ext-apps script, the global
``McpApps``) and ``{% mcp_app_inline "shop/order_view.css" %}`` (a static file, inlined).
"""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from . import render

register = template.Library()


@register.simple_tag
def mcp_app_script() -> SafeString:
    return mark_safe(render.inline(render.SCRIPT))  # a static file, its closing tags escaped


@register.simple_tag
def mcp_app_inline(path: str) -> SafeString:
    return mark_safe(render.inline(path))  # a static file, its closing tags escaped
