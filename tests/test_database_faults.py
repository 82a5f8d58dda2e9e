"""PostgreSQL refusing connections or hung: token-authenticated calls get a JSON-RPC 503.

A PostgreSQL cluster of the test's own (initdb in a temporary directory, as the
postgres user, on a free port) so it can be stopped and frozen; the shared
server on 5432 is never touched. One uvicorn process serves project.asgi on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import ROOT, free_port, serve_demo, wait_listening
from tests.test_legacy_multiprocess import HEADERS

# Processes of their own, tens of seconds: run once, in the PostgreSQL/Redis leg of `make test`.
pytestmark = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="runs in the PostgreSQL leg"
)


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for root in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (root / name).exists():
            return str(root / name)
    return None


class Postgres:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mcp-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        shutil.chown(self.dir, "postgres", "postgres")

    def _as_postgres(self, *args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True)

    def init(self) -> None:
        self._as_postgres(_pg_bin("initdb") or "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        self._as_postgres(
            _pg_bin("pg_ctl") or "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )
        wait_listening(("127.0.0.1", self.port), "PostgreSQL")

    def stop(self) -> None:
        self._as_postgres(_pg_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def pids(self) -> list[int]:
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout.split()
        return [postmaster, *map(int, children)]

    def freeze(self, on: bool) -> None:
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP if on else signal.SIGCONT)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Postgres, list[str]]]:
    if _pg_bin("initdb") is None or shutil.which("runuser") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("needs initdb, pg_ctl and runuser (as root)")
        pytest.skip("needs initdb, pg_ctl and runuser (as root)")
    pg = Postgres()
    pg.init()
    pg.start()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")},
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": pg.url,
        "MCP_ALLOW_ANONYMOUS": "0",
        "MCP_AUTH_TIMEOUT": "3",
        "DJANGO_DB_CONNECT_TIMEOUT": "2",
        "DJANGO_DEBUG": "0",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    script = (
        "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token\n"
        "print(' '.join(Token.objects.create(user=User.objects.create_user(f'u{n}')).key for n in range(4)))"
    )
    tokens = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v0", "-c", script],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()[-4:]
    port = free_port()
    log = open(pg.dir / "uvicorn.log", "wb")
    server = serve_demo(port, env, log)
    try:
        yield f"http://127.0.0.1:{port}/mcp", pg, tokens
    finally:
        server.kill()
        server.wait(10)
        log.close()
        with contextlib.suppress(Exception):
            pg.freeze(False)
        with contextlib.suppress(Exception):
            pg.stop()
        shutil.rmtree(pg.dir, ignore_errors=True)


def echo(client: httpx.Client, url: str, token: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": MODERN_META},
    }
    headers = {
        **HEADERS,
        "authorization": f"Token {token}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    return client.post(url, json=body, headers=headers)


def legacy_initialize(client: httpx.Client, url: str, token: str) -> httpx.Response:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    return client.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        headers={**HEADERS, "authorization": f"Token {token}"},
    )


def assert_503(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == -32603


def test_database_refusing_connections_is_a_503_and_recovers(served: tuple[str, Postgres, list[str]]) -> None:
    url, pg, tokens = served
    with httpx.Client(timeout=20) as client:
        first = echo(client, url, tokens[0])
        assert first.status_code == 200 and "result" in first.json(), first.text
        assert first.json()["result"]["content"][0]["text"] == "hi"
        pg.stop()
        try:
            started = time.monotonic()
            # Tokens never seen by this process: the database is needed, and refuses.
            assert_503(echo(client, url, tokens[1]))
            assert_503(legacy_initialize(client, url, tokens[1]))
            assert time.monotonic() - started < 6
        finally:
            pg.start()
        # Back without a restart of the server.
        assert echo(client, url, tokens[1]).json()["result"]["content"][0]["text"] == "hi"


def test_database_hung_is_a_bounded_503(served: tuple[str, Postgres, list[str]]) -> None:
    url, pg, tokens = served
    with httpx.Client(timeout=30) as client:
        assert echo(client, url, tokens[2]).status_code == 200
        pg.freeze(True)
        try:
            started = time.monotonic()
            assert_503(echo(client, url, tokens[3]))
            # MCP_AUTH_TIMEOUT is 3 s here.
            assert time.monotonic() - started < 8
        finally:
            pg.freeze(False)
        deadline = time.monotonic() + 20
        while echo(client, url, tokens[3]).status_code != 200:
            assert time.monotonic() < deadline, "the server did not recover"
            time.sleep(0.5)
