"""This test run's own names on the machine's shared PostgreSQL and Redis.

Several runs may share both servers at once (two checkouts, CI beside a developer),
even with the same REDIS_URL: every database a run creates, and every Redis key
prefix it uses (channel layer, its groups, cache), carries RUN_ID.
"""

from __future__ import annotations

import os
import secrets

# In the environment, so the processes a run starts (a server, a second Django process
# on the test database) belong to the run and use its names. The pid alone is not
# enough: runs in two containers on one host may have the same one.
RUN_ID = os.environ.setdefault("MCP_TEST_RUN_ID", f"{os.getpid()}_{secrets.token_hex(4)}")
# Under pytest-xdist (make test's -n) each worker is a run of its own: its own test database,
# databases and Redis prefixes. The workers inherit the controller's RUN_ID, and the processes a
# worker starts inherit the worker's (already suffixed: the check keeps them in the worker's run).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and not RUN_ID.endswith(f"_{_WORKER}"):
    RUN_ID = os.environ["MCP_TEST_RUN_ID"] = f"{RUN_ID}_{_WORKER}"


def redis_prefix(role: str) -> str:
    """A Redis key prefix (channel layer and cache) of this run's, for one use in it."""
    return f"mcp-{role}-{RUN_ID}"


def database_name(role: str) -> str:
    """A PostgreSQL database name of this run's, for one use in it."""
    return f"mcp_{role}_{RUN_ID}"
