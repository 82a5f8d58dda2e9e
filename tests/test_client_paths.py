"""Paths a client reaches that the rest of the suite does not, through the in-process client:
a database outage during a permission check, the legacy session's edge cases (a URL elicitation
or a form a 2025-06-18 client cannot read, a malformed error reply, ``resources/subscribe``'s
params), ``subscriptions/listen``'s bound on topics, a resource returning several contents,
completers that ask, refuse or hit a database error, the completions of a handler an extension's
filter hides, and a requestState grown too large.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DataError, OperationalError, connection

import tests.legacy_fixtures  # noqa: F401 - registers the legacytest_ tools
from mcp_django import Context, SyncContext, extensions, mcp, pipeline
from mcp_django.protocol.jsonrpc import MCPError
from mcp_django.testing import Answer, InputRequest, JSONRPCError, MCPClient, accept
from tests.conftest import mcp_settings

pytestmark = pytest.mark.django_db

OLD_FORMS = "2025-06-18"


# -- a database outage during a permission check ---------------------------------------------------


@mcp.tool(permissions=["shop.view_product"])
def pathtest_guarded() -> str:
    """Only users with shop.view_product may call it; checking that queries the database."""
    return "allowed"


@contextlib.contextmanager
def refusing(table: str) -> Iterator[None]:
    """The database refusing every query of ``table`` on this thread's connection (where the
    in-process client runs sync work), as a server gone away does: ``OperationalError``."""

    def refuse(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if table in sql:
            raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse):
        yield


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_a_permission_check_during_a_database_outage_is_a_503(revision: str) -> None:
    """docs/deployment.md: permission checks during an outage are answered 503 (-32603, "the
    database is unavailable"), never an internal error or "Unknown tool". How soon, with a real
    PostgreSQL stopped or frozen, is tests/test_database_faults.py's (a timed test)."""
    alice = User.objects.create_user("alice", password="pw")
    client = MCPClient(user=alice, revision=revision)
    client.list_tools()  # logged in and, on a legacy revision, the session opened while it answers
    for attempt in (lambda: client.call_tool("pathtest_guarded"), client.list_tools):
        with refusing("auth_permission"), pytest.raises(JSONRPCError) as caught:
            attempt()
        assert caught.value.code == -32603
        assert "the database is unavailable" in caught.value.message
        if revision == "2026-07-28":
            assert caught.value.status == 503
        # A legacy call's SSE stream has begun before the check: the error is the stream's answer.
    # Back: the check answers again, and says no.
    with pytest.raises(JSONRPCError) as caught:
        client.call_tool("pathtest_guarded")
    assert (caught.value.code, caught.value.message) == (-32602, "Unknown tool: pathtest_guarded")


# -- elicitations on a 2025-06-18 session ------------------------------------------------------------


# Every rule of the fitting at once (docs/legacy.md, "What a handler sees").
NEWER_FORM = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email", "default": "a@b.c"},
        "host": {"type": "string", "title": "Host", "format": "hostname", "maxLength": 50},
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l"}],
            "default": "s",
        },
        "count": {"type": "integer", "minimum": 1, "default": 2},
        "ratio": {"type": "number", "maximum": 1.5, "default": 0.5},
        "agree": {"type": "boolean", "title": "Agree", "default": False},
    },
    "required": ["email"],
    "additionalProperties": False,
}


@mcp.tool()
async def pathtest_newer_form(ctx: Context) -> str:
    result = await ctx.elicit("Your order", NEWER_FORM)
    return f"action={result.action} content={json.dumps(result.content, sort_keys=True)}"


def test_a_newer_form_is_fitted_to_a_2025_06_18_session() -> None:
    asked: list[InputRequest] = []

    def answer(request: InputRequest) -> Answer:
        asked.append(request)
        return accept({"email": "x@y.z", "size": "l"})

    result = MCPClient(revision=OLD_FORMS).call_tool("pathtest_newer_form", answer=answer)
    assert result.text == 'action=accept content={"email": "x@y.z", "size": "l"}'
    [request] = asked
    assert "mode" not in request.params
    assert request.schema == {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "host": {"type": "string", "title": "Host", "maxLength": 50},  # hostname: not 2025-06-18's
            "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "l"]},
            "count": {"type": "integer", "minimum": 1},
            "ratio": {"type": "number", "maximum": 1.5},
            "agree": {"type": "boolean", "title": "Agree", "default": False},
        },
        "required": ["email"],
    }


