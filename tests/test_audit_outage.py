"""The audit log's database goes away and comes back under a running server.

A PostgreSQL cluster of this test's own (initdb in a temporary directory, a free
port, run as the ``postgres`` user) is stopped under a uvicorn process serving the
demo: calls that do not need the database keep working, refused states are still
refused at once, and every row queued meanwhile is written when the cluster is
back, without restarting the server. The shared PostgreSQL is never touched.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import shared_services
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
        self.database = "postgres"
        self.up = False
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
        self.up = True

    def stop(self) -> None:
        self._as_postgres("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self.up = False

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.database}"

    def admin(self, statement: str) -> None:
        import psycopg

        url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(statement)

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


@pytest.fixture(scope="module")
def migrated() -> Iterator[Cluster]:
    """The module's cluster, with a database ``migrated`` made once: each test's server gets
    a copy of it (CREATE DATABASE ... TEMPLATE, a fraction of a second; a migration costs seconds)."""
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("needs PostgreSQL's initdb and pg_ctl, and root to run them as postgres")
        pytest.skip("needs PostgreSQL's initdb and pg_ctl, and root to run them as postgres")
    made = Cluster(bindir)
    try:
        made.start()
        made.admin("CREATE DATABASE migrated")
        made.database = "migrated"
        # The run's migrated dump when it has one (a fraction of a second), else a migration.
        dump = shared_services.migrated_dump()
        if dump is not None:
            shared_services.load_dump(dump, made.url)
        else:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput"],
                cwd=ROOT,
                env=_env(made),
                check=True,
                capture_output=True,
            )
        yield made
    finally:
        made.destroy()


_copies = itertools.count()


@pytest.fixture
def cluster(migrated: Cluster) -> Cluster:
    """The cluster up (a failed test may have left it stopped), on a fresh copy of ``migrated``."""
    if not migrated.up:
        migrated.start()
    migrated.database = f"test{next(_copies)}"
    migrated.admin(f"CREATE DATABASE {migrated.database} TEMPLATE migrated")
    return migrated


def _env(cluster: Cluster, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        **extra,
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DATABASE_URL": cluster.url,
        "MCP_REQUEST_STATE_KEY": "outage-test-key-0123456789abcdefghijklmnopqrstuv",
        "MCP_ALLOW_ANONYMOUS": "1",
        "DJANGO_DEBUG": "0",
    }
    env.pop("REDIS_URL", None)
    return env


def _server(cluster: Cluster, log: Path, **extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """The demo on the cluster's database (migrated: a copy of ``migrated``)."""
    env = _env(cluster, **extra)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "project.asgi:application", "--port", str(port), "--lifespan", "off"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    # Importing the demo takes seconds; on a machine shared by many runs, tens of them.
    deadline = time.time() + 90
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


def _refuse(client: httpx.Client, url: str, i: int | str) -> float:
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
    assert "the audit log's database is unavailable" in output and "the audit log's database answers again" in output, (
        output
    )
    # One line when the database went away, one when it came back: no traceback per request.
    assert output.count("Traceback") == 0, output


def test_refusals_across_a_stop_are_answered_at_once_and_written_once(cluster: Cluster, tmp_path: Path) -> None:
    """Refusals arrive without a pause while the database stops and starts again.

    The server borrows connections from a pool (as docs/deployment.md advises), whose
    wait for a connection is 10 s: a refusal that waited for its row's commit waited
    that long while the database was going away, and the client gave up. Each refusal
    must be answered within a second, and be exactly one row once the database is back.
    """
    log = tmp_path / "server.log"
    process, url = _server(cluster, log, DJANGO_DB_POOL_MAX="4")
    took: dict[str, float] = {}
    failures: list[str] = []
    stop = threading.Event()

    def refuse_until_stopped() -> None:
        with httpx.Client(timeout=30) as client:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    took[f"r{i}"] = _refuse(client, url, f"r{i}")
                except Exception as exc:
                    failures.append(f"r{i}: {exc!r}")

    try:
        sender = threading.Thread(target=refuse_until_stopped)
        sender.start()
        try:
            time.sleep(1.0)
            cluster.stop()
            time.sleep(4.0)
            cluster.start()
            time.sleep(1.5)
        finally:
            stop.set()
            sender.join(60)
        assert not failures, failures
        slow = {request_id: round(seconds, 2) for request_id, seconds in took.items() if seconds >= 1.0}
        assert not slow, f"{len(slow)} of {len(took)} refusals took a second or more: {slow}"
        assert len(took) >= 10, took  # refusals did arrive all along

        sql = "SELECT count(*) FROM mcp_django_auditevent WHERE kind = 'state_refused'"
        deadline = time.time() + 30
        while cluster.count(sql) < len(took):
            assert time.time() < deadline, f"{cluster.count(sql)} of {len(took)} refusals written"
            time.sleep(0.2)
        time.sleep(1.0)  # anything written twice would land now
        by_id = _ids(cluster, "SELECT request_id FROM mcp_django_auditevent WHERE kind = 'state_refused'")
        assert sorted(by_id) == sorted(f"refused-{request_id}" for request_id in took), by_id
        # One row per refusal: no second row for a call the client gave up on.
        assert cluster.count("SELECT count(*) FROM mcp_django_auditevent WHERE kind <> 'state_refused'") == 0
    finally:
        process.terminate()
        process.wait(10)


def _ids(cluster: Cluster, sql: str) -> list[str]:
    import psycopg

    with psycopg.connect(cluster.url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        return [row[0] for row in conn.execute(sql).fetchall()]
