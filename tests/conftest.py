"""Fixtures shared by the suite: a live ASGI server, raw HTTP helpers, SDK clients."""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import httpx
import pytest

from tests.processes import free_port

# The mcp_client fixture: registered by the pytest11 entry point once the package is
# installed with this pyproject; named here too for an install made before it.
pytest_plugins = ["mcp_django.pytest_plugin"]

MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_INFO = "io.modelcontextprotocol/clientInfo"
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
T = TypeVar("T")


# Tests that start servers of their own (uvicorn processes, stdio servers, the node clients,
# Chromium, PostgreSQL clusters) or run the project's scripts in processes of their own:
# `make test` runs them once, in its last leg (`-m servers`); what they prove does not
# depend on which database the leg gives the suite. By module, or one test.
SERVER_TESTS = {
    "test_dpop_instances.py",
    "test_bench.py",
    "test_limits_redis.py",
    "test_admin_layout_browser.py",
    "test_mcp_tokens_browser.py",
    "test_mcp_apps_browser.py",
    "test_auth_faults.py",
    "test_oauth_mcp1.py",
    "test_tasks_worker.py",
    "test_tasks_outages.py",
    "test_tasks_rq.py",
    "test_websocket_memory.py",
    "test_audit_browser.py",
    "test_audit_row_browser.py",
    "test_audit_outage.py",
    "test_clients.py",
    "test_database_faults.py",
    "test_deployment.py",
    "test_faults.py",
    "test_legacy_multiprocess.py",
    "test_stdio.py",
    "test_soak.py::test_a_short_soak_with_redis_frozen_holds_the_documented_bounds",
    "test_lifecycle.py::test_calls_survive_a_database_restart",
    "test_first_hour.py::test_readme_server_with_two_workers_speaks_lifespan_and_every_confirm_succeeds",
}

# Tests that run Python processes of their own (seconds each) whose outcome does not depend on
# the leg's database (most use an in-memory SQLite of their own): `make test` runs them once,
# in its last leg (`-m once`), and the Python 3.11 leg runs them too, unlike the server tests.
ONCE_TESTS = {
    "test_authserver.py::test_check_deploy_shows_no_toolkit_warning",
    "test_auth.py::test_token_authentication_without_authtoken_is_a_check_and_a_401_not_a_500",
    "test_first_hour.py::test_default_demo_has_no_conformance_fixtures",
    "test_tasks_python_client.py",
    "test_first_hour.py::test_another_process_derives_the_same_keys_from_secret_key",
    "test_first_hour.py::test_landing_page_sdk_snippet_runs",
    "test_soak.py::test_the_soak_refuses_an_unknown_fault",
    "test_tracing.py::test_without_opentelemetry_nothing_is_imported",
    "test_tracing.py::test_with_the_api_but_no_provider_a_call_makes_no_span",
    "test_tracing.py::test_the_docs_example_runs_as_written",
    # The demo started as the bench starts it, on a SQLite file of its own, in every leg.
    "test_lazy_start.py",
    # docs/deployment.md's recipe in a copy of the project, on a SQLite file of its own.
    "test_deployment_recipe.py",
    "test_lazy_views.py::test_the_demo_serves_the_bench_calls_without_importing_the_shop_views",
    "test_lazy_views.py::test_the_admin_and_mcp_handlers_show_the_views_registered_by_path",
    "test_lazy_views.py::test_manage_py_check_reports_a_path_naming_nothing",
}

