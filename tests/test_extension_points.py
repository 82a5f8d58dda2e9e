"""MCP_DJANGO["PIPELINE"] and ["EXCEPTION_HANDLER"]: a project's stages (a sync one that logs
each call's method and principal, an async one that refuses tools outside business hours)
and its exception handler see every call on every transport, and a bad entry is a check."""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from mcp import MCPError as SDKError

from mcp_django import audit, mcp
from mcp_django.auth import ANONYMOUS
from mcp_django.checks import check_settings
from mcp_django.testing import JSONRPCError, MCPClient
from mcp_django.transports import stdio
from tests import pipeline_stages as stages
from tests.conftest import Raw, sdk_client
from tests.legacy_fixtures import ws_client

STAGES = ["tests.pipeline_stages.log_calls", "tests.pipeline_stages.business_hours", "mcp_django.pipeline.audit"]
MONDAY_NOON = datetime.datetime(2026, 12, 7, 12)
SUNDAY = datetime.datetime(2026, 12, 6, 12)
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


@pytest.fixture(autouse=True)
def project_pipeline(settings: Any) -> Iterator[None]:
    settings.MCP_DJANGO = {
        **settings.MCP_DJANGO,
        "PIPELINE": STAGES,
        "EXCEPTION_HANDLER": "tests.pipeline_stages.tagged_errors",
    }
    stages.SEEN.clear()
    stages.NOW[:] = [MONDAY_NOON]
    yield
    stages.NOW.clear()


def _seen(transport: str, era: str) -> list[str]:
    return [method for t, e, method, principal in stages.SEEN if (t, e) == (transport, era)]


def _closed_error(error: dict[str, Any]) -> None:
    assert error["code"] == stages.CLOSED and error["message"] == "tools are served 9 to 5 on weekdays"
    assert error["data"] == {"handledBy": "tests"}


# A sync stage calls the rest of the chain from its own thread: the test client's audit row is
# written there, outside the test's transaction (docs/pipeline.md), so the tables are flushed.
@pytest.mark.django_db(transaction=True)
def test_the_test_client() -> None:
    client = MCPClient()
    assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    stages.NOW[:] = [SUNDAY]
    with pytest.raises(JSONRPCError) as raised:
        client.call_tool("echo", {"text": "hi"})
    assert (raised.value.code, raised.value.data) == (stages.CLOSED, {"handledBy": "tests"})
    assert ("http", "modern", "tools/call", "anonymous") in stages.SEEN
    assert _seen("http", "modern") == ["tools/call", "tools/call"]


def test_modern_http(raw: Raw) -> None:
    assert raw.call("echo", {"text": "hi"}).json()["result"]["content"][0]["text"] == "hi"
    # Every error of a call goes through the project's handler, the dispatcher's too.
    unknown = raw.call("no_such_tool").json()["error"]
    assert unknown["code"] == -32602 and unknown["data"] == {"handledBy": "tests"}
    stages.NOW[:] = [SUNDAY]
    _closed_error(raw.call("echo", {"text": "hi"}).json()["error"])
    assert _seen("http", "modern") == ["tools/call"] * 3


@pytest.mark.anyio
async def test_legacy_http(live_url: str) -> None:
    async with sdk_client(live_url, mode="legacy") as client:
        assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
        stages.NOW[:] = [SUNDAY]
        with pytest.raises(SDKError) as raised:
            await client.call_tool("echo", {"text": "hi"})
        assert (raised.value.code, raised.value.error.data) == (stages.CLOSED, {"handledBy": "tests"})
    # The handshake and the session's methods are calls too.
    seen = _seen("http", "legacy")
    assert seen[0] == "initialize" and seen.count("tools/call") == 2


