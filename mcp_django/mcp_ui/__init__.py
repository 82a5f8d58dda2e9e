"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865): interactive views for tools, rendered
from Django templates (docs/apps.md).

Named ``mcp_ui`` after the extension's identifier, and not "apps": in a Django project "apps"
are ``INSTALLED_APPS`` and ``AppConfig``, and "views" are Django's views, neither of which this
is. ``views`` keeps the registered views and the tool options, ``render`` turns a view's
template into one self-contained HTML document, ``origins`` reads what that document loads,
``methods`` plugs the extension into :mod:`mcp_django.extensions` and ``checks`` reports a view
that cannot be served. Left out of ``MCP_DJANGO["EXTENSIONS"]``, none of it is there.
"""

from __future__ import annotations

from .views import EXTENSION, MIME_TYPE, View, view

__all__ = ["EXTENSION", "MIME_TYPE", "View", "view"]
