"""docs/deployment.md, run: two uvicorn instances behind nginx, PostgreSQL, Redis, one key.

nginx (Debian's package) is started here with the ``nginx`` block of
docs/deployment.md, on free loopback ports, with its files in a temporary
directory. Off CI the test is skipped when nginx is not installed (``make
proxy-deps`` installs it); on CI it must run.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import shared_services
from tests.processes import ROOT, free_port, spawn_demo, wait_listening
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


def uvicorn_flags() -> list[str]:
    """The documented instances' uvicorn options, after ``--port``."""
    found = re.search(
        r"^uvicorn project\.asgi:application --host 127\.0\.0\.1 --port 8001(.*?)&$", DOC.read_text(), re.M
    )
    assert found, "docs/deployment.md has no uvicorn line for port 8001"
    return found.group(1).split()


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
        self.start_instances(n)

    def start_instances(self, *ns: int) -> None:
        """Instances ``ns``, started side by side, returned once each listens."""
        for n in ns:
            with open(self.tmp / f"instance{n}.log", "ab") as log:
                self.servers[n] = spawn_demo(self.ports[n], self.env, log, uvicorn_flags())
        for n in ns:
            wait_listening(("127.0.0.1", self.ports[n]), f"instance {n}")

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
events {{ worker_connections 1024; }}
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
    d.db_name, db_url = shared_services.migrated_database("deploy")
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
    try:
        d.start_instances(0, 1)
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
        body = _echo_body(i)
        headers = dict(MODERN_HEADERS)
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


# -- the nginx block under concurrent flows, and with an instance killed ---------------------


def _echo_body(i: int) -> dict[str, Any]:
    return {
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


MODERN_HEADERS = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}


async def _flows(urls: list[str], flows: int, pause: tuple[float, float]) -> tuple[list[float], list[str]]:
    """``flows`` concurrent two-round flows, the second round after an idle pause drawn from ``pause``:
    (the second rounds' latencies, what went wrong)."""
    import random

    limits = httpx.Limits(max_connections=flows, max_keepalive_connections=flows)
    latencies: list[float] = []
    wrong: list[str] = []
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def flow(n: int) -> None:
            url = urls[n % len(urls)]
            first = await client.post(url, json=_echo_body(n), headers=MODERN_HEADERS)
            if first.status_code != 200:
                wrong.append(f"round 1: {first.status_code}")
                return
            await asyncio.sleep(random.uniform(*pause))
            started = time.monotonic()
            try:
                second = await client.post(url, json=_echo_body(n), headers=MODERN_HEADERS)
            except httpx.TransportError as exc:
                wrong.append(f"round 2: {exc!r}")
                return
            latencies.append(time.monotonic() - started)
            if second.status_code != 200 or second.json()["result"]["content"][0]["text"] != str(n):
                wrong.append(f"round 2: {second.status_code} {second.text[:80]}")

        await asyncio.gather(*(flow(n) for n in range(flows)))
    return latencies, wrong


# Around uvicorn's default keep-alive timeout (5 s): where an instance closing an idle
# connection meets nginx reusing it.
PAUSE = (4.9, 5.1)


def _p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


@pytest.mark.anyio
async def test_concurrent_flows_through_nginx_match_direct(deployment: Deployment) -> None:
    """Each flow's second round follows an idle pause around uvicorn's keep-alive timeout
    (5 s by default): nginx must never send it on an upstream connection the instance is
    closing ("upstream prematurely closed connection", then the instance marked failed)."""
    flows = 60
    log = deployment.tmp / "error.log"
    before = log.read_text() if log.exists() else ""
    direct = [f"http://127.0.0.1:{port}/mcp" for port in deployment.ports]
    # Twice each path, one after the other; the direct passes half a pause behind the passes
    # through nginx, so each path's rounds fall in the other's idle pause (a pass is mostly
    # that pause: four passes side by side by two take half as long as in a row), no round
    # meets another, and neither path has the machine's quieter moment to itself. A pass
    # through nginx starts only after the one before it ended: every second round's upstream
    # connection has been idle for the whole pause.
    through: list[float] = []  # each pass's p50
    straight: list[float] = []

    async def passes(urls: list[str], behind: float, p50s: list[float]) -> list[str]:
        await asyncio.sleep(behind)
        for _ in range(2):
            found, wrong = await _flows(urls, flows, PAUSE)
            if wrong:
                return wrong
            p50s.append(_p50(found))
        return []

    wrong_through, wrong_direct = await asyncio.gather(
        passes([deployment.url], 0, through), passes(direct, sum(PAUSE) / 4, straight)
    )
    assert not wrong_through, (wrong_through[:5], log.read_text()[len(before) :][-3000:])
    assert not wrong_direct, wrong_direct[:5]
    errors = log.read_text()[len(before) :] if log.exists() else ""
    assert "prematurely closed" not in errors, errors[-2000:]
    assert "temporarily disabled" not in errors, errors[-2000:]
    # Both paths share two cores with nginx and every other process of the machine: the
    # bound leaves room for that (docs/deployment.md has the numbers measured at 100 and 200
    # flows); the fault it guards against cost five times as much, in every pass. Each path is
    # judged by its better pass: once in CI one pass through nginx met a busy moment of the
    # machine (p50 94 ms against 16 ms directly) with nothing in nginx's log.
    assert min(through) <= 1.5 * min(straight) + 0.05, (through, straight)


