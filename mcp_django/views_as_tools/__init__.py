"""Existing Django and DRF views served as MCP tools.

``mcp.register_view(OrderViewSet)`` turns each action of a viewset (or each
HTTP method of an ``APIView``, a generic view, or a plain Django view) into a
tool. A call runs the *real* view: a fresh ``HttpRequest`` is built for it
(method, the view's own URL when it can be reversed, a query string for reads,
a JSON body for writes), its user is the MCP principal, and the view is called
through ``as_view()``. Nothing about the view class is patched, so its
permission classes, throttles, filter backends, per-user querysets and
pagination apply exactly as they do on its REST URL, which keeps working
unchanged beside the tool.

Why a new request rather than the MCP request itself: the view must see the
method, path, query and body of the operation it serves, not a JSON-RPC POST
to ``/mcp``. Authentication has already happened on the MCP endpoint, so the
new request carries the principal through DRF's ``force_authenticate``, and no
credentials are re-checked or copied.
"""

from .lazy import ViewReference
from .tools import ViewTool, view_tools
from .view_styles import clip_name

__all__ = ["ViewReference", "ViewTool", "clip_name", "view_tools"]
