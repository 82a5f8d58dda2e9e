"""Test settings: the demo project and the conformance fixtures, with a fixed requestState key.

DATABASE_URL picks the database (SQLite in memory by default; the suite also
runs on PostgreSQL), REDIS_URL the channel layer (in-memory by default).
"""

import os

from tests.run_names import RUN_ID, redis_prefix

os.environ.setdefault("DATABASE_URL", "sqlite:///:memory:")
# Redis keys of this run (channel layer, its groups, cache) carry its own prefix: two
# runs on one Redis database never cross. In the environment, for the processes it starts.
os.environ["REDIS_PREFIX"] = redis_prefix("test")

from project.conformance.settings import *  # noqa: F403
from project.conformance.settings import DATABASES, MCP_DJANGO

DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]", "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The admin styled in the browser test without collectstatic.
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = True
MCP_DJANGO = {
    **MCP_DJANGO,
    "REQUEST_STATE_KEY": "test-request-state-key-0123456789-abcdefghijklmnop",
    "ALLOW_ANONYMOUS": True,
    # Audit rows committed before each response, so none is written while the
    # in-memory database is flushed between tests (tests/test_audit.py turns the
    # production default, background writes, back on for itself).
    "AUDIT": {"ASYNC_WRITES": False},
}
if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    # pytest-django would make test_<NAME> (test_test for the Makefile's URL) for every
    # run: several runs on one PostgreSQL server would drop each other's. MCP_TEST_DB_NAME
    # picks a name; without it the run has one of its own (dropped at its end).
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("MCP_TEST_DB_NAME") or f"test_mcp_{RUN_ID}"}

# Worker threads must not keep connections between tests: an open connection
# holds locks on the in-memory SQLite database, and keeps PostgreSQL from
# dropping the test database at the end.
DATABASES["default"]["CONN_MAX_AGE"] = 0
