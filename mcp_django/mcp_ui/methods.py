"""The MCP Apps extension on :mod:`mcp_django.extensions`' points: tool options, ``_meta.ui``, app-only
tools, a text fallback, the views as resources, the capability and the admin's view panel."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from .. import content, extensions
from ..asks.call import Call
from ..asks.invoke import run_in_thread
from ..asks.replay import Outcome
from ..handlers import Handler
from ..protocol.dispatch import HandlerNext
from ..protocol.jsonrpc import INTERNAL_ERROR, MCPError
from . import EXTENSION, MIME_TYPE, View, app_option, render, views, visibility_option

logger = logging.getLogger("mcp_django.mcp_ui")
_HEAD = re.compile(r"<head[^>]*>", re.IGNORECASE)


def register() -> None:
    """Plug the extension in (``MCP_DJANGO["EXTENSIONS"]`` lists ``mcp_django.mcp_ui.methods``)."""
    from . import checks  # noqa: F401 - registers the views' system checks

    extensions.add_tool_option("app", app_option)
    extensions.add_tool_option("visibility", visibility_option)
    extensions.add_handler_filter(callable_by, applies=lambda handler: "visibility" in handler.options)
    extensions.add_descriptor_meta(tool_meta)
    extensions.add_handler_stage(text_fallback, methods={"tools/call"}, applies=lambda tool: "app" in tool.options)
    extensions.declare_extension(EXTENSION, declared)
    extensions.add_resources(listed, read)
    extensions.add_handler_panel(view_panel)


def renders(call: Call) -> bool:
    """Whether the call's client renders views: it declared the extension with its MIME type."""
    mime_types = (extensions.client_extension(call, EXTENSION) or {}).get("mimeTypes")
    return isinstance(mime_types, list) and MIME_TYPE in mime_types


def declared() -> dict[str, Any] | None:
    """The server's settings of the extension, while a view is registered (else not declared)."""
    return {"mimeTypes": [MIME_TYPE]} if views else None


def callable_by(call: Call, handler: Handler) -> bool:
    """An app-only tool is there only for a client that renders views (the view calls it)."""
    return "model" in handler.options["visibility"] or renders(call)


def tool_meta(call: Call, handler: Handler) -> dict[str, Any] | None:
    """A listed tool's ``_meta.ui``, for a client that renders views."""
    options = handler.options
    ui: dict[str, Any] = {"resourceUri": options["app"].uri} if "app" in options else {}
    if "visibility" in options:
        ui["visibility"] = list(options["visibility"])
    return {"ui": ui} if ui and renders(call) else None


def fallback_text(view: View) -> str:
    return (
        f"This result has an interactive view ({view.uri}, MCP Apps) that was not shown: the client did not "
        f"declare the {EXTENSION} extension. The data is above, and in structuredContent."
    )


def text_fallback(next: HandlerNext, handler: Handler, arguments: dict[str, Any], call: Call) -> Awaitable[Outcome]:
    """The handler stage: a tool with a view, called by a client that renders none, says so in its answer."""
    if renders(call):
        return next(handler, arguments, call)  # not a stage of this call: no frame of its own
    return _with_fallback(next, handler, arguments, call, handler.options["app"])


async def _with_fallback(
    next: HandlerNext, handler: Handler, arguments: dict[str, Any], call: Call, view: View
) -> Outcome:
    outcome = await next(handler, arguments, call)
    if outcome.result is not None:
        return outcome  # input_required, or a task: not the tool's answer yet
    try:
        result = content.tool_result(outcome.value)
    except TypeError:
        return outcome  # no JSON form: the dispatcher's tool error says so
    if not result.get("isError"):
        result["content"] = [*result["content"], {"type": "text", "text": fallback_text(view)}]
    return Outcome(result=result)


async def listed() -> list[dict[str, Any]]:
    """Every view, for ``resources/list`` (a host may read them before any tool is called)."""
    return [view.descriptor() for view in views.values()]


async def read(uri: str) -> dict[str, Any] | None:
    """A view's ``resources/read`` contents entry, or None when ``uri`` is no view."""
    view = views.get(uri)
    if view is None:
        return None
    try:
        html = await run_in_thread(render.render, view)
    except render.RENDER_ERRORS as exc:
        # A view that cannot render is the project's mistake (mcp_django.ui.E001 says so at startup).
        logger.error("view %s (template %s) cannot be rendered: %s", uri, view.template, exc)
        raise MCPError(INTERNAL_ERROR, f"view {uri} cannot be rendered") from None
    return {"uri": uri, "mimeType": MIME_TYPE, "text": html, "_meta": {"ui": view.ui_meta()}}


def framed(view: View, html: str) -> str:
    """The page with the policy a host builds from the view's declared origins (the spec's
    construction) as its first ``<meta>``, for a ``srcdoc`` frame."""
    csp = view.csp

    def listed(kind: str, fallback: str = "") -> str:
        return " ".join(csp.get(kind, ())) or fallback

    resources = listed("resourceDomains")
    frames, base = listed("frameDomains", "'none'"), listed("baseUriDomains", "'self'")
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src 'self' 'unsafe-inline' {resources}".rstrip(),
            f"style-src 'self' 'unsafe-inline' {resources}".rstrip(),
            f"connect-src 'self' {listed('connectDomains')}".rstrip(),
            f"img-src 'self' data: {resources}".rstrip(),
            f"font-src 'self' {resources}".rstrip(),
            f"media-src 'self' data: {resources}".rstrip(),
            f"frame-src {frames}",
            "object-src 'none'",
            f"base-uri {base}",
        ]
    )
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    found = _HEAD.search(html)
    return html[: found.end()] + meta + html[found.end() :] if found else meta + html


def view_panel(handler: Handler) -> SafeString | None:
    """The admin's section of a tool with a view: the view framed as a host shows it, and its settings."""
    view: View | None = handler.options.get("app")
    visibility = handler.options.get("visibility")
    if view is None and visibility is None:
        return None
    page = problem = None
    if view is not None:
        try:
            page = framed(view, render.render(view))
        except render.RENDER_ERRORS as exc:
            problem = str(exc)
    context = {
        "view": view,
        "visibility": visibility or ("model", "app"),
        "page": page,
        "problem": problem,
        "ui": view.ui_meta() if view is not None else None,
    }
    return SafeString(render_to_string("admin/mcp_django/mcp_ui_view.html", context))
