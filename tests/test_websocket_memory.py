"""What an open websocket with a pending legacy ask costs the server, run as docs/deployment.md
runs the instances: each costs less than 50 KiB of the process's memory (RSS).

uvicorn's default negotiates per-message deflate with every client that offers it
(browsers and the websockets package do): zlib's buffers cost about 36 KiB per
socket, half of what a socket with a pending ask cost (74 KiB measured).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.processes import ROOT, free_port, serve_demo
from tests.test_deployment import uvicorn_flags

# A server process of its own and a few hundred sockets: run once, in the PostgreSQL leg of `make test`.
pytestmark = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="runs in the PostgreSQL leg"
)

SOCKETS = 150
BUDGET_KIB = 50


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _pending_ask(url: str, sockets: list[Any]) -> None:
    """A socket whose call waits for an answer to its elicitation, which never comes."""
    from websockets.asyncio.client import connect

    # Compression offered, as browsers and the websockets package do.
    ws = await connect(url, subprotocols=["mcp"], compression="deflate")
    sockets.append(ws)
    init = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "m"}}
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
    assert "result" in json.loads(await ws.recv())
    call = {"name": "test_elicitation", "arguments": {"message": "who?"}}
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
    while json.loads(await ws.recv()).get("method") != "elicitation/create":
        pass


async def _open(url: str, count: int) -> list[Any]:
    sockets: list[Any] = []
    for start in range(0, count, 25):
        await asyncio.gather(*(_pending_ask(url, sockets) for _ in range(min(25, count - start))))
    return sockets


@pytest.mark.anyio
async def test_a_socket_with_a_pending_ask_costs_under_50_kib() -> None:
    tmp = tempfile.mkdtemp(prefix="mcp-wsmem-")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DATABASE_URL": f"sqlite:///{tmp}/db.sqlite3",
        "MCP_ALLOW_ANONYMOUS": "1",
        "DJANGO_DEBUG": "0",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    port = free_port()
    server = serve_demo(port, env, None, uvicorn_flags())
    url = f"ws://127.0.0.1:{port}/mcp"
    try:
        # Warm: imports, caches and the worker threads are not what a socket costs.
        for ws in await _open(url, 50):
            await ws.close()
        await asyncio.sleep(1)
        before = _rss_kib(server.pid)
        sockets = await _open(url, SOCKETS)
        await asyncio.sleep(1)
        per_socket = (_rss_kib(server.pid) - before) / SOCKETS
        for ws in sockets:
            await ws.close()
    finally:
        server.kill()
        server.wait(10)
    assert per_socket < BUDGET_KIB, f"{per_socket:.1f} KiB per socket with a pending ask"