@pytest.mark.anyio
async def test_websockets(live_url: str) -> None:
    async with ws_client(live_url) as client:
        await client.initialize({})
        assert (await client.request("ping"))["result"] == {}
        reply = await client.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert reply["result"]["content"][0]["text"] == "hi"
        stages.NOW[:] = [SUNDAY]
        _closed_error((await client.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))["error"])
    # The notifications too (the client's notifications/initialized, in a task of its own,
    # which nothing answers: it may end after the calls).
    for _ in range(200):
        if "notifications/initialized" in _seen("websocket", "legacy"):
            break
        await asyncio.sleep(0.025)
    seen = _seen("websocket", "legacy")
    assert seen[0] == "initialize"
    assert sorted(seen[1:]) == ["notifications/initialized", "ping", "tools/call", "tools/call"]


class _Pipe:
    """stdin and stdout of ``manage.py mcp_stdio`` in process: the handshake's answer is
    awaited before the other lines are sent, as a client does."""

    def __init__(self, lines: list[dict[str, Any]]) -> None:
        self.lines = [json.dumps(line).encode() + b"\n" for line in lines]
        self.out = io.BytesIO()
        self.answered = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        yield self.lines[0]
        assert self.answered.wait(30)
        yield from self.lines[1:]

    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.answered.set()

    def flush(self) -> None:
        pass

    def replies(self) -> dict[Any, dict[str, Any]]:
        return {reply["id"]: reply for reply in map(json.loads, self.out.getvalue().splitlines())}


@pytest.mark.django_db(transaction=True)
def test_stdio() -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    set_level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "error"}}
    echo = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
    pipe = _Pipe([init, set_level, echo])
    asyncio.run(stdio.serve(ANONYMOUS, pipe, pipe))  # type: ignore[arg-type]
    assert pipe.replies()[3]["result"]["content"][0]["text"] == "hi"
    # Each request runs in its own task (and the sync stage in a thread): in any order.
    assert sorted(_seen("stdio", "legacy")) == ["initialize", "logging/setLevel", "tools/call"]
    assert {principal for *_, principal in stages.SEEN} == {"anonymous"}
    stages.NOW[:] = [SUNDAY]
    pipe = _Pipe([init, echo])
    asyncio.run(stdio.serve(ANONYMOUS, pipe, pipe))  # type: ignore[arg-type]
    _closed_error(pipe.replies()[3]["error"])
    audit.flush()  # the calls' rows, in this test's database


def test_a_bad_entry_is_a_system_check(settings: Any) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "PIPELINE": ["tests.pipeline_stages.nothing_here"]}
    found = {message.id: message.msg for message in check_settings() if message.id.startswith("mcp_django.")}
    assert "mcp_django.E020" in found and "tests.pipeline_stages.nothing_here" in found["mcp_django.E020"]
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "PIPELINE": ["tests.pipeline_stages.SEEN"]}
    assert "mcp_django.E020" in {message.id for message in check_settings()}
    # Passed by name: a stage's arguments are call and call_next.
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "PIPELINE": ["tests.pipeline_stages.tagged_errors"]}
    assert "mcp_django.E020" in {message.id for message in check_settings()}
    settings.MCP_DJANGO = {
        **settings.MCP_DJANGO,
        "PIPELINE": STAGES,
        "EXCEPTION_HANDLER": "tests.pipeline_stages.CLOSED",
    }
    assert {message.id for message in check_settings() if message.id.startswith("mcp_django.E02")} == {
        "mcp_django.E021"
    }


# -- MCP_DJANGO["EXTENSIONS"]: extensions on mcp_django.extensions' points ---------------------


@pytest.fixture
def example_extension(settings: Any) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "EXTENSIONS": ["tests.extension_example", "mcp_django.tasks.methods"]}


@pytest.mark.usefixtures("example_extension")
def test_an_extension_adds_methods_capabilities_resources_and_result_meta(raw: Raw) -> None:
    assert raw.post("notes/get", {"text": "hi"}).json()["result"]["note"] == "hi (modern)"
    discovered = raw.post("server/discover").json()["result"]["capabilities"]
    assert discovered["extensions"] == {"com.example/notes": {"version": 1}, "io.modelcontextprotocol/tasks": {}}
    assert "notes" not in discovered  # declared for the legacy revisions only
    uris = [r["uri"] for r in raw.post("resources/list").json()["result"]["resources"]]
    assert "notes://today" in uris
    assert (
        raw.post("resources/read", {"uri": "notes://today"}).json()["result"]["contents"][0]["text"] == "nothing today"
    )
    meta = raw.call("echo", {"text": "hi"}).json()["result"]["_meta"]
    assert meta["com.example/notes/seen"] is True and "io.modelcontextprotocol/serverInfo" in meta
    # Skills, left out of the setting, are not there at all.
    assert raw.post("skills/list").json()["error"]["code"] == -32601