def test_a_newer_form_goes_unchanged_to_a_2025_11_25_session() -> None:
    asked: list[InputRequest] = []

    def answer(request: InputRequest) -> Answer:
        asked.append(request)
        return accept({"email": "x@y.z"})

    MCPClient(revision="2025-11-25").call_tool("pathtest_newer_form", answer=answer)
    assert asked[0].params["mode"] == "form"
    assert asked[0].schema == NEWER_FORM


def _never(request: InputRequest) -> Any:
    raise AssertionError(f"nothing may be sent to a {OLD_FORMS} client, but it was asked {request}")


def test_a_multi_select_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(JSONRPCError) as caught:
        MCPClient(revision=OLD_FORMS).call_tool("legacytest_multi_select", answer=_never)
    assert caught.value.code == -32603
    assert "tags (a multi-select enum)" in caught.value.message and "2025-11-25" in caught.value.message
    assert caught.value.data == {"protocolVersion": OLD_FORMS, "unsupported": ["tags (a multi-select enum)"]}


def test_a_url_elicitation_is_refused_on_a_2025_06_18_session() -> None:
    # Even from a client declaring URL mode, which its revision has no message for.
    with pytest.raises(JSONRPCError) as caught:
        MCPClient(revision=OLD_FORMS).call_tool("legacytest_url", answer=_never)
    assert caught.value.code == -32603
    assert caught.value.message == f"URL elicitation needs protocol 2025-11-25; this session speaks {OLD_FORMS}"
    # A 2025-06-18 client declaring what its revision has (elicitation: {}, form mode): -32021.
    with pytest.raises(JSONRPCError) as caught:
        MCPClient(revision=OLD_FORMS, capabilities={"elicitation": {}}).call_tool("legacytest_url", answer=_never)
    assert caught.value.code == -32021
    assert caught.value.data["requiredCapabilities"] == {"elicitation": {"url": {}}}


# -- a client's malformed error reply (legacy) --------------------------------------------------------


@pytest.mark.parametrize("malformed", ["boom", ["a list"], {"message": "no code"}, {"code": "-32000", "message": "x"}])
def test_a_malformed_error_reply_reaches_the_handler_as_an_internal_client_error(malformed: Any) -> None:
    result = MCPClient(revision="2025-11-25").call_tool("legacytest_error", answer=lambda r: Answer(error=malformed))
    assert result.text == "client error -32603: the client answered elicitation/create with a malformed error"


# -- legacy resources/subscribe, subscriptions/listen's bound ------------------------------------------


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
@pytest.mark.parametrize("uri", [None, 7, ["pathtest://a"]])
def test_a_legacy_subscribe_needs_a_string_uri(method: str, uri: Any) -> None:
    client = MCPClient(revision="2025-11-25")
    with pytest.raises(JSONRPCError) as caught:
        client.request(method, {} if uri is None else {"uri": uri})
    assert (caught.value.code, caught.value.message) == (-32602, "params.uri must be a string")
    assert client.request(method, {"uri": "pathtest://a"}) == {}


