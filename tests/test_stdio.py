"""``manage.py mcp_stdio``: the official SDK's stdio client, both eras, a tool that asks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "stdio_server.py")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A project database of its own (a file: the server is another process), with a user."""
    database = tmp_path_factory.mktemp("stdio") / "db.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{database}",
        "MCP_ALLOW_ANONYMOUS": "0",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    create = "from django.contrib.auth.models import User; User.objects.create_user('alice'); User.objects.create_user('gone', is_active=False); User.objects.create_user('stan', is_staff=True)"
    subprocess.run([*manage, "shell", "-v0", "-c", create], cwd=ROOT, env=env, check=True)
    yield env


def _params(env: dict[str, str], *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[SERVER, *args], env=env, cwd=str(ROOT))


async def _confirm(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "runs"), [("legacy", 1), ("2026-07-28", 2)])
async def test_sdk_stdio_client_calls_a_tool_that_asks(server_env: dict[str, str], mode: str, runs: int) -> None:
    # Legacy: the ask is a real request on the pipe and the handler runs once.
    # 2026-07-28: input_required, the client retries, the handler runs again (the replay rule).
    async with Client(_params(server_env, "--user", "alice"), mode=mode, elicitation_callback=_confirm) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"stdio_noisy", "echo", "whoami"} <= tools
        result = await client.call_tool("stdio_noisy", {})
        assert not result.is_error
        assert result.content[0].text == f"answer=True runs={runs} user=alice"
        echoed = await client.call_tool("echo", {"text": "über"})
        assert echoed.content[0].text == "über"


def _run(env: dict[str, str], lines: list[str], *args: str) -> subprocess.CompletedProcess[bytes]:
    stdin = "".join(line + "\n" for line in lines).encode()
    return subprocess.run(
        [sys.executable, SERVER, *args], cwd=ROOT, env=env, input=stdin, capture_output=True, timeout=60
    )


def test_only_protocol_messages_reach_stdout(server_env: dict[str, str]) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "stdio_noisy", "arguments": {}}}
    done = _run(
        server_env,
        [json.dumps(INIT), '{"jsonrpc":"2.0","method":"notifications/initialized"}', "not json", json.dumps(call)],
        "--user",
        "alice",
    )
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert all(message["jsonrpc"] == "2.0" for message in messages)
    assert messages[0]["id"] == 1 and messages[0]["result"]["protocolVersion"] == "2025-06-18"
    assert messages[1] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert messages[2]["method"] == "elicitation/create"  # the ask went out; stdin then ended
    stderr = done.stderr.decode()
    for noise in ("print() from a handler", "sys.stdout from a handler", "file descriptor 1 from a handler"):
        assert noise in stderr


def test_tasks_methods_do_not_exist_on_a_legacy_session(server_env: dict[str, str]) -> None:
    from tests.test_tasks import LEGACY_TASKS

    get = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "x"}}
    done = _run(
        server_env,
        [json.dumps(INIT), '{"jsonrpc":"2.0","method":"notifications/initialized"}', json.dumps(get)],
        "--user",
        "alice",
    )
    assert done.returncode == 0, done.stderr
    answer = [json.loads(line) for line in done.stdout.decode().splitlines()][-1]
    assert answer["error"] == {"code": -32601, "message": f"Method not found: tasks/get {LEGACY_TASKS}2025-06-18)"}


def test_invalid_utf8_is_a_parse_error(server_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, SERVER, "--user", "alice"],
        cwd=ROOT,
        env=server_env,
        input=b"\xff\xfe{}\n" + json.dumps(INIT).encode() + b"\n",
        capture_output=True,
        timeout=60,
    )
    messages = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert messages[0]["error"]["code"] == -32700
    assert messages[1]["id"] == 1


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((), "--user USERNAME"),
        (("--user", "nobody"), "No user 'nobody'"),
        (("--user", "gone"), "inactive"),
        (("--anonymous",), "ALLOW_ANONYMOUS"),
    ],
)
def test_refuses_to_start_without_a_user(server_env: dict[str, str], args: tuple[str, ...], error: str) -> None:
    done = _run(server_env, [json.dumps(INIT)], *args)
    assert done.returncode != 0
    assert done.stdout == b""
    assert error in done.stderr.decode()


def test_anonymous_when_the_project_allows_it(server_env: dict[str, str]) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
    done = _run({**server_env, "MCP_ALLOW_ANONYMOUS": "1"}, [json.dumps(INIT), json.dumps(call)], "--anonymous")
    assert done.returncode == 0, done.stderr
    answers = {m["id"]: m for m in map(json.loads, done.stdout.decode().splitlines())}
    assert answers[2]["result"]["structuredContent"] == {"principal": "anonymous", "username": None}


@pytest.mark.anyio
async def test_another_endpoint_over_stdio(server_env: dict[str, str]) -> None:
    """``--endpoint staff``: the demo's staff endpoint's handlers (docs/endpoints.md), not /mcp's."""
    async with Client(_params(server_env, "--user", "stan", "--endpoint", "staff"), mode="2026-07-28") as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"orders_by_status", "mark_shipped"}
        counted = await client.call_tool("orders_by_status", {})
        assert counted.structured_content == {"pending": 0, "paid": 0, "shipped": 0, "cancelled": 0}
    async with Client(_params(server_env, "--user", "stan"), mode="2026-07-28") as client:
        assert "orders_by_status" not in {tool.name for tool in (await client.list_tools()).tools}
