"""The 2026-07-28 Streamable HTTP wire: headers, _meta, errors and their HTTP statuses."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

import tests.modern_tools  # noqa: F401 - registers the modtest_ tools
from tests.conftest import MODERN, Raw, mcp_settings, meta, sse_messages

# In process (mcp_django.testing.HttpxTransport): the application sees the same bytes and
# headers as from a socket; tests/test_modern_sdk.py and the conformance suite cover the socket.
pytestmark = pytest.mark.django_db


@pytest.fixture
def raw(raw_inprocess: Raw) -> Raw:
    return raw_inprocess


def error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert "result" not in body
    return body["error"]


def test_discover(raw: Raw) -> None:
    r = raw.post("server/discover")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    result = r.json()["result"]
    assert result["resultType"] == "complete"
    assert MODERN in result["supportedVersions"]
    assert set(result["capabilities"]) >= {"tools", "prompts", "resources"}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-django-demo"
    assert isinstance(result["ttlMs"], int) and result["cacheScope"] in ("public", "private")
    assert "\n" not in r.text  # one line: clients read frames line by line


@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list"])
def test_lists_carry_result_type_and_cache_hints(raw: Raw, method: str) -> None:
    result = raw.post(method).json()["result"]
    assert result["resultType"] == "complete" and "ttlMs" in result and "cacheScope" in result


@pytest.mark.parametrize(
    ("params", "what"),
    [
        ({}, "no _meta"),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, "no version"),
        ({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}, "no capabilities"),
        (
            {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": [],
                }
            },
            "bad caps",
        ),
    ],
)
def test_missing_meta_is_invalid_params(raw: Raw, params: dict[str, Any], what: str) -> None:
    r = raw.post("server/discover", params, with_meta=False, request_id=f"id-{what}")
    assert r.status_code == 400
    assert error(r)["code"] == -32602
    assert r.json()["id"] == f"id-{what}"


def test_client_info_is_optional(raw: Raw) -> None:
    params = {
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    }
    discovered = raw.post("server/discover", params)
    assert discovered.status_code == 200
    assert discovered.json()["result"]["resultType"] == "complete" and "error" not in discovered.json()
    # Not only discovery: a call without clientInfo is served in full.
    called = raw.post("tools/call", {"name": "echo", "arguments": {"text": "hi"}, **params})
    assert called.status_code == 200 and "error" not in called.json(), called.json()
    result = called.json()["result"]
    assert result["resultType"] == "complete" and result["content"][0]["text"] == "hi"


def test_unsupported_version(raw: Raw) -> None:
    params = {"_meta": meta(version="v999")}
    r = raw.post("server/discover", params, headers={"mcp-protocol-version": "v999"})
    assert r.status_code == 400
    e = error(r)
    assert e["code"] == -32022 and e["data"] == {"supported": [MODERN], "requested": "v999"}


@pytest.mark.parametrize(
    "headers",
    [
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "prompts/list"},
        {"mcp-method": "TOOLS/LIST"},
    ],
)
def test_header_mismatch(raw: Raw, headers: dict[str, str]) -> None:
    r = raw.post("tools/list", headers=headers)
    assert r.status_code == 400 and error(r)["code"] == -32020


def test_header_missing(raw: Raw) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
    }
    r = raw.client.post(raw.url, json=body, headers=headers)
    assert r.status_code == 400 and error(r)["code"] == -32020


def test_version_header_differs_from_meta(raw: Raw) -> None:
    params = {"_meta": meta(version="v999")}
    r = raw.post("server/discover", params)  # header says 2026-07-28
    assert r.status_code == 400 and error(r)["code"] == -32020


def test_name_header(raw: Raw) -> None:
    params = {"name": "echo", "arguments": {"text": "x"}}
    assert error(raw.post("tools/call", params, headers={"mcp-name": "other"}))["code"] == -32020
    ok = raw.post("tools/call", params)
    assert ok.json()["result"]["content"][0]["text"] == "x"
    encoded = "=?base64?" + base64.b64encode("échø".encode()).decode() + "?="
    r = raw.post("tools/call", {"name": "échø", "arguments": {}}, headers={"mcp-name": encoded})
    assert error(r)["code"] == -32602  # decoded and matched; the tool just does not exist


@pytest.mark.parametrize(
    ("header", "value", "ok"),
    [
        ("=?base64?SGVsbG8=?=", "Hello", True),
        ("=?base64?SGVsbG8?=", "Hello", False),
        ("=?base64?SGVs!!!bG8=?=", "Hello", False),
        ("SGVsbG8=", "SGVsbG8=", True),
        (None, "test-value", False),
    ],
)
def test_param_headers(raw: Raw, header: str | None, value: str, ok: bool) -> None:
    headers = {"mcp-param-region": header} if header is not None else {}
    r = raw.call("test_x_mcp_header", {"region": value}, headers=headers)
    if ok:
        assert r.json()["result"]["content"][0]["text"] == f"region={value}"
    else:
        assert r.status_code == 400 and error(r)["code"] == -32020


def test_param_header_of_an_argument_left_out(raw: Raw) -> None:
    """An argument the client leaves out (its default applies) has no header to match; a header
    for it is a mismatch."""
    assert raw.call("test_x_mcp_header").json()["result"]["content"][0]["text"] == "region=<none>"
    r = raw.call("test_x_mcp_header", headers={"mcp-param-region": "eu"})
    assert r.status_code == 400 and error(r) == {
        "code": -32020,
        "message": "the Mcp-Param-Region header has no matching argument",
    }


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method"])
def test_methods_not_in_this_revision(raw: Raw, method: str) -> None:
    r = raw.post(method)
    assert r.status_code == 404 and error(r)["code"] == -32601


def test_notification_is_accepted(raw: Raw) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "_meta": meta()}}
    r = raw.client.post(raw.url, json=body, headers=raw.headers("notifications/cancelled", {}))
    assert r.status_code == 202 and r.content == b""


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"[]", -32600),
        (b'{"jsonrpc":"2.0","id":1}', -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"x"}', -32600),
    ],
)
def test_malformed_bodies(raw: Raw, body: bytes, code: int) -> None:
    r = raw.client.post(raw.url, content=body, headers=raw.headers("tools/list", {}))
    assert r.status_code == 400 and error(r)["code"] == code


def test_content_type_and_size(raw: Raw) -> None:
    headers = raw.headers("tools/list", {})
    r = raw.client.post(raw.url, content=b"{}", headers={**headers, "content-type": "text/plain"})
    assert r.status_code == 415
    with mcp_settings(**{"MAX_REQUEST_BYTES": 1000, "ALLOW_ANONYMOUS": True}):
        r = raw.call("echo", {"text": "x" * 2000})
    assert r.status_code == 413


def test_other_http_methods(raw: Raw) -> None:
    assert raw.client.put(raw.url, content=b"{}").status_code == 405


def test_host_and_origin(raw: Raw) -> None:
    evil = raw.post("server/discover", headers={"host": "evil.example.com", "origin": "http://evil.example.com"})
    assert evil.status_code == 403
    foreign_origin = raw.post("server/discover", headers={"origin": "http://evil.example.com"})
    assert foreign_origin.status_code == 403
    host = raw.url.split("/")[2]
    same = raw.post("server/discover", headers={"origin": f"http://{host}"})
    assert same.status_code == 200
    with mcp_settings(**{"ALLOWED_ORIGINS": ["https://app.example.com"], "ALLOW_ANONYMOUS": True}):
        listed = raw.post("server/discover", headers={"origin": "https://app.example.com"})
    assert listed.status_code == 200
    assert listed.headers["access-control-allow-origin"] == "https://app.example.com"


def test_unknown_tool_and_bad_arguments(raw: Raw) -> None:
    r = raw.call("no_such_tool")
    assert r.status_code == 400 and error(r)["code"] == -32602
    bad = raw.call("echo", {"text": 5}).json()["result"]
    assert bad["isError"] is True and "text: Expected `str`, got `int`" in bad["content"][0]["text"]
    extra = raw.call("echo", {"text": "a", "nope": 1}).json()["result"]
    assert extra["isError"] is True and "nope: unexpected field" in extra["content"][0]["text"]
    missing = raw.call("echo", {}).json()["result"]
    assert missing["isError"] is True and "text: this field is required" in missing["content"][0]["text"]


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("tools/call", {"name": "echo", "arguments": ["a"]}, "params.arguments must be an object"),
        (
            "prompts/get",
            {"name": "test_prompt_with_arguments", "arguments": ["a"]},
            "params.arguments must be an object of strings",
        ),
        (
            "prompts/get",
            {"name": "test_prompt_with_arguments", "arguments": {"arg1": 1, "arg2": "b"}},
            "params.arguments must be an object of strings",
        ),
        ("subscriptions/listen", {"notifications": ["toolsListChanged"]}, "params.notifications must be an object"),
    ],
)
def test_malformed_params_are_invalid_params(raw: Raw, method: str, params: dict[str, Any], message: str) -> None:
    r = raw.post(method, params)
    assert r.status_code == 400 and error(r) == {"code": -32602, "message": message}


def test_listen_needs_a_stream(raw: Raw) -> None:
    params = {"notifications": {"toolsListChanged": True}, "_meta": meta()}
    r = raw.post("subscriptions/listen", params, headers={"accept": "application/json"})
    assert error(r)["code"] == -32600 and "Accept: text/event-stream" in error(r)["message"]


def test_a_result_with_no_json_form_is_a_tool_error(raw: Raw, caplog: pytest.LogCaptureFixture) -> None:
    result = raw.call("modtest_unserializable").json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Error executing tool modtest_unserializable: ")
    assert "tool modtest_unserializable returned a value with no JSON form" in caplog.text


def test_tool_errors_are_results(raw: Raw) -> None:
    result = raw.call("test_error_handling").json()["result"]
    assert result.pop("_meta")["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-django-demo"
    assert result == {
        "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
        "isError": True,
        "resultType": "complete",
    }


def test_progress_streams_as_sse(raw: Raw) -> None:
    params = {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta(progressToken="tok-1")}
    r = raw.post("tools/call", params)
    assert r.headers["content-type"].startswith("text/event-stream")
    messages = sse_messages(r)
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == [0, 50, 100]
    assert all(m["params"]["progressToken"] == "tok-1" for m in messages[:-1])
    assert messages[-1]["result"]["content"][0]["text"] == "Progress reported for token tok-1"


def test_json_when_nothing_is_streamed(raw: Raw) -> None:
    params = {"name": "test_tool_with_progress", "arguments": {}}  # no progressToken: nothing to send
    r = raw.post("tools/call", params)
    assert r.headers["content-type"] == "application/json"


def test_logs_only_with_a_log_level(raw: Raw) -> None:
    quiet = raw.call("modtest_notify")
    assert quiet.headers["content-type"] == "application/json"
    params = {"name": "modtest_notify", "arguments": {}, "_meta": meta(**{"io.modelcontextprotocol/logLevel": "info"})}
    loud = sse_messages(raw.post("tools/call", params))
    logs = [m["params"] for m in loud if m.get("method") == "notifications/message"]
    # debug is below the requested level; a logger given is named
    assert logs == [
        {"level": "info", "data": "hello log"},
        {"level": "error", "data": "error log", "logger": "modtest"},
    ]


def test_an_unknown_log_level_hears_every_message(raw: Raw) -> None:
    level = meta(**{"io.modelcontextprotocol/logLevel": "verbose"})
    loud = sse_messages(raw.post("tools/call", {"name": "modtest_notify", "arguments": {}, "_meta": level}))
    logs = [m["params"]["data"] for m in loud if m.get("method") == "notifications/message"]
    assert logs == ["hello log", "debug log", "error log"]


def test_sse_only_when_accepted(raw: Raw) -> None:
    params = {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta(progressToken="t")}
    r = raw.client.post(
        raw.url,
        json={"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params},
        headers={**raw.headers("tools/call", params), "accept": "application/json"},
    )
    assert r.headers["content-type"] == "application/json"
    assert r.json()["result"]["content"][0]["text"] == "Progress reported for token t"


def test_resources_and_prompts(raw: Raw) -> None:
    text = raw.post("resources/read", {"uri": "test://static-text"}).json()["result"]
    assert text["contents"] == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    assert "ttlMs" in text
    blob = raw.post("resources/read", {"uri": "test://static-binary"}).json()["result"]["contents"][0]
    assert blob["mimeType"] == "image/png" and base64.b64decode(blob["blob"]).startswith(b"\x89PNG")
    template = raw.post("resources/read", {"uri": "test://template/42/data"}).json()["result"]["contents"][0]
    assert '"id":"42"' in template["text"] and template["mimeType"] == "application/json"
    missing = raw.post("resources/read", {"uri": "test://missing"})
    assert error(missing)["code"] == -32602 and error(missing)["data"] == {"uri": "test://missing"}
    prompt = raw.post(
        "prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}
    ).json()
    assert prompt["result"]["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='a', arg2='b'"
    no_args = raw.post("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}})
    assert error(no_args)["code"] == -32602
    complete = raw.post(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "x"},
        },
    ).json()["result"]
    assert complete["completion"]["values"] == [] and complete["resultType"] == "complete"