def within(seconds: float, work: Callable[[], Any]) -> Any:
    """``work()``'s value or exception; a failure, not a hang, when it has not ended in time
    (a listen stream the server acknowledged stays open)."""
    ended: dict[str, Any] = {}

    def run() -> None:
        try:
            ended["value"] = work()
        except BaseException as exc:
            ended["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert ended, f"still open after {seconds} s"
    if "error" in ended:
        raise ended["error"]
    return ended["value"]


@pytest.mark.parametrize(
    ("field", "values", "options"),
    [("taskIds", [f"task-{i}" for i in range(4)], {"tasks": True}), ("resourceSubscriptions", list("abcd"), {})],
)
def test_listening_to_more_than_max_subscriptions_is_refused(field: str, values: list[str], options: Any) -> None:
    """docs/index.md, MAX_SUBSCRIPTIONS: one more than it allows is -32602 with data.maxSubscriptions,
    answered before the stream is acknowledged."""
    client = MCPClient(**options)
    # Duplicates count once: four different values, six entries.
    listen = {"notifications": {field: values + values[:2]}}
    with mcp_settings(MAX_SUBSCRIPTIONS=3), pytest.raises(JSONRPCError) as caught:
        within(10, lambda: client.request("subscriptions/listen", listen))
    assert caught.value.code == -32602
    assert caught.value.message.startswith("too many subscriptions: at most 3 at once")
    assert caught.value.data == {"maxSubscriptions": 3}


# -- a resource returning several contents ---------------------------------------------------------------


@mcp.resource("pathtest://bundle")
def pathtest_bundle() -> list[dict[str, Any]]:
    """A resource whose value is its contents, entry by entry (each with its own URI)."""
    return [
        {"uri": "pathtest://bundle/readme", "mimeType": "text/markdown", "text": "# Read me"},
        {"uri": "pathtest://bundle/logo", "mimeType": "image/png", "blob": "iVBORw0K"},
    ]


@mcp.resource("pathtest://numbers")
def pathtest_numbers() -> list[dict[str, Any]]:
    """A list of dicts that are not contents (no uri): one JSON entry, as any other value."""
    return [{"n": 1}, {"n": 2}]


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_a_resource_may_return_its_contents_entries(revision: str) -> None:
    client = MCPClient(revision=revision)
    assert client.read_resource("pathtest://bundle").contents == pathtest_bundle()
    [entry] = client.read_resource("pathtest://numbers").contents
    assert entry["uri"] == "pathtest://numbers" and entry["mimeType"] == "application/json"
    assert json.loads(entry["text"]) == [{"n": 1}, {"n": 2}]


# -- completers that ask the client, raise MCPError, or hit a DataError ------------------------------


def _asks_sync(value: str, ctx: SyncContext) -> list[str]:
    return ["yes"] if ctx.confirm("Complete this?") else []


async def _asks_async(value: str, ctx: Context) -> list[str]:
    return ["yes"] if await ctx.confirm("Complete this?") else []


def _refuses(value: str) -> list[str]:
    raise MCPError(-32042, "completion refused: type at least 2 characters", {"minLength": 2})


def _data_error(value: str) -> list[str]:
    # What PostgreSQL answers a value its column cannot hold (docs/index.md: the request's fault).
    raise DataError('value too long for type character varying(20)\nCONTEXT: unnamed portal parameter $1 = "..."')


@mcp.prompt(completions={"a": _asks_sync, "b": _asks_async, "c": _refuses, "d": _data_error})
def pathtest_completed(a: str, b: str, c: str, d: str) -> str:
    return a + b + c + d


def _complete(client: MCPClient, argument: str) -> dict[str, Any]:
    ref = {"type": "ref/prompt", "name": "pathtest_completed"}
    return client.request("completion/complete", {"ref": ref, "argument": {"name": argument, "value": "x"}})


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("argument", ["a", "b"])
def test_a_completer_cannot_ask_the_client(revision: str, argument: str) -> None:
    """docs/index.md: a completer's ctx "cannot ask the client": -32603, nothing sent."""
    with pytest.raises(JSONRPCError) as caught:
        _complete(MCPClient(revision=revision), argument)
    assert (caught.value.code, caught.value.message) == (-32603, "a completer cannot ask the client")


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_a_completers_mcp_error_is_the_clients_error(revision: str) -> None:
    with pytest.raises(JSONRPCError) as caught:
        _complete(MCPClient(revision=revision), "c")
    assert (caught.value.code, caught.value.message) == (-32042, "completion refused: type at least 2 characters")
    assert caught.value.data == {"minLength": 2}


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_a_completers_data_error_is_invalid_params_with_one_warning(
    revision: str, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/index.md: a value the database refuses is -32602 for a completion, one warning, no traceback."""
    with caplog.at_level("WARNING", "mcp_django"), pytest.raises(JSONRPCError) as caught:
        _complete(MCPClient(revision=revision), "d")
    assert caught.value.code == -32602
    assert (
        caught.value.message
        == "Invalid arguments for completion of prompt pathtest_completed: the database refused a value"
    )
    [record] = [r for r in caplog.records if "refused a value" in r.getMessage()]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "value too long for type character varying(20)" in record.getMessage()
    assert "CONTEXT" not in record.getMessage()  # the first line only


# -- completions of a handler an extension's filter hides ---------------------------------------------


@mcp.prompt(completions={"colour": lambda value: ["red"]})
def pathtest_hidden_prompt(colour: str) -> str:
    return colour


@mcp.resource("pathtest://hidden/{colour}", completions={"colour": lambda value: ["red"]})
def pathtest_hidden_resource(colour: str) -> str:
    return colour


def _hidden(call: Any, handler: Any) -> bool:
    return not handler.name.startswith("pathtest_hidden")


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_a_handler_an_extensions_filter_hides_has_no_completions(revision: str) -> None:
    """docs/extensions.md: a handler a filter hides is "unknown when called, as a handler the principal
    may not use": completion/complete answers for it as for one that does not exist."""
    client = MCPClient(revision=revision)
    argument = {"name": "colour", "value": "r"}
    prompt = {"type": "ref/prompt", "name": "pathtest_hidden_prompt"}
    template = {"type": "ref/resource", "uri": "pathtest://hidden/{colour}"}
    for ref in (prompt, template):
        completed = client.request("completion/complete", {"ref": ref, "argument": argument})
        assert completed["completion"]["values"] == ["red"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(extensions.registered, "handler_filters", [(_hidden, None)])
        pipeline.rebuild_all()  # the per-handler filters are kept: found again
        for ref, code, message in (
            (prompt, -32602, "Unknown prompt: pathtest_hidden_prompt"),
            (
                template,
                -32602 if revision == "2026-07-28" else -32002,
                "Resource not found: pathtest://hidden/{colour}",
            ),
        ):
            with pytest.raises(JSONRPCError) as caught:
                client.request("completion/complete", {"ref": ref, "argument": argument})
            assert (caught.value.code, caught.value.message) == (code, message)
        with pytest.raises(JSONRPCError) as caught:
            client.request("prompts/get", {"name": "pathtest_hidden_prompt", "arguments": {"colour": "red"}})
        assert caught.value.message == "Unknown prompt: pathtest_hidden_prompt"  # as prompts/get answers
    pipeline.rebuild_all()


# -- a requestState grown past MAX_REQUEST_STATE_BYTES -------------------------------------------------


@mcp.tool()
def pathtest_hoarder(ctx: SyncContext, big: bool = False) -> str:
    """Keeps random characters in ctx.state across its rounds (incompressible): 70,000 when ``big``."""
    ctx.state.setdefault("notes", os.urandom(35_000 if big else 500).hex())
    return "kept" if ctx.confirm("Keep it?") else "dropped"


def test_a_request_state_too_large_to_send_is_an_internal_error() -> None:
    client = MCPClient()
    assert client.call_tool("pathtest_hoarder", {"big": False}, answer=lambda r: True).text == "kept"
    with pytest.raises(JSONRPCError) as caught:
        client.call_tool("pathtest_hoarder", {"big": True}, answer=lambda r: True)
    assert (caught.value.code, caught.value.message) == (
        -32603,
        "the answers so far no longer fit in MAX_REQUEST_STATE_BYTES",
    )
    # The setting decides: what did not fit in 64 KiB fits in 256.
    with mcp_settings(MAX_REQUEST_STATE_BYTES=256 * 1024):
        assert client.call_tool("pathtest_hoarder", {"big": True}, answer=lambda r: True).text == "kept"
