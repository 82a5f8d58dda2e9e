"""A protocol extension as a project writes one, on mcp_django.extensions' points
(tests/test_extension_points.py lists it in MCP_DJANGO["EXTENSIONS"])."""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html

from mcp_django import extensions
from mcp_django.asks.call import Call
from mcp_django.handlers import Handler
from mcp_django.protocol.revisions import Era

NAME = "com.example/notes"


async def note(call: Call) -> dict[str, Any]:
    return {"note": f"{call.params.get('text', '')} ({call.era})"}


async def listed() -> list[dict[str, Any]]:
    return [{"uri": "notes://today", "name": "today", "mimeType": "text/plain"}]


async def read(uri: str) -> dict[str, Any] | None:
    return {"uri": uri, "mimeType": "text/plain", "text": "nothing today"} if uri == "notes://today" else None


def _shelf(value: Any, owner: str) -> str:
    # An option's check: the value kept, or an error naming the tool.
    if value not in ("public", "members"):
        raise TypeError(f"{owner}: shelf= must be 'public' or 'members', not {value!r}")
    return str(value)


def members_only(call: Call, handler: Handler) -> bool:
    # A tool on the members' shelf is there only for a client that declares the extension.
    return handler.options.get("shelf") != "members" or extensions.client_extension(call, NAME) is not None


def shelf_meta(call: Call, handler: Handler) -> dict[str, Any] | None:
    shelf = handler.options.get("shelf")
    return {NAME + "/shelf": shelf} if shelf else None


def shelf_panel(handler: Handler) -> str | None:
    shelf = handler.options.get("shelf")
    return format_html('<section id="shelf"><h2>Shelf</h2><p>{}</p></section>', shelf) if shelf else None


def register() -> None:
    extensions.add_method("notes/get", note)
    extensions.declare_extension(NAME, {"version": 1})
    extensions.declare_capabilities(lambda era: {"notes": {"era": str(era)}} if era == Era.LEGACY else None)
    extensions.add_resources(listed, read)
    extensions.add_result_meta(lambda call, result: {NAME + "/seen": True}, methods={"tools/call"})
    extensions.add_tool_option("shelf", _shelf)
    extensions.add_handler_filter(members_only)
    extensions.add_descriptor_meta(shelf_meta)
    extensions.add_handler_panel(shelf_panel)
