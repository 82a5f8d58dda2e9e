"""The tools, prompts and resources the MCP conformance suite calls.

Written as any mcp-django user would write them: the same handler serves
2026-07-28 (asks become input_required rounds) and the legacy revisions (asks
become server-to-client requests).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from mcp_django import Context, ToolError, mcp
from mcp_django.asks import elicit, list_roots, sample
from mcp_django.content import Audio, EmbeddedResource, Image, Message
from mcp_django.protocol.jsonrpc import INTERNAL_ERROR, MCPError

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# -- tools (test_simple_text first: the header checks call the first listed tool) ----------


@mcp.tool()
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> Image:
    """Returns an image."""
    return Image(PNG, "image/png")


@mcp.tool()
def test_audio_content() -> Audio:
    """Returns audio."""
    return Audio(WAV, "audio/wav")


@mcp.tool()
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded resource."""
    return EmbeddedResource(
        "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
    )


@mcp.tool()
def test_multiple_content_types() -> list[Any]:
    """Returns text, an image and a resource."""
    return [
        {"type": "text", "text": "Multiple content types test:"},
        Image(PNG, "image/png"),
        EmbeddedResource(
            "test://mixed-content-resource", text='{"test": "data", "value": 123}', mime_type="application/json"
        ),
    ]


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages while it runs."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(text)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info level (nothing is sent unless the client asked for logs)."""
    await ctx.info("Logging tool ran")
    return "Logging tool completed"


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    return f"Progress reported for token {ctx.call.progress_token}"


@mcp.tool()
def test_error_handling() -> str:
    """Always fails with a tool error."""
    raise ToolError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_sampling(ctx: Context, prompt: str) -> str:
    """Asks the client's model to answer the prompt."""
    result = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {result.text}"


@mcp.tool()
async def test_elicitation(ctx: Context, message: str) -> str:
    """Asks the user for a username and an email address."""
    result = await ctx.elicit(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={result.action}, content={_json(result.content or {})}"


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits a form whose fields carry defaults (SEP-1034)."""
    result = await ctx.elicit(
        "Please provide user information",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
        },
    )
    return f"Elicitation result: action={result.action}, content={_json(result.content or {})}"


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits single- and multi-select enums, titled and untitled (SEP-1330)."""
    titled = [
        {"const": f"value{i}", "title": t} for i, t in ((1, "First Option"), (2, "Second Option"), (3, "Third Option"))
    ]
    titled_multi = [
        {"const": f"value{i}", "title": t} for i, t in ((1, "First Choice"), (2, "Second Choice"), (3, "Third Choice"))
    ]
    options = ["option1", "option2", "option3"]
    result = await ctx.elicit(
        "Please choose your options",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "description": "Simple enum without titles", "enum": options},
                "titledSingle": {"type": "string", "description": "Enum with titled options (oneOf)", "oneOf": titled},
                "legacyEnum": {
                    "type": "string",
                    "description": "Legacy enum with enumNames",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Multi-select without titles",
                    "items": {"type": "string", "enum": options},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Multi-select with titled options",
                    "items": {"anyOf": titled_multi},
                },
            },
            "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
        },
    )
    return f"Elicitation completed: action={result.action}, content={_json(result.content or {})}"


@mcp.tool(
    description="Tool with JSON Schema 2020-12 features",
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    },
)
def json_schema_2020_12_tool(**arguments: Any) -> str:
    return f"Received: {_json(arguments)}"


@mcp.tool(
    description="Tests SEP-2243 Mcp-Param-* server-side validation.",
    input_schema={
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "default": "<none>",
                "description": "Mirrored into the Mcp-Param-Region header",
                "x-mcp-header": "Region",
            }
        },
    },
)
def test_x_mcp_header(region: str = "<none>") -> str:
    return f"region={region}"


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """Logs, closes its legacy SSE stream, and finishes while the client reconnects (SEP-1699)."""
    await ctx.info("Before disconnect")
    ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@mcp.tool()
async def test_event_burst(ctx: Context, count: int = 5, delay: float = 1.0, then: float = 20.0) -> str:
    """Closes its legacy SSE stream, logs ``count`` messages in consecutive loop turns
    ``delay`` seconds later, then stays quiet ``then`` seconds before it answers."""
    ctx.close_sse_stream()
    await asyncio.sleep(delay)
    for n in range(count):
        await ctx.info(f"burst {n}")
        await asyncio.sleep(0)
    await asyncio.sleep(then)
    return "burst done"


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs sampling: a client that did not declare it gets -32021."""
    result = await ctx.sample("Say hello", max_tokens=20)
    return f"Client declared sampling capability; the model said: {result.text}"


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Elicits a name; under 2026-07-28 that is an input_required result, never a request on the stream."""
    result = await ctx.elicit("What is your name?", NAME, key="user_name")
    return f"Hello, {result.data['name']}!" if result else "No name given."


