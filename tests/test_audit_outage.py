"""The audit log's database goes away and comes back under a running server.

A PostgreSQL cluster of this test's own (initdb in a temporary directory, a free
port, run as the ``postgres`` user) is stopped under a uvicorn process serving the
demo: calls that do not need the database keep working, refused states are still
refused at once, and every row queued meanwhile is written when the cluster is
back, without restarting the server. The shared PostgreSQL is never touched.
"""

from __future__ import annotations

import glob
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

from tests.conftest import MODERN, meta
from tests.processes import free_port

ROOT = Path(__file__).resolve().parent.parent


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found or shutil.which("runuser") is None or os.geteuid() != 0:
        return None
    return Path(found[-1]).parent


class Cluster:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="mcp-audit-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        shutil.chown(self.dir, "postgres", "postgres")
        self._as_postgres("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def _as_postgres(self, tool: str, *args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.bindir / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.dir,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")

    def stop(self) -> None:
        self._as_postgres("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def count(self, sql: str) -> int:
        import psycopg

        with psycopg.connect(self.url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
            return conn.execute(sql).fetchone()[0]

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("needs PostgreSQL's initdb and pg_ctl, and root to run them as postgres")
        pytest.skip("needs PostgreSQL's initdb and pg_ctl, and root to run them as postgres")
    made = Cluster(bindir)
    made.start()
    yield made
    made.destroy()


def _server(cluster: Cluster, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DATABASE_URL": cluster.url,
        "MCP_REQUEST_STATE_KEY": "outage-test-key-0123456789abcdefghijklmnopqrstuv",
        "MCP_ALLOW_ANONYMOUS": "1",
        "DJANGO_DEBUG": "0",
    }
    env.pop("REDIS_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "project.asgi:application", "--port", str(port), "--lifespan", "off"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.time() + 30
    while True:
        try:
            httpx.get(url, timeout=1)
            return process, url
        except httpx.TransportError:
            if time.time() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("uvicorn did not start: " + log.read_text()) from None
            time.sleep(0.1)


def _post(client: httpx.Client, url: str, method: str, params: dict, request_id: str) -> httpx.Response:
    params = {**params, "_meta": meta()}
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if "name" in params:
        headers["mcp-name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return client.post(url, json=body, headers=headers)


def _echo(client: httpx.Client, url: str, i: int) -> None:
    r = _post(client, url, "tools/call", {"name": "echo", "arguments": {"text": f"t{i}"}}, f"echo-{i}")
    assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == f"t{i}", r.text


def _refuse(client: httpx.Client, url: str, i: int) -> float:
    params = {
        "name": "test_input_required_result_elicitation",
        "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "x"}}},
        "requestState": "not-a-request-state",
    }
    started = time.monotonic()
    r = _post(client, url, "tools/call", params, f"refused-{i}")
    assert r.json()["error"]["code"] == -32602, r.text
    return time.monotonic() - started


def test_rows_queued_while_the_database_is_down_are_written_when_it_is_back(cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    process, url = _server(cluster, log)
    try:
        with httpx.Client(timeout=30) as client:
            _echo(client, url, 0)
            _refuse(client, url, 0)
            deadline = time.time() + 10
            while cluster.count("SELECT count(*) FROM mcp_django_auditevent") < 2 and time.time() < deadline:
                time.sleep(0.1)

            cluster.stop()
            for i in range(1, 21):
                _echo(client, url, i)
            # Still refused, and at once: the refusal does not wait for a database that is gone.
            took = [_refuse(client, url, i) for i in range(1, 6)]
            assert max(took) < 3, took

            cluster.start()
            expected = 2 + 20 + 5
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    if cluster.count("SELECT count(*) FROM mcp_django_auditevent") >= expected:
                        break
                except Exception:
                    pass
                time.sleep(0.2)
            assert cluster.count("SELECT count(*) FROM mcp_django_auditevent WHERE kind = 'completed'") == 21
            assert cluster.count("SELECT count(*) FROM mcp_django_auditevent WHERE kind = 'state_refused'") == 6
            # And the server goes on writing, with no restart.
            _echo(client, url, 99)
            deadline = time.time() + 10
            while cluster.count("SELECT count(*) FROM mcp_django_auditevent") < expected + 1:
                assert time.time() < deadline, "a row after the outage was not written"
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(10)
    output = log.read_text()
    assert "cannot be reached" in output and "is back" in output, output
    # One line when the database went away, one when it came back: no traceback per request.
    assert output.count("Traceback") == 0, output
