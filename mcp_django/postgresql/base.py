"""Django's PostgreSQL backend, failing fast while the database refuses connections.

Set ``ENGINE`` to ``"mcp_django.postgresql"`` instead of
``"django.db.backends.postgresql"``; every option is Django's. What changes is
only how a connection is obtained (see :class:`~mcp_django.lifecycle.Reachability`):

- a connection that cannot be made trips a breaker: until the database accepts
  one again, connecting fails at once (one caller tries every 0.25 s), so each
  request needing the database is answered 503 in milliseconds instead of
  waiting out ``connect_timeout`` or the pool's ``timeout``;
- with Django's psycopg pool (``OPTIONS["pool"]``), a caller waits for the pool
  in slices of 0.2 s, and after each slice the pool has not served it asks the
  database directly whether it accepts connections (one caller at a time, a
  "yes" kept for a quarter of a second): the pool waits for its own reconnection
  attempts, which cannot tell a busy pool from a database that refuses. While the
  database answers, the caller goes on waiting, up to the pool's ``timeout`` in
  all. Asking after every slice (not once) is what bounds a database that stops
  while callers wait: they hear of it within half a second, not at ``timeout``.
"""

from __future__ import annotations

import time
from typing import Any

from django.db.backends.postgresql import base

from ..lifecycle import Reachability, reachability

# How long a caller waits for the pool before asking the database itself (and again
# between two askings).
SLICE = 0.2


class GuardedPool:
    """The psycopg pool as Django's backend uses it, with :meth:`getconn` guarded."""

    def __init__(self, pool: Any, gate: Reachability, probe: Any) -> None:
        self._pool = pool
        self._gate = gate
        self._probe = probe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def getconn(self, timeout: float | None = None) -> Any:
        from psycopg_pool import PoolTimeout

        total = self._pool.timeout if timeout is None else timeout
        deadline = time.monotonic() + total
        while True:
            left = deadline - time.monotonic()
            try:
                return self._pool.getconn(min(SLICE, max(left, 0.001)))
            except PoolTimeout:
                if left <= SLICE:
                    raise
            # Not lent yet: every connection is busy, or the pool cannot connect. A
            # database that answered a moment ago may have stopped since: ask again.
            if not self._gate.answers(self._probe):
                raise PoolTimeout(f"the database refuses connections ({self._gate.reason})")


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is None:
            return None
        return GuardedPool(pool, reachability(self.alias), self._probe)

    def _probe(self) -> None:
        params = self.get_connection_params()
        params.pop("pool", None)
        self.Database.connect(**params).close()

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        gate = reachability(self.alias)
        refused = gate.admit()
        if refused is not None:
            raise self.Database.OperationalError(refused)
        try:
            connection = super().get_new_connection(conn_params)
        except self.Database.OperationalError as exc:
            # With a pool, only the probe knows: its timeout may mean nothing but a busy pool.
            if not self.settings_dict["OPTIONS"].get("pool"):
                gate.failed(exc)
            raise
        gate.succeeded()
        return connection