def test_nginx_retires_idle_upstream_connections_before_the_instances_do() -> None:
    """The documented pair: nginx's upstream keepalive_timeout (60 s when unset) below the
    instances' uvicorn --timeout-keep-alive (5 s when unset), or nginx may send a request
    on a connection the instance is closing."""
    block = nginx_block()
    upstream = re.search(r"upstream mcp_django \{(.*?)\}", block, re.S)
    assert upstream
    found = re.search(r"keepalive_timeout\s+(\d+)s?;", upstream.group(1))
    nginx_seconds = int(found.group(1)) if found else 60
    flags = uvicorn_flags()
    uvicorn_seconds = int(flags[flags.index("--timeout-keep-alive") + 1]) if "--timeout-keep-alive" in flags else 5
    assert nginx_seconds < uvicorn_seconds, (nginx_seconds, uvicorn_seconds)


def _received(port: int) -> dict[str, int]:
    """Bytes each established connection to ``port`` on this host has received (the kernel's
    tcp_info, through ``ss``), by the connection's peer address."""
    out = subprocess.run(
        ["ss", "-Htin", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True, check=True
    ).stdout
    received: dict[str, int] = {}
    peer = ""
    for line in out.splitlines():
        if not line[:1].isspace():
            peer = line.split()[-1]
        elif found := re.search(r"\bbytes_received:(\d+)", line):
            received[peer] = int(found.group(1))
    return received


def _received_since(port: int, before: dict[str, int]) -> int:
    """Bytes received on ``port`` since ``before`` (``_received``), on connections old and new."""
    return sum(max(0, n - before.get(peer, 0)) for peer, n in _received(port).items())


def test_a_killed_instance_is_a_json_rpc_error_through_nginx(deployment: Deployment) -> None:
    """In-flight 2026-07-28 calls on an instance killed with SIGKILL: nginx's answer is a
    JSON-RPC error a client can parse, not its HTML page."""
    import concurrent.futures

    if shutil.which("ss") is None:
        if os.environ.get("CI"):
            pytest.fail("ss is not installed (make proxy-deps)")
        pytest.skip("ss is not installed (make proxy-deps): it tells when instance 0 has a call")
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "test_event_burst",
            "arguments": {"count": 0, "delay": 0, "then": 5},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "test_event_burst",
    }

    def call() -> httpx.Response:
        with httpx.Client(timeout=30) as client:
            return client.post(deployment.url, json=body, headers=headers)

    # An earlier test may have left instance 0 out of nginx's rotation (max_fails, fail_timeout):
    # echoes through nginx until one reaches it, so the calls below are spread over both.
    with httpx.Client(timeout=30) as client:
        deadline = time.monotonic() + 30
        while True:
            before = _received(deployment.ports[0])
            _modern_echoes(client, deployment.url, 2)
            if _received_since(deployment.ports[0], before) > 0:
                break
            assert time.monotonic() < deadline, "nginx sent no request to instance 0 for 30 s"
            time.sleep(0.2)
    request = len(json.dumps(body))
    try:
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            before = _received(deployment.ports[0])
            calls = [pool.submit(call) for _ in range(6)]
            # Killed once instance 0 has received a call: nginx never retries a POST it has sent
            # (proxy_next_upstream without non_idempotent), so that call is in flight there.
            deadline = time.monotonic() + 30
            while _received_since(deployment.ports[0], before) < request:
                assert time.monotonic() < deadline, "no call reached instance 0 in 30 s"
                time.sleep(0.02)
            deployment.kill_instance(0)
            answers = [c.result() for c in calls]
    finally:
        deployment.start_instance(0)
    failed = [a for a in answers if a.status_code != 200]
    assert failed, "no call was in flight on the killed instance"
    for answer in failed:
        assert answer.status_code == 502, answer.text
        assert answer.headers["content-type"].startswith("application/json"), answer.headers
        error = answer.json()
        assert error["jsonrpc"] == "2.0" and error["id"] is None
        assert error["error"]["code"] == -32603
    for answer in answers:
        if answer.status_code == 200:
            assert answer.json()["result"]["content"][0]["text"] == "burst done"
