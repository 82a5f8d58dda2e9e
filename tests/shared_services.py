"""The machine's shared PostgreSQL and Redis, as the tests that need them find them.

The machine starts both before a session or a CI run (``make test`` runs
scripts/services.sh before its PostgreSQL leg): a test never starts, stops or
restarts them. A leg without them (the SQLite leg) skips these tests; a leg told to
use them (DATABASE_URL, REDIS_URL) fails when they do not answer. A test that needs a
server to go away starts one of its own, in a temporary directory on a free port
(tests/test_faults.py, tests/test_database_faults.py, tests/test_audit_outage.py).
The databases made here are named by tests/run_names.py, so concurrent runs never meet.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.processes import ROOT, listening
from tests.run_names import database_name, redis_prefix


def _postgres_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if urlsplit(url).scheme in ("postgres", "postgresql", "pgsql") else None


POSTGRES_URL = _postgres_url()
REDIS_URL = os.environ.get("REDIS_URL") or None

# Not configured is a leg without them (the SQLite leg), not a fault: skip.
needs_postgres = pytest.mark.skipif(
    POSTGRES_URL is None, reason="runs in the PostgreSQL leg (DATABASE_URL=postgres://)"
)
needs_redis = pytest.mark.skipif(REDIS_URL is None, reason="needs the shared Redis (REDIS_URL)")


def _answering(url: str, default_port: int, what: str) -> None:
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or default_port)
    if not listening(address):
        # Configured but down: the run was told to use it, so this is a failure, not a skip.
        pytest.fail(
            f"{what} is not answering on {address[0]}:{address[1]}: the machine starts it before "
            "the run (scripts/services.sh), a test never does"
        )


def postgres() -> str:
    """DATABASE_URL, once the shared PostgreSQL answers (skips outside the PostgreSQL leg)."""
    if POSTGRES_URL is None:
        pytest.skip("runs in the PostgreSQL leg (DATABASE_URL=postgres://)")
    _answering(POSTGRES_URL, 5432, "PostgreSQL")
    return POSTGRES_URL


def redis() -> str:
    """REDIS_URL, once the shared Redis answers (skips when the run has none)."""
    if REDIS_URL is None:
        pytest.skip("needs the shared Redis (REDIS_URL)")
    _answering(REDIS_URL, 6379, "Redis")
    return REDIS_URL


def database_url(name: str) -> str:
    """The URL of database ``name`` on the shared PostgreSQL (same server and user)."""
    return urlunsplit(urlsplit(postgres())._replace(scheme="postgresql", path=f"/{name}"))


def admin(statement: str) -> None:
    """One statement on the server's maintenance database (CREATE/DROP DATABASE)."""
    import psycopg

    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        conn.execute(statement)


def fresh_database(role: str) -> tuple[str, str]:
    """A new, empty database of this run's: its name and its URL."""
    name = database_name(role)
    admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin(f"CREATE DATABASE {name}")
    return name, database_url(name)


# This run's migrated database (migrated_database), once made.
_template: str | None = None


def _migrated_template() -> str:
    global _template
    if _template is None:
        name, url = fresh_database("template")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.conformance.settings", "DATABASE_URL": url}
        try:
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        except BaseException:
            drop_database(name)  # half migrated: never a template
            raise
        _template = name
    return _template


def migrated_database(role: str) -> tuple[str, str]:
    """A new database of this run's with the demo's tables (project.conformance.settings): its
    name and its URL. A copy of a template the run migrates once: CREATE DATABASE ... TEMPLATE
    takes a fraction of a second, a migration seconds."""
    template = _migrated_template()
    name = database_name(role)
    admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin(f"CREATE DATABASE {name} TEMPLATE {template}")
    return name, database_url(name)


def drop_template() -> None:
    """Drop the template of migrated_database, if this run made one (and its dump)."""
    global _template, _dump
    if _template is not None:
        drop_database(_template)
        _template = None
    if _dump is not None:
        _dump.unlink(missing_ok=True)
        _dump = None


# migrated_database's template as SQL (migrated_dump), once written.
_dump: Path | None = None


def migrated_dump() -> Path | None:
    """The demo's migrated tables as an SQL script (pg_dump of migrated_database's template), for
    a test's PostgreSQL cluster of its own to load instead of migrating (a fraction of a second,
    where a migration costs seconds); None outside the PostgreSQL leg or without pg_dump."""
    global _dump
    if POSTGRES_URL is None or shutil.which("pg_dump") is None or shutil.which("psql") is None:
        return None
    if _dump is None:
        url = database_url(_migrated_template())
        fd, path = tempfile.mkstemp(prefix="mcp-migrated-", suffix=".sql")
        os.close(fd)
        subprocess.run(
            ["pg_dump", "--no-owner", "--no-privileges", "--file", path, url], check=True, capture_output=True
        )
        _dump = Path(path)
    return _dump


def load_dump(dump: Path, url: str) -> None:
    """Load migrated_dump's script into the (empty) database at ``url``."""
    subprocess.run(
        ["psql", "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "--file", str(dump), url],
        check=True,
        capture_output=True,
    )


def drop_database(name: str) -> None:
    admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def forget_run_keys() -> int:
    """Delete this run's keys from the shared Redis (every prefix of tests/run_names.py):
    they would otherwise stay until they expire, up to a day. Other runs' keys are untouched."""
    if REDIS_URL is None:
        return 0
    import redis as redis_client

    client = redis_client.Redis.from_url(REDIS_URL, socket_timeout=5, socket_connect_timeout=2)
    try:
        keys = list(client.scan_iter(match=redis_prefix("*") + ":*", count=500))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        return len(keys)
    except redis_client.RedisError:
        return 0  # a Redis that is gone has already failed the tests that needed it
    finally:
        client.close()


@contextlib.contextmanager
def demo_instances(role: str, count: int = 2, **env: str) -> Iterator[list[str]]:
    """``count`` demo instances (uvicorn, project.conformance.settings) on one new database of this
    run's and the shared Redis under a key prefix of this run's: their /mcp URLs. ``env`` adds
    to (or overrides) their environment."""
    from tests.processes import free_port, serve_demo

    db_name, db_url = migrated_database(role)
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.conformance.settings",
        "DATABASE_URL": db_url,
        "REDIS_URL": redis(),
        "REDIS_PREFIX": redis_prefix(role),
        "MCP_REQUEST_STATE_KEY": f"{role}-test-key-0123456789abcdef0123456789",
        "MCP_ALLOW_ANONYMOUS": "1",
        "DJANGO_DEBUG": "0",
        **env,
    }
    ports = [free_port() for _ in range(count)]
    servers = [serve_demo(port, environment) for port in ports]
    try:
        yield [f"http://127.0.0.1:{port}/mcp" for port in ports]
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(10)
        drop_database(db_name)
