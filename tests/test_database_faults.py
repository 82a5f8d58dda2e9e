"""PostgreSQL refusing connections or hung: token-authenticated calls get a JSON-RPC 503.

A PostgreSQL cluster of the test's own (initdb in a temporary directory, as the
postgres user, on a free port) so it can be stopped and frozen; the shared
server on 5432 is never touched. Uvicorn processes serve project.asgi on it, each on
a database of its own (without and with the pool).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import shared_services
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
        # --no-sync, and fsync=off below: a throwaway cluster needs no durability against a
        # machine crash (a stopped or killed server still finds every write it made), and
        # syncing costs seconds on a busy disk.
        self._as_postgres(
            _pg_bin("initdb") or "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
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
            # A backend may end between pgrep and the signal.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP if on else signal.SIGCONT)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


@dataclass
class Cluster:
    pg: Postgres
    env: dict[str, str]  # the demo's environment (on database migrated)
    tokens: list[str]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """One PostgreSQL cluster for the module's servers (a test stops or freezes it while
    the others' servers sit idle), and the demo's environment on it. Its database
    ``migrated`` holds the demo's tables and four users' tokens, once: each server gets a
    copy (CREATE DATABASE ... TEMPLATE, a fraction of a second; a migration costs seconds)."""
    if _pg_bin("initdb") is None or shutil.which("runuser") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("needs initdb, pg_ctl and runuser (as root)")
        pytest.skip("needs initdb, pg_ctl and runuser (as root)")
    pg = Postgres()
    try:
        pg.init()
        pg.start()
        _admin(pg, "CREATE DATABASE migrated")
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")},
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": pg.url.rsplit("/", 1)[0] + "/migrated",
            "MCP_ALLOW_ANONYMOUS": "0",
            "MCP_AUTH_TIMEOUT": "3",
            # The longer principal cache (an opt-in; 1 s by default): a token checked before the
            # outage stays known through it, so a call that needs no database is served.
            "MCP_AUTH_CACHE_SECONDS": "60",
            "DJANGO_DB_CONNECT_TIMEOUT": "2",
            "DJANGO_DEBUG": "0",
        }
        # The tables loaded from the run's migrated dump (a fraction of a second), or migrated
        # here, in the process that makes the tokens (one start of Django, not two).
        dump = shared_services.migrated_dump()
        if dump is not None:
            shared_services.load_dump(dump, env["DATABASE_URL"])
        script = (
            ("" if dump else "from django.core.management import call_command; call_command('migrate', verbosity=0)\n")
            + "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token\n"
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
        yield Cluster(pg, env, tokens)
    finally:
        with contextlib.suppress(Exception):
            pg.freeze(False)
        with contextlib.suppress(Exception):
            pg.stop()
        shutil.rmtree(pg.dir, ignore_errors=True)


def _admin(pg: Postgres, statement: str) -> None:
    import psycopg

    with psycopg.connect(pg.url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(statement)


def _env(cluster: Cluster, name: str, **extra: str) -> dict[str, str]:
    """The demo's environment on database ``name`` of the cluster."""
    return {**cluster.env, "DATABASE_URL": cluster.pg.url.rsplit("/", 1)[0] + f"/{name}", **extra}


@contextlib.contextmanager
def _serve(cluster: Cluster, name: str, **extra: str) -> Iterator[tuple[str, Postgres, list[str]]]:
    """The demo on database ``name``, a copy of the cluster's ``migrated`` (four users' tokens)."""
    _admin(cluster.pg, f"CREATE DATABASE {name} TEMPLATE migrated")
    port = free_port()
    log = open(cluster.pg.dir / f"uvicorn-{name}.log", "wb")
    server = serve_demo(port, _env(cluster, name, **extra), log)
    try:
        yield f"http://127.0.0.1:{port}/mcp", cluster.pg, cluster.tokens
    finally:
        server.kill()
        server.wait(10)
        log.close()


@pytest.fixture(scope="module")
def served(cluster: Cluster) -> Iterator[tuple[str, Postgres, list[str]]]:
    """Without a pool: one connection per thread."""
    with _serve(cluster, "served") as found:
        yield found


POOLED = {"DJANGO_DB_POOL_MAX": "4"}


