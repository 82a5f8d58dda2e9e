"""Test settings: the demo project and the conformance fixtures, with a fixed requestState key.

DATABASE_URL picks the database (SQLite in memory by default; the suite also
runs on PostgreSQL), REDIS_URL the channel layer (in-memory by default).
"""

import os

os.environ.setdefault("DATABASE_URL", "sqlite:///:memory:")
# Redis keys of this run carry its own prefix: two runs on one host never cross.
os.environ.setdefault("REDIS_PREFIX", f"mcp-test-{os.getpid()}")

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
if os.environ.get("MCP_TEST_DB_NAME"):
    # Lets several suites share one PostgreSQL server at once.
    DATABASES["default"]["TEST"] = {"NAME": os.environ["MCP_TEST_DB_NAME"]}

# Worker threads must not keep connections between tests: an open connection
# holds locks on the in-memory SQLite database, and keeps PostgreSQL from
# dropping the test database at the end.
DATABASES["default"]["CONN_MAX_AGE"] = 0