# Tests that hold a wall-clock bound of about a second (an outage is answered within one, the
# service back within one; nginx adds at most half the latency): `make test` runs them after the
# rest, alone in one process (scripts/pytest_leg.sh), so other workers' load cannot break them.
# Not test_faults.py's test_a_stream_followed_from_a_killed_instance_ends_promptly: it waits out
# the relay's fixed silence (15 s, then 5 s for the 404) with a bound of 20 s on the first, which
# a loaded machine's scheduling delays do not approach; alone it would be a fifth of the pass.
TIMED_TESTS = {
    "test_dpop_instances.py::test_a_frozen_replay_cache_refuses_within_a_second_and_recovers",
    "test_audit_outage.py",
    "test_limits_redis.py::test_the_cache_away_is_answered_within_a_second",
    "test_auth_faults.py",
    "test_database_faults.py",
    "test_deployment.py",
    "test_faults.py::test_an_ended_session_stays_ended_after_a_redis_restart",
    "test_faults.py::test_updates_reach_every_instance_soon_after_redis_forgets",
    "test_faults.py::test_redis_down_is_a_prompt_jsonrpc_503",
    "test_faults.py::test_redis_hung_requests_are_bounded_and_not_serialised",
    "test_faults.py::test_a_reply_the_holder_cannot_receive_fails_promptly_both_ways",
    "test_faults.py::test_a_websocket_on_a_killed_instance_closes_at_once",
    "test_faults.py::test_a_frozen_redis_is_waited_on_once_per_outage",
    "test_faults.py::test_replies_cross_instances_as_soon_as_redis_returns",
    "test_faults.py::test_a_reply_redis_took_before_it_hung_is_answered_202_within_the_layer_timeout",
    "test_soak.py::test_a_short_soak_with_redis_frozen_holds_the_documented_bounds",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # `--dist loadfile` (the Makefile's), with the long modules of tests/scheduling.py handed out first, test by test.
    if config.getoption("dist") != "loadfile":
        return None
    from tests.scheduling import SpreadFirstScheduling

    return SpreadFirstScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from pathlib import Path

    here = Path(__file__).parent
    from tests.scheduling import FIRST_MODULES, SPREAD_MODULES

    # A renamed file or test must not silently leave the sets.
    for name in SERVER_TESTS | ONCE_TESTS | TIMED_TESTS | SPREAD_MODULES | FIRST_MODULES:
        module, _, test = name.partition("::")
        source = here / module
        assert source.exists() and (not test or f"def {test}(" in source.read_text()), f"{name}?"
    for item in items:
        module = item.path.name
        test = f"{module}::{getattr(item, 'originalname', item.name)}"
        if module in SERVER_TESTS or test in SERVER_TESTS:
            item.add_marker(pytest.mark.servers)
        if module in ONCE_TESTS or test in ONCE_TESTS:
            item.add_marker(pytest.mark.once)
        if module in TIMED_TESTS or test in TIMED_TESTS:
            item.add_marker(pytest.mark.timed)
        if module == "test_fuzz.py":
            item.add_marker(pytest.mark.fuzz)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # After every fixture's teardown: no server of this run still uses the keys.
    from tests import shared_services

    shared_services.forget_run_keys()
    shared_services.drop_template()


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_use_migrations: bool,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's (pytest_django.fixtures.django_db_setup, the same steps), but under xdist,
    with the suite's usual options, each worker's database is a copy of one the leg migrates
    once (tests/worker_databases.py)."""
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _disable_migrations, _get_databases_for_setup

    from tests import worker_databases

    verbosity = request.config.option.verbose
    keepdb = django_db_keepdb and not django_db_createdb
    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    copied = django_db_use_migrations and not keepdb and worker_databases.applies(aliases, serialized_aliases)
    if not django_db_use_migrations:
        _disable_migrations()
    with django_db_blocker.unblock():
        if copied:
            databases = worker_databases.set_up(verbosity)
        else:
            databases = setup_databases(
                verbosity=verbosity,
                interactive=False,
                aliases=aliases,
                serialized_aliases=serialized_aliases,
                keepdb=keepdb,
            )
    yield
    if keepdb:
        return
    with django_db_blocker.unblock():
        if copied:
            worker_databases.tear_down(databases, verbosity)
        else:
            teardown_databases(databases, verbosity=verbosity)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _flush_only_filled_tables() -> None:
    """A transactional test's flush empties only the tables that hold rows.

    It used to be retried while the database reported a lock conflict (a live-server
    thread still writing a call that had answered: in-memory SQLite said "locked",
    PostgreSQL picked the TRUNCATE as a deadlock victim). The tests whose calls end after
    their answer now wait for those calls' rows (tests/test_legacy_ages.py, test_sync_work.py,
    test_modern_rounds.py), and the in-process client writes its rows in its own
    transaction: in full runs of both legs no flush met a conflict, so one would now
    fail the test that left a writer running, by name, instead of being retried.
    """
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown

    def fixture_teardown(self: Any) -> None:
        if self.available_apps is None and not self.serialized_rollback:
            _flush_filled_tables(self)
        else:
            original(self)

    TransactionTestCase._fixture_teardown = fixture_teardown  # type: ignore[method-assign]


def _flush_filled_tables(test: Any) -> None:
    """What TransactionTestCase's flush achieves, at a fraction of its cost: available_apps
    for every transactional test, without narrowing the app registry.

    Django's flush truncates every table (about 30 here, when a test fills three or four)
    and then sends post_migrate, which makes every content type and permission again: a
    third of the PostgreSQL leg's time went to it. Here one query finds the tables that
    hold rows, and only they are emptied (with CASCADE, as Django does for available_apps:
    empty tables that point at them may be left alone). Content types and permissions are
    not flushed, so there is nothing to make again: they describe the models, which no
    test changes; a test that changes them anyway has them made afresh after it.
    """
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType
    from django.core.management.color import no_style
    from django.core.management.sql import emit_post_migrate_signal
    from django.db import connections

    reference = {ContentType._meta.db_table, Permission._meta.db_table}
    for db_name in test._databases_names(include_mirrors=False):
        connection = connections[db_name]
        tables = sorted(connection.introspection.django_table_names(only_existing=True, include_views=False))
        quote = connection.ops.quote_name
        probe = " UNION ALL ".join(f"SELECT {i} WHERE EXISTS (SELECT 1 FROM {quote(t)})" for i, t in enumerate(tables))
        with connection.cursor() as cursor:
            cursor.execute(probe)
            filled = [tables[row[0]] for row in cursor.fetchall()]
            reference_rows = {}
            for table in sorted(reference):
                cursor.execute(f"SELECT COUNT(*) FROM {quote(table)}")
                reference_rows[table] = cursor.fetchone()[0]
        flushed = [t for t in filled if t not in reference]
        if flushed:
            connection.ops.execute_sql_flush(
                connection.ops.sql_flush(no_style(), flushed, reset_sequences=False, allow_cascade=True)
            )
        if reference_rows != _REFERENCE_ROWS.setdefault(db_name, reference_rows):
            # A test added or removed content types or permissions: made again from the models.
            connection.ops.execute_sql_flush(
                connection.ops.sql_flush(no_style(), sorted(reference), reset_sequences=False, allow_cascade=True)
            )
            emit_post_migrate_signal(verbosity=0, interactive=False, db=db_name)


# The number of content types and permissions migrate made, per database.
_REFERENCE_ROWS: dict[str, dict[str, int]] = {}


_flush_only_filled_tables()


class LiveServer:
    """uvicorn serving project.asgi in a thread of this process (it shares the test database)."""

    def __init__(self) -> None:
        import uvicorn

        from project.asgi import application

        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.thread.start()
        deadline = time.time() + 15
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def wait_idle(self, timeout: float = 2.0) -> bool:
        """Until no request or websocket of the test is still being served (uvicorn's tasks),
        for at most ``timeout`` seconds; whether it got there.

        A client may have its answer while the server still finishes the request (a refused
        websocket upgrade's audit row, a call's cleanup); that work writing while the test's
        flush truncates the tables is a deadlock on PostgreSQL (the TRUNCATE holds the users'
        table and wants the audit table the writer holds, the writer's key check the reverse).
        A stream a test leaves open is not waited for beyond the bound."""
        deadline = time.monotonic() + timeout
        while self.server.server_state.tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


@pytest.fixture(scope="session")
def live_server_instance(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    # Depending on django_db_setup makes the server stop before the test database goes.
    server = LiveServer()
    server.start()
    yield server
    server.stop()
    with django_db_blocker.unblock():
        _end_other_sessions()


def _end_other_sessions() -> None:
    """Worker threads of the server (pool, audit writer, Channels) may still hold
    PostgreSQL sessions; the test database cannot be dropped while they do."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def live_url(live_server_instance: LiveServer, transactional_db: None) -> Iterator[str]:
    """URL of the live /mcp endpoint; the test's database is visible to it."""
    yield live_server_instance.url
    # No audit row may still be on its way when the database is flushed: first the requests
    # still being served end (they may queue rows), then the queued rows are committed.
    from mcp_django import audit

    live_server_instance.wait_idle()
    audit.flush()


def served_before_expiry(issue: Callable[[float], tuple[T, datetime.datetime]], use: Callable[[T], int]) -> T:
    """A credential that expires soon, whose first use was answered 200 before its expiry.

    ``issue(seconds)`` makes one living that long and returns it with its expiry; ``use``
    returns the status of a request made with it. On a loaded machine the first use may be
    answered only after the expiry, which then says nothing: a credential living twice as
    long is tried. So no clock decides the test's outcome, only how long it takes.
    """
    from django.utils import timezone

    seconds = 0.3
    while True:
        credential, expires = issue(seconds)
        status = use(credential)
        if timezone.now() < expires:
            assert status == 200, status
            return credential
        assert seconds < 60, "no first use was answered before its credential expired"
        seconds *= 2


def wait_past(moment: datetime.datetime) -> None:
    """Sleep until ``moment`` (an aware datetime) is past by Django's clock."""
    from django.utils import timezone

    while (left := (moment - timezone.now()).total_seconds()) >= 0:
        time.sleep(left + 0.01)


def mcp_settings(**changes: Any) -> Any:
    """override_settings for some MCP_DJANGO keys, keeping the test settings' others."""
    from django.conf import settings
    from django.test import override_settings

    return override_settings(MCP_DJANGO={**settings.MCP_DJANGO, **changes})


def meta(caps: dict[str, Any] | None = None, version: str = MODERN, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        META_VERSION: version,
        META_CAPS: ALL_CAPS if caps is None else caps,
        META_INFO: {"name": "tests", "version": "1"},
    }
    out.update(extra)
    return out


class Raw:
    """Hand-made 2026-07-28 requests, for the wire details the SDK hides."""

    def __init__(self, url: str, client: httpx.Client) -> None:
        self.url = url
        self.client = client
        self.next_id = 1

    def headers(self, method: str, params: dict[str, Any], **extra: str) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": method,
        }
        name = params.get("uri" if method == "resources/read" else "name")
        if method in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
            headers["mcp-name"] = name
        headers.update(extra)
        return headers

    def post(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        caps: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        with_meta: bool = True,
        request_id: Any = None,
    ) -> httpx.Response:
        params = dict(params or {})
        if with_meta and "_meta" not in params:
            params["_meta"] = meta(caps)
        if request_id is None:
            request_id = self.next_id
            self.next_id += 1
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return self.client.post(self.url, json=body, headers={**self.headers(method, params), **(headers or {})})

    def call(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        for key in ("inputResponses", "requestState"):
            if key in kw:
                params[key] = kw.pop(key)
        return self.post("tools/call", params, **kw)


@pytest.fixture
def raw(live_url: str) -> Iterator[Raw]:
    with httpx.Client(timeout=30) as client:
        yield Raw(live_url, client)


INPROCESS_URL = "http://testserver/mcp"


@pytest.fixture
def raw_inprocess(db: None) -> Iterator[Raw]:
    """Raw requests through the ASGI application in process (mcp_django.testing.HttpxTransport):
    no socket, and sync work in the test's thread, so a plain (non-transactional) test database works."""
    from mcp_django.testing import HttpxTransport

    with httpx.Client(transport=HttpxTransport(), timeout=30) as client:  # type: ignore[arg-type]
        yield Raw(INPROCESS_URL, client)


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    import json

    return [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]


@contextlib.asynccontextmanager
async def sdk_client(url: str, *, token: str | None = None, mode: str = MODERN, **kwargs: Any) -> AsyncIterator[Any]:
    """The official SDK's client (mcp 2.x) on our endpoint."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Token {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **kwargs) as client:
            yield client
