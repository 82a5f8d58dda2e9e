"""docs/deployment.md, run: two uvicorn instances behind nginx, PostgreSQL, Redis, one key.

nginx (Debian's package) is started here with the ``nginx`` block of
docs/deployment.md, on free loopback ports, with its files in a temporary
directory. Off CI the test is skipped when nginx is not installed (``make
proxy-deps`` installs it); on CI it must run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import shared_services
from tests.processes import ROOT, free_port, serve_demo, wait_listening
from tests.run_names import redis_prefix
from tests.test_legacy_multiprocess import HEADERS, _events

# Processes of their own, tens of seconds: run once, in the PostgreSQL/Redis leg of `make test`.
pytestmark = [shared_services.needs_postgres, shared_services.needs_redis]


DOC = ROOT / "docs" / "deployment.md"
POOL_MAX = 4


def nginx_block() -> str:
    """The documented configuration, verbatim."""
    found = re.search(r"```nginx\n(.*?)```", DOC.read_text(), re.S)
    assert found, "docs/deployment.md has no nginx block"
    return found.group(1)


class Deployment:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = [free_port(), free_port()]
        self.front = free_port()
        self.servers: list[subprocess.Popen[bytes] | None] = [None, None]
        self.nginx: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.db_name = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.front}/mcp"

    def start_instance(self, n: int) -> None:
        with open(self.tmp / f"instance{n}.log", "ab") as log:
            self.servers[n] = serve_demo(self.ports[n], self.env, log)

    def kill_instance(self, n: int) -> None:
        server = self.servers[n]
        if server is not None:
            server.kill()
            server.wait(10)
            self.servers[n] = None

    def start_nginx(self, nginx: str) -> None:
        block = (
            nginx_block()
            .replace("127.0.0.1:8001", f"127.0.0.1:{self.ports[0]}")
            .replace("127.0.0.1:8002", f"127.0.0.1:{self.ports[1]}")
            .replace("127.0.0.1:8080", f"127.0.0.1:{self.front}")
        )
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.tmp / sub).mkdir()
            (self.tmp / sub).chmod(0o777)
        user = "user root root;\n" if os.geteuid() == 0 else ""
        config = f"""{user}daemon off;
