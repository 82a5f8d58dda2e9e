"""Two server processes, one client: the SSE stream on one, the client's reply POSTed to the other.

Both uvicorn processes serve project.asgi with the same PostgreSQL database,
the same Redis (channel layer and cache) and the same key. The reply must
travel through the Channels layer to the process holding the stream.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PG = ("127.0.0.1", 5432)
REDIS = ("127.0.0.1", 6379)
# Per run: two suites running at once must not migrate one database together.
DB_NAME = f"mcp_legacy_multi_{os.getpid()}"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _listening(address: tuple[str, int]) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(address) == 0


def _wait(address: tuple[str, int], what: str, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not _listening(address):
        if time.time() > deadline:
            raise RuntimeError(f"{what} is not listening on {address}")
        time.sleep(0.1)


def _ensure_services() -> None:
    missing = [
        name
        for name, address, installed in (
            ("PostgreSQL", PG, os.path.isdir("/etc/postgresql")),
            ("Redis", REDIS, shutil.which("redis-server") is not None),
        )
        if not _listening(address) and not installed
    ]
    if missing:
        # A developer machine may have neither; CI (which has both) must not skip.
        message = f"needs {' and '.join(missing)} on this machine"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if not _listening(PG):
        versions = os.listdir("/etc/postgresql")
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", versions[0], "main", "start"], check=True)
        _wait(PG, "PostgreSQL")
    if not _listening(REDIS):
        subprocess.run(
            "redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save '' --appendonly no "
            "--dir /var/lib/redis --logfile /var/log/redis/ci.log",
            shell=True,
            check=True,
        )
        _wait(REDIS, "Redis")


def _admin(statement: str) -> None:
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
        conn.execute(statement)


def _fresh_database() -> str:
    _admin(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
    _admin(f"CREATE DATABASE {DB_NAME}")
    return f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_servers() -> Iterator[tuple[str, str]]:
    _ensure_services()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": _fresh_database(),
        # A database index of its own, so other suites' keys never meet ours.
        "REDIS_URL": "redis://127.0.0.1:6379/7",
        "MCP_REQUEST_STATE_KEY": "multi-process-test-key-0123456789abcdef",
        "MCP_ALLOW_ANONYMOUS": "1",
        "DJANGO_DEBUG": "0",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    ports = [_free_port(), _free_port()]
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "project.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port in ports:
            _wait(("127.0.0.1", port), "uvicorn")
        yield tuple(f"http://127.0.0.1:{port}/mcp" for port in ports)  # type: ignore[misc]
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(10)
        _admin(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


def _events(lines: Iterator[str]) -> Iterator[dict]:
    for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


def test_reply_reaches_the_process_holding_the_stream(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    with httpx.Client(timeout=30) as client:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "t"},
            },
        }
        sid = client.post(a, json=init, headers=HEADERS).headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        # The session opened on A is known to B (the id is a signed record; its state is in Redis).
        level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}}
        assert client.post(b, json=level, headers=headers).json()["result"] == {}
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "Who are you?"}},
        }
        with client.stream("POST", a, json=call, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = _events(stream.iter_lines())
            request = next(events)
            assert request["method"] == "elicitation/create"
            assert request["params"]["message"] == "Who are you?"
            reply = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}},
            }
            assert client.post(b, json=reply, headers=headers).status_code == 202
            final = next(events)
        assert final["id"] == 3
        assert final["result"]["content"][0]["text"] == (
            'User response: action=accept, content={"username":"ada","email":"ada@example.com"}'
        )
        # Ended on B, ended on A.
        assert client.delete(b, headers=headers).status_code == 200
        assert client.post(a, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=headers).status_code == 404


def test_reply_from_another_session_is_not_accepted(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t"}},
    }
    with httpx.Client(timeout=30) as client:
        sid = client.post(a, json=init, headers=HEADERS).headers["mcp-session-id"]
        other = client.post(b, json=init, headers=HEADERS).headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "?"}},
        }
        with client.stream("POST", a, json=call, headers=headers) as stream:
            events = _events(stream.iter_lines())
            request = next(events)
            forged = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {"action": "accept", "content": {"username": "mallory", "email": "m@x"}},
            }
            # Accepted for routing (202) but dropped by A: it came under another session.
            assert client.post(b, json=forged, headers={**headers, "mcp-session-id": other}).status_code == 202
            genuine = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}}
            assert client.post(b, json=genuine, headers=headers).status_code == 202
            final = next(events)
        assert final["result"]["content"][0]["text"] == "User response: action=decline, content={}"
