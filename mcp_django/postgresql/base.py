"""Django's PostgreSQL backend, answering at once while the database is away (refusing, or
frozen): the database's breaker (:func:`mcp_django.breaker.database`) bounds every wait for a
connection and on one. How, and what was measured: docs/deployment.md ("PostgreSQL").
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db.backends.postgresql import base
from django.db.backends.postgresql.psycopg_any import is_psycopg3

from ..breaker import Breaker, database

# How long a caller waits for the pool before asking whether the database answers.
SLICE = 0.2
# A wait on the database longer than this asks whether it answers at all.
SLOW = 0.5
# How long a new connection may take before the database counts as not answering.
ANSWER_SECONDS = 1.0
# How long a probe's "the database answers" spares further probes.
FRESH = 0.25


class Prober:
    """Whether a database answers: a new connection, in a thread of its own (one at a time), that
    must succeed within :data:`ANSWER_SECONDS`; its verdict opens or closes the breaker. While the
    breaker is open, a probe every ``retry`` seconds at most."""

    def __init__(self, gate: Breaker, connect: Callable[[], None]) -> None:
        self.gate = gate
        self.connect = connect
        self._lock = threading.Lock()
        self._running: concurrent.futures.Future[BaseException | None] | None = None
        self._started = 0.0
        self._finished = float("-inf")
        self._answered_at = float("-inf")

    def answers(self, wait: bool = True) -> bool | None:
        """True when the database answers; False when it does not (the breaker is open);
        None while a probe is under way and the breaker closed (only when not ``wait``)."""
        now = time.monotonic()
        with self._lock:
            if self.gate.down_since is None and now - self._answered_at < FRESH:
                return True
            running = self._running
            if running is None and (self.gate.down_since is None or now - self._finished >= self.gate.retry):
                running = self._running = self._start()
                self._started = now
            started = self._started
        if running is None:
            return False  # away, and probed a moment ago
        try:
            error = running.result(max(0.0, started + ANSWER_SECONDS - now) if wait else 0)
        except concurrent.futures.TimeoutError:
            if time.monotonic() - started < ANSWER_SECONDS:
                return False if self.gate.down_since is not None else None
            self.gate.failed(TimeoutError(f"a new connection got no answer within {ANSWER_SECONDS:g} s"))
            return False
        return error is None

    def refuses(self) -> bool:
        """While the breaker is open: True until a probe (started here, if it is time) connects."""
        return self.gate.down_since is not None and not self.answers(wait=False)

    def _start(self) -> concurrent.futures.Future[BaseException | None]:
        done: concurrent.futures.Future[BaseException | None] = concurrent.futures.Future()

        def probe() -> None:
            try:
                self.connect()
            except Exception as exc:
                self.gate.failed(exc)
                done.set_result(exc)
            else:
                self._answered_at = time.monotonic()
                self.gate.closed()
                done.set_result(None)
            finally:
                with self._lock:
                    self._running, self._finished = None, time.monotonic()

        threading.Thread(target=probe, name="mcp-django-db-probe", daemon=True).start()
        return done


_probers: dict[str, Prober] = {}


def prober(alias: str, connect: Callable[[], None]) -> Prober:
    return _probers.get(alias) or _probers.setdefault(alias, Prober(database(alias), connect))


def _watched_wait(
    connection: Any,
    gate: Prober,
    wait: Callable[..., Any],
    gen: Any,
    interval: float = 0.1,
    timeout: float | None = None,
) -> Any:
    """psycopg's ``Connection.wait`` for one connection, ended when the database does not answer."""

    def abandon() -> Exception:
        connection.pgconn.finish()  # mid-protocol: the connection is of no further use
        from psycopg import OperationalError

        return OperationalError(f"{gate.gate.what} does not answer")

    if gate.refuses():
        raise abandon()
    if timeout is not None:
        return wait(gen, interval, timeout)  # psycopg's own bounded waits (a cancellation)
    ask_at = time.monotonic() + SLOW

    def ticking() -> Any:
        # psycopg wakes its generator with Ready.NONE every interval (0.1 s) while nothing came.
        nonlocal ask_at
        try:
            state = next(gen)
            while True:
                ready = yield state
                if not ready and time.monotonic() >= ask_at:
                    verdict = gate.answers(wait=False)
                    if verdict is False:
                        raise abandon()
                    if verdict:  # a long statement: asked again a second later, not at every tick
                        ask_at = time.monotonic() + ANSWER_SECONDS
                state = gen.send(ready)
        except StopIteration as end:
            return end.value

    result = wait(ticking(), interval)
    if gate.gate.down_since is not None:
        gate.gate.closed()  # it answered
    return result


def guarded_getconn(pool: Any, getconn: Callable[..., Any], gate: Prober, timeout: float | None = None) -> Any:
    """The psycopg pool's ``getconn`` (``pool.getconn`` once Django's backend made the pool): its
    wait in slices of :data:`SLICE`, each followed by asking the prober, up to the pool's ``timeout``."""
    from psycopg_pool import PoolTimeout

    if gate.refuses():
        raise PoolTimeout(f"{gate.gate.what} is unavailable")
    deadline = time.monotonic() + (pool.timeout if timeout is None else timeout)
    while True:
        left = deadline - time.monotonic()
        try:
            return getconn(min(SLICE, max(left, 0.001)))
        except PoolTimeout:
            if left <= SLICE:
                raise
        # Every connection busy, or the pool cannot connect: does the database still answer?
        if not gate.answers():
            raise PoolTimeout(f"{gate.gate.what} is unavailable")


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is not None and not isinstance(pool.getconn, functools.partial):
            # Guarded once per pool (Django keeps one per alias), as a connection's wait is.
            pool.getconn = functools.partial(guarded_getconn, pool, pool.getconn, prober(self.alias, self._probe))
        return pool

    def _probe(self) -> None:
        self.Database.connect(**self.get_connection_params()).close()

    def _configure_connection(self, connection: Any) -> Any:
        # Every new connection's waits, the pool's too (psycopg 3 waits for the server in Connection.wait).
        if is_psycopg3:
            gate = prober(self.alias, self._probe)
            connection.wait = functools.partial(_watched_wait, connection, gate, connection.wait)
        return super()._configure_connection(connection)  # type: ignore[misc]

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        if self.settings_dict["OPTIONS"].get("pool"):
            return super().get_new_connection(conn_params)  # the pool's guard asks the prober
        gate = database(self.alias)
        if prober(self.alias, self._probe).refuses():
            raise self.Database.OperationalError(f"{gate.what} is unavailable")
        try:
            connection = super().get_new_connection(conn_params)
        except self.Database.OperationalError as exc:
            gate.failed(exc)
            raise
        gate.closed()
        return connection