@pytest.fixture(scope="module")
def pooled(cluster: Cluster) -> Iterator[tuple[str, Postgres, list[str]]]:
    """With the psycopg pool of docs/deployment.md."""
    with _serve(cluster, "pooled", **POOLED) as found:
        yield found


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
        # Back without a restart of the server, once the breaker lets a request try the database
        # again (lifecycle.Reachability.RETRY, 0.25 s after the last refused attempt: a cluster
        # that starts sooner than that sees the first request refused at once), within a second.
        back = time.monotonic()
        while (again := echo(client, url, tokens[1])).status_code == 503 and time.monotonic() - back < 1:
            time.sleep(0.05)
        assert again.status_code == 200 and again.json()["result"]["content"][0]["text"] == "hi", again.text


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


def tools_list(client: httpx.Client, url: str, token: str | None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}}
    headers = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    if token is not None:
        headers["authorization"] = f"Token {token}"
    return client.post(url, json=body, headers=headers)


def _timed(request: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = request()
    return response, time.monotonic() - started


def test_pooled_database_refusing_is_a_503_within_a_second(pooled: tuple[str, Postgres, list[str]]) -> None:
    """With the pool, a refused connection used to cost each request the pool's timeout (10 s),
    and the first success after the database's return several more seconds of its backoff."""
    url, pg, tokens = pooled
    with httpx.Client(timeout=30) as client:
        assert echo(client, url, tokens[0]).status_code == 200
        assert tools_list(client, url, tokens[0]).status_code == 200
        pg.stop()
        try:
            requests: list[tuple[str, Callable[[], httpx.Response]]] = [
                ("echo", lambda: echo(client, url, tokens[1])),
                ("legacy initialize", lambda: legacy_initialize(client, url, tokens[1])),
                ("tools/list", lambda: tools_list(client, url, tokens[1])),
                # Authenticated from the principal cache: the tools' permission checks need the database.
                ("tools/list, a known token", lambda: tools_list(client, url, tokens[0])),
                ("echo again", lambda: echo(client, url, tokens[1])),
            ]
            for name, request in requests:
                response, elapsed = _timed(request)
                assert_503(response)
                assert elapsed < 1, f"{name} took {elapsed:.1f} s"

            # Under load: every request is answered within the bound, none waits for another.
            def one(n: int) -> tuple[httpx.Response, float]:
                with httpx.Client(timeout=30) as own:
                    call = tools_list if n % 2 else echo
                    return _timed(lambda: call(own, url, tokens[1 + n % 3]))

            with concurrent.futures.ThreadPoolExecutor(12) as workers:
                answers = list(workers.map(one, range(24)))
            for response, elapsed in answers:
                assert_503(response)
                assert elapsed < 1.5, f"a request under load took {elapsed:.1f} s"
            # Requests that do not need the database are served: a token in the principal
            # cache (kept for a minute here, see _serve).
            served = echo(client, url, tokens[0])
            assert served.json()["result"]["content"][0]["text"] == "hi", served.text
        finally:
            pg.start()
        back = time.monotonic()
        while True:
            response = echo(client, url, tokens[2])
            if response.status_code == 200:
                break
            assert_503(response)
            time.sleep(0.05)
        recovered = time.monotonic() - back
        assert response.json()["result"]["content"][0]["text"] == "hi"
        assert recovered < 1, f"the first success came {recovered:.1f} s after the database's return"


@pytest.fixture(params=["auto", "websockets"])
def ws_served(
    request: Any, cluster: Cluster, pooled: tuple[str, Postgres, list[str]]
) -> Iterator[tuple[str, Postgres, list[str]]]:
    """The pooled demo under each of uvicorn's websocket implementations (its default, and
    ``--ws websockets``, which used to drop the connection without an answer)."""
    if request.param == "auto":
        yield pooled
        return
    _, pg, tokens = pooled
    port = free_port()
    server = serve_demo(port, _env(cluster, "pooled", **POOLED), None, ["--ws", request.param])
    try:
        yield f"http://127.0.0.1:{port}/mcp", pg, tokens
    finally:
        server.kill()
        server.wait(10)


@pytest.mark.anyio
async def test_websocket_during_an_outage_is_a_503(ws_served: tuple[str, Postgres, list[str]]) -> None:
    """Not a 403 (which reads as bad credentials) after the pool's timeout: 503, at once."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    url, pg, tokens = ws_served
    ws_url = url.replace("http://", "ws://")
    headers = {"Authorization": f"Token {tokens[3]}"}
    pg.stop()
    try:
        started = time.monotonic()
        with pytest.raises(InvalidStatus) as refused:
            async with connect(ws_url, subprotocols=["mcp"], additional_headers=headers, open_timeout=20):
                pass
        elapsed = time.monotonic() - started
        response = refused.value.response
        assert response.status_code == 503
        assert response.headers["Retry-After"]
        assert response.headers["Content-Type"].startswith("application/json")
        assert json.loads(response.body)["error"]["code"] == -32603
        assert elapsed < 1, f"the refusal took {elapsed:.1f} s"
    finally:
        pg.start()
    # Back: the same credentials open a socket.
    from tests.legacy_fixtures import ws_client

    deadline = time.monotonic() + 5
    while True:
        try:
            async with ws_client(url, additional_headers=headers) as ws:
                reply = await ws.initialize({})
                assert reply["result"]["protocolVersion"]
                break
        except InvalidStatus as exc:
            assert exc.response.status_code == 503
            assert time.monotonic() < deadline, "the server did not recover"
            await asyncio.sleep(0.1)


# A database that accepts connections but never answers (SIGSTOP): a wait on it is given up
# within SLOW + ANSWER_SECONDS (mcp_django.postgresql.base), a new connection within
# connect_timeout (2 s here, libpq's least); the breaker then answers at once. The bounds below
# add scheduling slack for a loaded 2-core machine.
FROZEN_FIRST = 2.5
FROZEN_THEN = 0.5


@pytest.mark.parametrize("options", [{}, POOLED], ids=["persistent connections", "pool"])
def test_a_frozen_database_is_a_prompt_503_and_spares_what_needs_none(
    cluster: Cluster, options: dict[str, str]
) -> None:
    """Issue 29, fault 3: with the database stopped by SIGSTOP, a request needing it used to
    hang for the whole freeze (5 to 10 s, a tools/list 19.9 s), and the rest behind it."""
    name = "frozen_pool" if options else "frozen"
    with _serve(cluster, name, MCP_ALLOW_ANONYMOUS="1", **options) as (url, pg, tokens):
        known = tokens[0]  # in the principal cache (60 s here) before the freeze

        def warm(n: int) -> int:
            with httpx.Client(timeout=30) as own:
                return echo(own, url, known).status_code + tools_list(own, url, known).status_code

        # Several threads' connections (and the pool's) in use before the freeze.
        with concurrent.futures.ThreadPoolExecutor(8) as workers:
            assert set(workers.map(warm, range(16))) == {400}
        seen: dict[str, list[tuple[float, float, int]]] = {"needs": [], "echo": [], "list": [], "own list": []}

        def load(kind: str, n: int) -> None:
            with httpx.Client(timeout=30) as own:
                while (sent := time.monotonic()) < stop:
                    if kind == "needs":  # a token never seen: authenticating it queries the database
                        response = echo(own, url, tokens[1 + n % 3])
                    elif kind == "echo":
                        response = echo(own, url, known)
                    elif kind == "list":  # anonymous: no permission check of the demo's queries
                        response = tools_list(own, url, None)
                    else:  # the tools' permission checks of a user query the database: 503 or fewer tools
                        response = tools_list(own, url, known)
                    seen[kind].append((sent - frozen, time.monotonic() - sent, response.status_code))
                    if kind == "needs":
                        assert_503(response)
                    elif kind == "own list" and response.status_code == 503:
                        assert_503(response)
                    else:
                        assert response.status_code == 200 and "result" in response.json(), response.text
                    time.sleep(0.05)

        pg.freeze(True)
        frozen = time.monotonic()
        stop = frozen + 6
        try:
            with concurrent.futures.ThreadPoolExecutor(8) as workers:
                jobs = [workers.submit(load, kind, n) for kind in seen for n in range(2 + (kind == "needs"))]
                for job in jobs:
                    job.result()
        finally:
            pg.freeze(False)
        back = time.monotonic()
        with httpx.Client(timeout=30) as client:
            while (again := echo(client, url, tokens[1])).status_code != 200:
                assert_503(again)
                assert time.monotonic() - back < 1, "the database's return was not seen within a second"
                time.sleep(0.05)
        assert again.json()["result"]["content"][0]["text"] == "hi"
        log_path = pg.dir / f"uvicorn-{name}.log"
        deadline = time.monotonic() + 5  # the audit writer tries again every second
        while "the audit log's database answers again" not in (log := log_path.read_text()):
            if "the audit log's database is unavailable" not in log or time.monotonic() > deadline:
                break
            time.sleep(0.1)

    def worst(kind: str, after: float = 0.0) -> float:
        return max(took for at, took, _status in seen[kind] if at >= after)

    report = {kind: [(round(at, 2), round(took, 3)) for at, took, _ in rows] for kind, rows in seen.items()}
    assert all(len(rows) > 10 for rows in seen.values()), report
    # What needs the database: 503 within the bound, then at once.
    assert worst("needs") < FROZEN_FIRST, report
    assert worst("needs", after=FROZEN_FIRST) < FROZEN_THEN, report
    assert worst("own list") < FROZEN_FIRST and worst("own list", after=FROZEN_FIRST) < FROZEN_THEN, report
    # What needs none is served throughout, as promptly as ever: an echo by a user in the
    # principal cache, an anonymous tools/list.
    assert worst("echo") < FROZEN_THEN and worst("list") < FROZEN_THEN, report

    # One line when each breaker opened, one when it closed: none per request, no traceback.
    def lines(start: str) -> int:
        return sum(line.startswith(start) for line in log.splitlines())

    for what in ("the database 'default'", "the audit log's database"):
        assert lines(f"{what} is unavailable") == lines(f"{what} answers again") <= 1, log
    assert lines("the database 'default' is unavailable") == 1, log
    assert "Traceback" not in log and "could not reach the database" not in log, log


TASKS_META = {
    **MODERN_META,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def tasks_request(client: httpx.Client, url: str, token: str, method: str, params: dict[str, Any]) -> httpx.Response:
    name = params.get("taskId", params.get("name"))
    headers = {
        **HEADERS,
        "authorization": f"Token {token}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        "mcp-name": name,
    }
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {**params, "_meta": TASKS_META}}
    return client.post(url, json=body, headers=headers)


def test_tasks_during_an_outage_log_only_the_breakers_lines(served: tuple[str, Postgres, list[str]]) -> None:
    """docs/deployment.md, "What an outage logs": polls of a task while the database refuses are
    503s (within a second each) and log nothing of their own, no "tasks/get failed" traceback."""
    url, pg, tokens = served
    log = pg.dir / "uvicorn-served.log"
    with httpx.Client(timeout=20) as client:
        created = tasks_request(client, url, tokens[0], "tools/call", {"name": "sales_report", "arguments": {}})
        task_id = created.json()["result"]["taskId"]
        assert tasks_request(client, url, tokens[0], "tasks/get", {"taskId": task_id}).status_code == 200
        seen = log.stat().st_size
        pg.stop()
        try:
            for method in ("tasks/get", "tasks/update", "tasks/cancel") * 4:
                params = {"taskId": task_id, "inputResponses": {}}
                response, elapsed = _timed(partial(tasks_request, client, url, tokens[0], method, params))
                assert_503(response)
                assert elapsed < 1, f"{method} took {elapsed:.1f} s"
        finally:
            pg.start()
        deadline = time.monotonic() + 5
        while (again := tasks_request(client, url, tokens[0], "tasks/get", {"taskId": task_id})).status_code == 503:
            assert time.monotonic() < deadline, "the server did not recover"
            time.sleep(0.05)
        assert again.json()["result"]["taskId"] == task_id
    with open(log, "rb") as lines:
        lines.seek(seen)
        said = lines.read().decode(errors="replace")
    assert "Traceback" not in said and "tasks/" not in said and "could not reach" not in said, said
    assert said.count("the database 'default' is unavailable (") == 1, said
    assert said.count("the database 'default' answers again (") == 1, said