worker_processes 1;
pid {self.tmp}/nginx.pid;
error_log {self.tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {self.tmp}/body;
    proxy_temp_path {self.tmp}/proxy;
    fastcgi_temp_path {self.tmp}/fastcgi;
    uwsgi_temp_path {self.tmp}/uwsgi;
    scgi_temp_path {self.tmp}/scgi;
{block}
}}
"""
        (self.tmp / "nginx.conf").write_text(config)
        self.nginx = subprocess.Popen(
            [nginx, "-p", str(self.tmp), "-c", str(self.tmp / "nginx.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_listening(("127.0.0.1", self.front), "nginx")


def _nginx() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    nginx = _nginx()
    if nginx is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is not installed (make proxy-deps)")
        pytest.skip("nginx is not installed (make proxy-deps)")
    redis_url = shared_services.redis()
    tmp = Path(tempfile.mkdtemp(prefix="mcp-deploy-"))
    tmp.chmod(0o755)
    d = Deployment(tmp)
    # A database and a key prefix of this run's: other runs' instances never meet these.
    d.db_name, db_url = shared_services.fresh_database("deploy")
    d.env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",  # the demo and the test_* tools
        "DATABASE_URL": db_url,
        "DJANGO_DB_POOL_MAX": str(POOL_MAX),
        "REDIS_URL": redis_url,
        "REDIS_PREFIX": redis_prefix("deploy"),
        "MCP_REQUEST_STATE_KEY": "deployment-test-key-0123456789abcdef",
        "MCP_ALLOW_ANONYMOUS": "1",
        "DJANGO_DEBUG": "0",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=d.env, check=True)
    try:
        d.start_instance(0)
        d.start_instance(1)
        d.start_nginx(nginx)
        yield d
    finally:
        if d.nginx is not None:
            d.nginx.terminate()
            d.nginx.wait(10)
        d.kill_instance(0)
        d.kill_instance(1)
        shared_services.drop_database(d.db_name)
        shutil.rmtree(tmp, ignore_errors=True)


def _modern_echoes(client: httpx.Client, url: str, n: int, token: str | None = None) -> None:
    """n 2026-07-28 calls, each answered right."""
    for i in range(n):
        body = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"text": str(i)},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        headers = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}
        if token is not None:
            headers["authorization"] = f"Token {token}"
        response = client.post(url, json=body, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["content"][0]["text"] == str(i)


@pytest.mark.anyio
async def test_legacy_sdk_session_with_an_ask_through_nginx(deployment: Deployment) -> None:
    """Initialize, the call's SSE stream and the reply POST are spread over both
    instances by nginx's round robin; the ask's request must arrive unbuffered."""
    import mcp.types as types

    from tests.conftest import sdk_client

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async with sdk_client(deployment.url, mode="legacy", elicitation_callback=on_elicit) as client:
        for n in range(4):
            result = await client.call_tool("test_elicitation", {"message": f"Who? {n}"})
            assert result.content[0].text == (
                'User response: action=accept, content={"username":"ada","email":"ada@example.com"}'
            )


@pytest.mark.anyio
async def test_modern_sdk_rounds_through_nginx(deployment: Deployment) -> None:
    """2026-07-28 input_required rounds: each round may reach another instance (one key)."""
    import mcp.types as types

    from tests.conftest import sdk_client

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with sdk_client(deployment.url, elicitation_callback=on_elicit) as client:
        for _ in range(4):
            result = await client.call_tool("test_streaming_elicitation")
            assert result.content[0].text == "Hello, Ada!"


def test_sse_events_pass_unbuffered(deployment: Deployment) -> None:
    """An event reaches the client while the call still runs: the call cannot end before the
    client answers the elicitation it sends, so a buffered stream would never deliver it
    (the read times out) and no clock decides the outcome."""
    with httpx.Client(timeout=30) as client:
        init = {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t"}}
        response = client.post(
            deployment.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=HEADERS
        )
        headers = {
            **HEADERS,
            "mcp-session-id": response.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        client.post(deployment.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "Who?"}},
        }
        with client.stream("POST", deployment.url, json=call, headers=headers) as stream:
            events = _events(stream.iter_lines())
            asked = next(events)
            assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "Who?"
            answer = {"action": "accept", "content": {"username": "ada", "email": "a@b"}}
            reply = client.post(
                deployment.url, json={"jsonrpc": "2.0", "id": asked["id"], "result": answer}, headers=headers
            )
            assert reply.status_code == 202
            done = next(events)
            assert done["id"] == 2 and done["result"]["content"][0]["text"].startswith("User response: action=accept")


@pytest.mark.anyio
async def test_websocket_through_nginx(deployment: Deployment) -> None:
    from tests.legacy_fixtures import ws_client

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        return {"result": {"action": "accept", "content": {"username": "ada", "email": "a@b"}}}

    async with ws_client(deployment.url, answer) as ws:
        reply = await ws.initialize({"elicitation": {}})
        assert reply["result"]["protocolVersion"] == "2025-11-25"
        result = await ws.request("tools/call", {"name": "test_elicitation", "arguments": {"message": "?"}})
        assert json.loads(json.dumps(result))["result"]["content"][0]["text"].startswith("User response: action=accept")


def test_pooled_connections_stay_within_the_pool(deployment: Deployment) -> None:
    """Each instance holds at most DJANGO_DB_POOL_MAX connections, however many threads ran."""
    import concurrent.futures

    # Tokens no instance has seen: authenticating each one queries the database from a worker thread.
    script = (
        "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token\n"
        "print(' '.join(Token.objects.create(user=User.objects.create_user(f'p{n}')).key for n in range(24)))"
    )
    tokens = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v0", "-c", script],
        cwd=ROOT,
        env=deployment.env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()[-24:]

    def calls(token: str) -> None:
        with httpx.Client(timeout=30) as client:
            _modern_echoes(client, deployment.url, 4, token)

    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        list(pool.map(calls, tokens))
    import psycopg

    with psycopg.connect(shared_services.database_url("postgres"), autocommit=True) as conn:
        held = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (deployment.db_name,)
        ).fetchone()[0]
    assert 0 < held <= 2 * POOL_MAX


def test_an_instance_killed_leaves_modern_flows_to_the_other(deployment: Deployment) -> None:
    deployment.kill_instance(0)
    try:
        with httpx.Client(timeout=30) as client:
            _modern_echoes(client, deployment.url, 10)
    finally:
        deployment.start_instance(0)