@pytest.mark.anyio
@pytest.mark.usefixtures("example_extension")
async def test_an_extension_is_there_in_both_eras(live_url: str) -> None:
    async with ws_client(live_url) as client:
        caps = (await client.initialize({}))["result"]["capabilities"]
        assert caps["notes"] == {"era": "legacy"} and caps["extensions"] == {"com.example/notes": {"version": 1}}
        assert (await client.request("notes/get", {"text": "hi"}))["result"] == {"note": "hi (legacy)"}


@pytest.mark.usefixtures("example_extension")
def test_an_extension_adds_tool_options_filters_listed_meta_and_admin_panels(raw: Raw, admin_client: Any) -> None:
    @mcp.tool(shelf="members")
    def members_note() -> str:
        return "for members"

    @mcp.tool(shelf="public", meta={"kept": 1})
    def public_note() -> str:
        return "for all"

    try:
        declared = {"extensions": {"com.example/notes": {}}}
        tools = {t["name"]: t for t in raw.post("tools/list", caps=declared).json()["result"]["tools"]}
        assert tools["members_note"]["_meta"] == {"com.example/notes/shelf": "members"}
        assert tools["public_note"]["_meta"] == {"kept": 1, "com.example/notes/shelf": "public"}
        assert "_meta" not in tools["echo"]
        assert raw.call("members_note", caps=declared).json()["result"]["content"][0]["text"] == "for members"
        # A client that does not declare the extension neither sees nor calls the members' tool.
        names = {t["name"] for t in raw.post("tools/list").json()["result"]["tools"]}
        assert "public_note" in names and "members_note" not in names
        assert raw.call("members_note").json()["error"]["message"] == "Unknown tool: members_note"
        assert mcp.tools["public_note"].meta == {"kept": 1}  # the handler's own meta is untouched
        # The extension's section on the admin's page of the tool (escaped as format_html does).
        page = admin_client.get(reverse("admin:mcp_django_registeredhandler_handler", args=["tool", "members_note"]))
        assert '<section id="shelf"><h2>Shelf</h2><p>members</p></section>' in page.content.decode()
        echo = admin_client.get(reverse("admin:mcp_django_registeredhandler_handler", args=["tool", "echo"]))
        assert 'id="shelf"' not in echo.content.decode()
        with pytest.raises(TypeError, match="shelf= must be"):
            mcp.tool(shelf="attic")(lambda: "")
        with pytest.raises(TypeError, match="unexpected keyword argument 'drawer'"):
            mcp.tool(drawer="top")(lambda: "")
    finally:
        mcp.remove("tools", "members_note")
        mcp.remove("tools", "public_note")


def test_a_bad_extension_is_a_system_check(settings: Any) -> None:
    settings.MCP_DJANGO = {**settings.MCP_DJANGO, "EXTENSIONS": ["tests.pipeline_stages"]}
    assert "mcp_django.E022" in {message.id for message in check_settings()}


def test_a_project_without_the_admin_starts_with_every_extension(tmp_path: Path) -> None:
    """The extensions register their admin pages only where ``django.contrib.admin`` is installed."""
    (tmp_path / "no_admin_settings.py").write_text(
        "SECRET_KEY = 'x'\n"
        "INSTALLED_APPS = ['django.contrib.contenttypes', 'django.contrib.auth', 'rest_framework.authtoken', 'mcp_django']\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3', 'NAME': ':memory:'}}\n"
        "MCP_DJANGO = {'REQUEST_STATE_KEY': 'no-admin-request-state-key-0123456789'}\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "no_admin_settings"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parent.parent)])
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.core.management import call_command; call_command('check')",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
