"""Each MCP call on the ASGI fast path gets what Django's handler gives a request:
database connections closed or health-checked around it, in the thread that used them."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from tests import db_tools  # noqa: F401 - registers the tools
from tests.conftest import Raw
from tests.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ["lifecycle_async_orm", "lifecycle_sync_orm"]


def _postgres_only(reason: str) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(reason)


def _text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert not result.get("isError"), result
    return result["content"][0]["text"]


def _backends(probe: str) -> int:
    """Sessions of the test database, other than ours, whose last query looked for ``probe``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND query LIKE %s",
            [f"%{probe}%"],
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize("tool", TOOLS)
def test_no_connection_outlives_its_call(raw: Raw, tool: str) -> None:
    """CONN_MAX_AGE is 0 in the test settings: the connection a call opened is closed when it ends."""
    _postgres_only("counts connections in PostgreSQL's pg_stat_activity")
    for _ in range(3):
        probe = f"probe-{uuid.uuid4().hex}"
        assert _text(raw.call(tool, {"probe": probe})) == "0"
        # The server closed it before answering; PostgreSQL may take a moment to drop the session.
        deadline = time.monotonic() + 5
        while _backends(probe) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _backends(probe) == 0


# -- the database threads: Django's ThreadSensitiveContext and request signals, per call ---


def _database_thread_call(monkeypatch: pytest.MonkeyPatch, branches: int) -> tuple[list[tuple[int, Any]], list[int]]:
    """One call's scope around thread-sensitive queries (its own, its branches' and a task's):
    where each query ran, and the threads ``close_stale`` ran in."""
    import asyncio
    import threading

    from asgiref.sync import sync_to_async
    from django.db import connections

    from mcp_django import lifecycle

    closes: list[int] = []
    close_stale = lifecycle.close_stale

    def recording() -> None:
        closes.append(threading.get_ident())
        close_stale()

    monkeypatch.setattr(lifecycle, "close_stale", recording)

    def query() -> tuple[int, Any]:
        conn = connections["default"]
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1")
        return threading.get_ident(), conn

    async def branch() -> list[tuple[int, Any]]:
        first = await sync_to_async(query)()
        await asyncio.sleep(0)
        return [first, await sync_to_async(query)()]

    async def call() -> list[tuple[int, Any]]:
        entered = lifecycle.enter()
        assert entered is not None, "outside Django's handler and any host, the call has its scope"
        seen: list[tuple[int, Any]] = []
        try:
            if branches:
                seen.append(await sync_to_async(query)())
                for found in await asyncio.gather(*(branch() for _ in range(branches)), asyncio.create_task(branch())):
                    seen += found
        finally:
            cleanup = lifecycle.leave(entered)
            assert (cleanup is None) == (not branches), "only a call that used a database thread waits for one"
            if cleanup is not None:
                await lifecycle.finished(cleanup)
        return seen

    return asyncio.run(call()), closes


