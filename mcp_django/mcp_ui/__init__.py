"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865): interactive views for tools, rendered
from Django templates (docs/apps.md). Named after the extension's identifier: in Django, "apps"
and "views" mean other things. Left out of ``MCP_DJANGO["EXTENSIONS"]``, none of it is there.
"""

from __future__ import annotations

from .views import EXTENSION, MIME_TYPE, View, view

__all__ = ["EXTENSION", "MIME_TYPE", "View", "view"]