# -- multi round-trip requests ------------------------------------------------------------


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name (key user_name)."""
    result = await ctx.elicit("What is your name?", NAME, key="user_name")
    return f"Hello, {result.data['name']}!" if result else "Hello, stranger!"


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question (key capital_question)."""
    result = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"Model said: {result.text}"


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks for the client's roots (key client_roots)."""
    roots = await ctx.list_roots(key="client_roots")
    return f"Client exposed {len(roots)} root(s)."


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Keeps a value in ctx.state across the round (it rides in requestState)."""
    ctx.state.setdefault("nonce", "request-state-nonce")
    result = await ctx.elicit("Please confirm", OK, key="confirm")
    if ctx.state.get("nonce") != "request-state-nonce":
        raise ToolError("state lost")
    return f"state-ok: confirmation {'received' if result else 'declined'}"


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks three things in one round."""
    name, greeting, roots = await asyncio.gather(
        ctx.elicit("What is your name?", NAME, key="user_name"),
        ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.list_roots(key="client_roots"),
    )
    return f"All inputs received: {name.data['name'] if name else '?'}, {greeting.text!r}, {len(roots)} root(s)."


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds: a name, then a colour."""
    name = await ctx.elicit("Step 1: What is your name?", NAME, key="step1")
    color = await ctx.elicit(
        "Step 2: What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"{name.data['name'] if name else 'Someone'} likes {color.data['color'] if color else 'nothing'}."


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Its requestState is signed: an edited one is refused before this runs."""
    ctx.state.setdefault("round", "round-1")
    await ctx.elicit("Please confirm", OK, key="confirm")
    return f"state-ok: {ctx.state['round']}"


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what this request's client capabilities allow."""
    asks = []
    if ctx.supports("sampling"):
        asks.append(sample("Say hello", max_tokens=50, key="sample"))
    if ctx.supports("elicitation"):
        asks.append(elicit("What is your name?", NAME, key="ask"))
    if ctx.supports("roots"):
        asks.append(list_roots(key="roots"))
    if not asks:
        return "The client declared no way to answer; nothing was asked."
    answers = await ctx.ask_all(*asks)
    return f"Received {len(answers)} answer(s)."


# -- resources (test://static-text first: the caching check reads the first one) ----------


@mcp.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", description="A static PNG image", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@mcp.resource(
    "test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain"
)
def watched_resource() -> str:
    return "Watched resource content"


@mcp.resource(
    "test://template/{id}/data", name="template-data", description="Data for an id", mime_type="application/json"
)
def template_data(id: str) -> str:
    return _json({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# -- prompts ------------------------------------------------------------------------------


@mcp.prompt()
def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803 - the suite's name
    """A prompt that embeds a resource."""
    return [
        Message(EmbeddedResource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain")),
        Message("Please process the embedded resource above."),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[Message]:
    """A prompt with an image."""
    return [Message(Image(PNG, "image/png")), Message("Please analyze the image above.")]


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """Asks the user what context to use (key user_context)."""
    result = await ctx.elicit(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return f"Use the following context: {result.data['context'] if result else 'none'}"


# -- list changes (subscriptions/listen) --------------------------------------------------


def _dynamic_tool() -> str:
    return "This tool exists only for a moment."


@mcp.tool()
def test_trigger_tool_change() -> str:
    """Adds a tool and removes it again: listeners are told the tool list changed."""
    mcp.tool(name="test_dynamic_tool", description="A tool added at run time")(_dynamic_tool)
    mcp.remove("tools", "test_dynamic_tool")
    return "tool list changed"


@mcp.tool()
def test_trigger_prompt_change() -> str:
    """Adds a prompt and removes it again: listeners are told the prompt list changed."""
    mcp.prompt(name="test_dynamic_prompt", description="A prompt added at run time")(_dynamic_tool)
    mcp.remove("prompts", "test_dynamic_prompt")
    return "prompt list changed"


@mcp.tool()
async def test_trigger_resource_update(uri: str = "test://watched-resource") -> str:
    """Announces that a resource changed: its subscribers get notifications/resources/updated."""
    # Awaited: the call answers once every worker has been told, so a client's
    # next call sees the update's effects in order.
    await mcp.aresource_updated(uri)
    return f"updated {uri}"


# -- the tasks extension (SEP-2663): the fixtures of the suite's tasks-* scenarios ---------


@mcp.tool()
def greet(name: str) -> str:
    """Greets someone, synchronously (never a task)."""
    return f"Hello, {name}!"


@mcp.tool(task="optional")
async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "") -> str:
    """Works for ``seconds`` seconds, stopping early when the task is cancelled."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await ctx.check_cancelled()
        await asyncio.sleep(min(0.1, max(0.0, deadline - loop.time())))
    return f"computed {label or 'result'} in {seconds:g}s"


@mcp.tool(task="required")
async def failing_job() -> str:
    """Runs for a second, then fails with a tool error (a completed task with isError)."""
    await asyncio.sleep(1)
    raise ToolError("failing_job failed, as it always does")


@mcp.tool(task="optional")
async def protocol_error_job() -> str:
    """Fails with a JSON-RPC error (a failed task)."""
    raise MCPError(INTERNAL_ERROR, "protocol_error_job hit an internal error")


@mcp.tool(task="optional")
async def confirm_delete(ctx: Context, filename: str) -> str:
    """Asks before deleting ``filename`` (one elicitation)."""
    if await ctx.confirm(f"Delete {filename}?", key="confirm_delete"):
        return f"Deleted {filename}."
    return f"Kept {filename}."


@mcp.tool(task="optional")
async def multi_input(ctx: Context) -> str:
    """Asks two things at once (two input requests pending together)."""
    name, ok = await asyncio.gather(
        ctx.elicit("What is your name?", NAME, key="multi_name"),
        ctx.confirm("Proceed?", key="multi_confirm"),
    )
    return f"name={name.data.get('name') if name else None}, proceed={ok}"


@mcp.tool(task="required", input_first=True)
async def test_tool_with_task(ctx: Context) -> str:
    """Asks the user's name in the request's own rounds, then goes on as a task."""
    result = await ctx.elicit("What is your name?", NAME, key="user_name")
    await ctx.start_task()
    await asyncio.sleep(0.2)
    return f"Hello, {result.data['name'] if result else 'stranger'}, from a task!"
