"""A frozen Redis costs a request with a credential nothing: the principal cache never waits on it.

The demo runs under uvicorn with a redis-server of the test's own (a free port, a temporary
directory; the shared Redis is never touched), which the test freezes with SIGSTOP, and a
database of its own on the shared PostgreSQL (a copy of the run's migrated one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import shared_services
from tests.processes import ROOT, free_port, serve_demo
from tests.test_faults import Redis

# Processes of their own, a minute or two: run once, in the PostgreSQL/Redis leg of `make test`
# (the demo's database is a copy of the run's migrated one; Redis is the test's own).
pytestmark = shared_services.needs_postgres

MODERN = "2026-07-28"
# Far below the 2 s socket timeout a read from the frozen Redis waits; generous for a loaded machine.
PROMPT = 0.5


class Demo:
    def __init__(self, tmp: Path, redis: Redis, database_url: str) -> None:
        self.tmp = tmp
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis.url,
            "REDIS_PREFIX": "auth-faults",
            "MCP_REQUEST_STATE_KEY": "auth-faults-key-0123456789abcdefghij",
            "MCP_ALLOW_ANONYMOUS": "0",
            "DJANGO_DEBUG": "0",
        }
        self.servers: list[subprocess.Popen[bytes]] = []

    def serve(self, name: str, **env: str) -> str:
        port = free_port()
        with open(self.tmp / f"{name}.log", "ab") as log:
            self.servers.append(serve_demo(port, {**self.env, **env}, log))
        return f"http://127.0.0.1:{port}/mcp"

    def stop_servers(self) -> None:
        for server in self.servers:
            server.kill()
            server.wait(10)
        self.servers.clear()

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def prepared() -> Iterator[tuple[Demo, Redis, str]]:
    """Redis, the database (a copy of the run's migrated one) and a user's token, once for the
    module's tests."""
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("needs redis-server")
        pytest.skip("needs redis-server")
    tmp = Path(tempfile.mkdtemp(prefix="mcp-auth-faults-"))
    redis = Redis(tmp)
    db_name, db_url = shared_services.migrated_database("auth_faults")
    d = Demo(tmp, redis, db_url)
    try:
        redis.start()
        made = subprocess.run(
            [
                sys.executable,
                "-c",
                "import django; django.setup()\n"
                "from django.contrib.auth.models import User\n"
                "from rest_framework.authtoken.models import Token\n"
                "print(Token.objects.create(user=User.objects.create_user('frozen')).key)\n",
            ],
            cwd=ROOT,
            env=d.env,
            check=True,
            capture_output=True,
            text=True,
        )
        yield d, redis, made.stdout.strip().splitlines()[-1]
    finally:
        redis.resume() if redis.process is not None else None
        d.stop_servers()
        redis.stop()
        shared_services.drop_database(db_name)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def demo(prepared: tuple[Demo, Redis, str]) -> Iterator[tuple[Demo, Redis, str]]:
    """Each test serves the demo its own way; Redis answers again after it, whatever happened."""
    d, redis, _token = prepared
    try:
        yield prepared
    finally:
        redis.resume()
        d.stop_servers()


def _echo(client: httpx.Client, url: str, token: str) -> tuple[int, float]:
    params = {
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {
        "authorization": f"Token {token}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    started = time.monotonic()
    answer = client.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers
    )
    took = time.monotonic() - started
    assert answer.status_code != 200 or answer.json()["result"]["content"][0]["text"] == "hi", answer.text
    return answer.status_code, took


def test_a_frozen_redis_does_not_slow_a_token_authenticated_call(demo: tuple[Demo, Redis, str]) -> None:
    d, redis, token = demo
    url = d.serve("default")
    with httpx.Client(timeout=30) as client:
        assert _echo(client, url, token)[0] == 200  # warm: the worker's pools, the cache
        redis.pause()
        # Over 3 s: hits, and misses once the 1 s cache has expired (the token is looked up anew).
        results = []
        ends = time.monotonic() + 3
        while time.monotonic() < ends:
            results.append(_echo(client, url, token))
            time.sleep(0.1)
        redis.resume()
    assert {status for status, _took in results} == {200}
    assert max(took for _status, took in results) < PROMPT, results
    assert "principal" not in d.log("default")  # nothing asked Redis, so nothing failed to answer


def test_the_longer_cache_gives_up_on_a_frozen_redis_at_once_and_logs_the_outage_once(
    demo: tuple[Demo, Redis, str],
) -> None:
    """The opt-in longer cache reads versions in Redis: one request waits out the socket timeout,
    the breaker spares the others, and the outage is one log line."""
    d, redis, token = demo
    url = d.serve("longer", MCP_AUTH_CACHE_SECONDS="60")
    with httpx.Client(timeout=30) as client:
        assert _echo(client, url, token)[0] == 200
        assert _echo(client, url, token)[0] == 200
        redis.pause()
        results = [_echo(client, url, token) for _ in range(12)]
        redis.resume()
        time.sleep(5.5)  # the breaker closes: Redis is asked again, and answers
        after = [_echo(client, url, token) for _ in range(3)]
    assert {status for status, _took in results + after} == {200}
    slow = [took for _status, took in results if took >= PROMPT]
    assert len(slow) <= 1, results
    log = d.log("longer")
    assert log.count("MCP_DJANGO['SESSION_CACHE'] ('default') is unavailable") == 1, log
    assert log.count("answers again") == 1, log
