"""The 405 the endpoint answers a request that is not MCP (a browser, a GET without a session),
which clients rely on; its body explains to a person what the endpoint is."""

from __future__ import annotations

from ..pipeline import refusal
from ..protocol.jsonrpc import INVALID_REQUEST, MCPError, dumps
from .http_io import JSON, HttpIn, HttpOut

SUMMARY = (
    "This is an MCP (Model Context Protocol) endpoint: MCP clients POST JSON-RPC messages to it "
    "(Content-Type: application/json). Give this URL to an MCP client, with an "
    "'Authorization: Token KEY' header unless the server allows anonymous callers."
)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MCP endpoint</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem}
code{background:#f3f3f3;padding:.1rem .3rem;border-radius:3px}</style></head>
<body><h1>MCP endpoint</h1>
<p>This URL is a <a href="https://modelcontextprotocol.io/">Model Context Protocol</a>
endpoint. An MCP client sends it JSON-RPC messages with <code>POST</code>; a browser cannot use it.</p>
<p>To connect, give an MCP client this URL (Streamable HTTP; <code>ws://</code> on the same path for
websocket clients) and, unless the server allows anonymous callers, the header
<code>Authorization: Token KEY</code>, where <code>KEY</code> is a Django REST framework token
(<code>python manage.py drf_create_token USERNAME</code>).</p>
</body></html>
"""


def not_mcp(req: HttpIn) -> HttpOut:
    """405 (``Allow: POST``), with a page for a browser and a JSON-RPC error for anything else."""
    allow = ("allow", "POST")
    if "text/html" in req.headers.get("accept", ""):
        body = PAGE.encode()
        return HttpOut(405, [allow, ("content-type", "text/html; charset=utf-8")], body)
    error = MCPError(INVALID_REQUEST, f"{req.method} is not an MCP request here. {SUMMARY}", http_status=405)
    status, payload, extra = refusal(None, error, [allow])
    return HttpOut(status, [("content-type", JSON), *(extra or [])], dumps(payload))