@pytest.mark.django_db
def test_the_thread_sensitive_calls_of_one_call_share_one_connection_cared_for_as_a_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Django's semantics, kept by the long-lived database threads: every thread-sensitive call
    of one MCP call (its parallel branches and tasks too) runs in one thread, so on one
    connection; the call's first job there starts with ``close_old_connections()`` (what
    ``request_started`` does) and one more job runs it when the call ends (``request_finished``),
    in that thread, before the call is over."""
    seen, closes = _database_thread_call(monkeypatch, branches=3)
    assert len(seen) == 1 + 4 * 2
    threads = {ident for ident, _ in seen}
    assert len(threads) == 1, "one call's thread-sensitive code ran in several threads"
    assert len({id(conn) for _, conn in seen}) == 1
    ident, conn = seen[0]
    assert closes == [ident, ident]
    if conn.vendor == "postgresql":  # (an in-memory SQLite database is never closed)
        assert conn.connection is None, "CONN_MAX_AGE is 0: the call's connection is closed at its end"


@pytest.mark.django_db
def test_a_call_that_makes_no_thread_sensitive_call_takes_no_database_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen, closes = _database_thread_call(monkeypatch, branches=0)
    assert seen == [] and closes == []


# -- a database restarted between two calls ---------------------------------------------


class Cluster:
    """A PostgreSQL cluster of our own, in a temporary directory, on a free port."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            pytest.skip("needs PostgreSQL's initdb")
        self.bin = Path(found[-1]).parent
        self.port = free_port()
        self.tmp = tempfile.mkdtemp(prefix="mcp-lifecycle-pg-")
        self.data = os.path.join(self.tmp, "data")
        self.as_owner: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.tmp, "postgres", "postgres")
            self.as_owner = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        # No pipes: a postmaster started by pg_ctl would hold them open.
        subprocess.run(
            [*self.as_owner, str(self.bin / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.tmp} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", self.data, "-o", options, "-l", os.path.join(self.tmp, "log"), "-w", "start")

    def restart(self) -> None:
        self._run("pg_ctl", "-D", self.data, "-l", os.path.join(self.tmp, "log"), "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def url(self, name: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    _postgres_only("runs on the PostgreSQL leg (it starts a cluster of its own)")
    own = Cluster()
    try:
        import psycopg

        with psycopg.connect(own.url().replace("postgres://", "postgresql://"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE lifecycle")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "DATABASE_URL": own.url("lifecycle")}
        env.pop("REDIS_URL", None)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "auth", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
        )
        yield own
    finally:
        own.stop()


SERVE = """
import sys
import django
django.setup()
import tests.db_tools
import uvicorn
from project.asgi import application
uvicorn.run(application, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="off")
"""


@pytest.fixture
def server(cluster: Cluster, request: Any) -> Iterator[str]:
    """A server process on the cluster, with the CONN_MAX_AGE the test asks for (health checks on)."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": cluster.url("lifecycle"),
        "DJANGO_CONN_MAX_AGE": str(request.param),
        "MCP_ALLOW_ANONYMOUS": "1",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("REDIS_URL", None)
    process = subprocess.Popen([sys.executable, "-c", SERVE, str(port)], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx.HTTPError:
                assert process.poll() is None, "the server process died"
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def _refused(response: httpx.Response) -> bool:
    body = response.json()
    return "result" not in body or bool(body["result"].get("isError"))


@pytest.mark.parametrize("server", [0, 60], indirect=True, ids=["CONN_MAX_AGE=0", "CONN_MAX_AGE=60"])
def test_calls_survive_a_database_restart(server: str, cluster: Cluster) -> None:
    with httpx.Client(timeout=30) as client:
        raw = Raw(server, client)
        for tool in TOOLS:
            assert _text(raw.call(tool, {"probe": "nobody"})) == "0"
        cluster.restart()
        # A connection attempt made while the cluster restarted (the audit writer's, say) trips
        # the database's breaker, whose probe tries again every 0.25 s (breaker.DATABASE_RETRY_SECONDS):
        # the database's return is seen within that, not necessarily by the very next call.
        deadline = time.monotonic() + 1
        while _refused(raw.call(TOOLS[0], {"probe": "nobody"})) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Every connection the first calls left is broken now: the next calls must not use it.
        for tool in TOOLS:
            assert _text(raw.call(tool, {"probe": "nobody"})) == "0", tool


# -- the breaker that lets a request fail at once while the database refuses connections ----


def test_a_breaker_admits_one_caller_every_retry_while_open() -> None:
    from mcp_django.breaker import Breaker

    gate = Breaker("test", retry=0.25)
    assert gate.admit()
    assert gate.failed(ConnectionRefusedError("connection refused"))
    assert not gate.failed(ConnectionRefusedError("connection refused")), "an outage begins once"
    assert not gate.admit()
    time.sleep(gate.retry + 0.05)
    # One caller tries for real; the others still fail at once until it tells.
    assert gate.admit()
    assert not gate.admit()
    gate.closed()
    assert gate.admit() and gate.down_since is None


def _prober(connect: Callable[[], None]) -> Any:
    from mcp_django.breaker import Breaker
    from mcp_django.postgresql.base import Prober

    return Prober(Breaker("the database 'test'", retry=0.25), connect)


def test_only_a_probe_says_the_database_answers() -> None:
    """A connection a pool lent from its idle ones proves nothing about the database now:
    a new connection (the probe) does, and its "yes" is reused for a moment."""
    from mcp_django.postgresql.base import FRESH

    probes: list[str] = []
    answering = [True]

    def connect() -> None:
        probes.append("probe")
        if not answering[0]:
            raise ConnectionRefusedError("refused")

    gate = _prober(connect)
    assert gate.answers() is True
    assert gate.answers() is True
    assert probes == ["probe"], "a fresh probe's verdict is reused"
    time.sleep(FRESH + 0.05)
    answering[0] = False
    assert gate.answers() is False
    assert gate.gate.down_since is not None
    assert gate.answers(wait=False) is False and len(probes) == 2, "while open, a probe every retry at most"
    answering[0] = True
    time.sleep(gate.gate.retry + 0.05)
    assert gate.answers() is True and gate.gate.down_since is None


def test_a_database_that_does_not_answer_a_new_connection_is_away_within_answer_seconds() -> None:
    """A frozen server accepts the TCP connection and never answers: the probe's own wait
    (connect_timeout, 2 s at least) is not waited for."""
    from mcp_django.postgresql.base import ANSWER_SECONDS

    release = threading.Event()
    gate = _prober(lambda: release.wait(10) and None)
    try:
        started = time.monotonic()
        assert gate.answers(wait=False) is None  # under way: not known yet
        assert gate.answers() is False
        assert ANSWER_SECONDS <= time.monotonic() - started < ANSWER_SECONDS + 0.5
        assert gate.gate.down_since is not None
    finally:
        release.set()
    deadline = time.monotonic() + 5
    while gate.gate.down_since is not None:  # the late answer closes it
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_database_that_stops_while_callers_wait_for_the_pool_is_noticed_at_their_next_asking() -> None:
    """The CI failure of a websocket opened right after a recovery: the database had answered a
    probe a moment before it stopped, so the caller trusted that "yes" and waited out the rest of
    the pool's timeout (here 10 s; the authentication timeout answered first, 3 s late). A caller
    never waits for the pool longer than one slice without asking the database again."""
    from psycopg_pool import PoolTimeout

    from mcp_django.postgresql.base import FRESH, SLICE, guarded_getconn

    class Reconnecting:
        """A pool whose connections died with the database: it lends nothing."""

        timeout = 10.0

        def __init__(self) -> None:
            self.waits: list[float] = []

        def getconn(self, timeout: float) -> None:
            self.waits.append(timeout)
            time.sleep(timeout)
            raise PoolTimeout("couldn't get a connection")

    answering = [True]

    def probe() -> None:
        if not answering[0]:
            raise ConnectionRefusedError("connection refused")

    gate = _prober(probe)
    assert gate.answers() is True  # a probe during the recovery: "the database answers"
    answering[0] = False  # ... and then it stops, within FRESH of that probe
    pool = Reconnecting()
    with pytest.raises(PoolTimeout, match="is unavailable"):
        guarded_getconn(pool, pool.getconn, gate)
    assert max(pool.waits) <= SLICE, f"the caller waited {max(pool.waits)} s for the pool in one go"
    assert gate.gate.down_since is not None
    # Spent waiting: the slices until the trusted "yes" went stale, then one probe said no.
    assert sum(pool.waits) <= SLICE + FRESH + SLICE


def test_a_busy_pool_is_waited_for_up_to_its_timeout_while_the_database_answers() -> None:
    from psycopg_pool import PoolTimeout

    from mcp_django.postgresql.base import SLICE, guarded_getconn

    class Busy:
        timeout = 1.0

        def __init__(self) -> None:
            self.waits: list[float] = []

        def getconn(self, timeout: float) -> str:
            self.waits.append(timeout)
            if len(self.waits) < 4:
                time.sleep(timeout)
                raise PoolTimeout("busy")
            return "connection"

    pool = Busy()
    assert guarded_getconn(pool, pool.getconn, _prober(lambda: None)) == "connection"
    assert len(pool.waits) == 4 and max(pool.waits) <= SLICE

    pool = Busy()
    pool.timeout = 0.5
    with pytest.raises(PoolTimeout, match="busy"):
        guarded_getconn(pool, pool.getconn, _prober(lambda: None))
    assert sum(pool.waits) <= 0.5 + 0.01


def test_an_outage_is_one_line_when_it_starts_and_one_when_it_ends_not_one_per_request(
    raw_inprocess: Raw, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # In process, with a database's breaker tripped as the mcp_django.postgresql backend
    # trips it: authentication and DRF permission checks then fail with OperationalError.
    import logging

    from django.contrib.auth.models import AnonymousUser
    from django.db import OperationalError
    from django.test import RequestFactory

    from mcp_django import breaker, lifecycle, pipeline
    from mcp_django.registry import mcp
    from mcp_django.views_as_tools.tools import ViewTool

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("the database 'outage' refuses connections since 0.1 s (connection refused)")

    monkeypatch.setattr(pipeline, "authenticate_and_remember", refused)
    drf_tools = [
        h for h in mcp.all_handlers() if isinstance(h, ViewTool) and h.operation is not None and h.operation.drf
    ]
    assert drf_tools, "the demo serves DRF view tools"
    for tool in drf_tools:
        monkeypatch.setattr(tool.operation, "build_request", refused)
    pool_logger = logging.getLogger("psycopg.pool")
    quiet = lifecycle.QuietDuringOutage()
    pool_logger.addFilter(quiet)
    gate = breaker.database("outage")
    try:
        with caplog.at_level(logging.WARNING):
            gate.failed(OperationalError("connection refused"))
            for _ in range(5):
                answer = raw_inprocess.call("echo", {"text": "x"}, headers={"authorization": "Bearer t"})
                assert answer.status_code == 503, answer.text
                for tool in drf_tools:
                    assert tool.has_permission(AnonymousUser(), RequestFactory().get("/")) is False
                pool_logger.warning("error connecting in %r: %s", "pool-1", "connection refused")
            gate.closed()
    finally:
        gate.down_since = None
        pool_logger.removeFilter(quiet)
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in lines] == [
        "the database 'outage' is unavailable (OperationalError: connection refused); "
        "requests that need it are answered 503 at once until it answers again",
        lines[1].getMessage(),
    ], [r.getMessage() for r in lines]
    assert lines[1].getMessage().startswith("the database 'outage' answers again (unavailable for")
    assert not any(r.exc_info for r in lines)


@pytest.mark.django_db
def test_a_slow_statement_on_a_database_that_answers_is_not_cut_short() -> None:
    """The watch of mcp_django.postgresql ends a wait only when the database does not answer
    a new connection: a statement longer than SLOW and ANSWER_SECONDS goes on."""
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL backend's watch")
    from mcp_django import breaker
    from mcp_django.postgresql.base import ANSWER_SECONDS, SLOW

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(%s), 1", [SLOW + ANSWER_SECONDS + 0.3])
        assert cursor.fetchone()[1] == 1
    assert not breaker.database(connection.alias).open
