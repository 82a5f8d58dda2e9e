"""The baseline: the official MCP Python SDK's server, stateless with JSON answers, the same tools.

Run by bench/run.py under uvicorn: ``uvicorn bench.sdk_server:app``.
"""

from __future__ import annotations

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer(name="sdk-baseline", version="1")


@server.tool()
def echo(text: str) -> str:
    """Send the text back."""
    return text


@server.tool()
async def reverse(text: str) -> str:
    """Send the text back reversed (async)."""
    return text[::-1]


def _ask(key: str, message: str, field: str) -> types.InputRequiredResult:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return types.InputRequiredResult(
        input_requests={
            key: types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
        },
        request_state=key,
    )


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | types.InputRequiredResult:
    """Two asks in sequence: three requests in all (the same flow as the demo's tool)."""
    answers = ctx.input_responses or {}
    if ctx.request_state == "step1" and "step1" in answers:
        return _ask("step2", "Step 2: What is your favorite color?", "color")
    if ctx.request_state == "step2" and "step2" in answers:
        return f"Someone likes {answers['step2'].content['color']}."
    return _ask("step1", "Step 1: What is your name?", "name")


app = server.streamable_http_app(stateless_http=True, json_response=True)
