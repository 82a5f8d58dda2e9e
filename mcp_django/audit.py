"""Writing the audit log: receivers for :mod:`mcp_django.signals` and one writer thread that
inserts the rows in batches (docs/audit.md, "How rows are written", says what is guaranteed)."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import datetime
import functools
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connections,
    models,
    router,
    transaction,
)
from django.db.models.constants import OnConflict
from django.db.models.signals import pre_delete
from django.utils import timezone

from . import signals
from .breaker import Breaker
from .conf import mcp_settings
from .models import CALL_KINDS, AuditEvent, Kind

__all__ = ["FlushTimeout", "flush", "inline", "stats"]


logger = logging.getLogger("mcp_django.audit")

# Rows that arrive within this many seconds of the first share its INSERT.
_LINGER = 0.02
# Idle seconds before the writer closes its connection (so a test database can be dropped).
_IDLE_CLOSE = 1.0
# While the database cannot be reached, it is tried again this often.
_RETRY_SECONDS = 1.0
# The most a refusal's answer waits for its row's commit; a slower commit is not waited for.
_COMMIT_WAIT = 0.5
# The same bound for every row under ASYNC_WRITES False: longer, but a dead database cannot hold every answer.
_SYNC_COMMIT_WAIT = 5.0
# Overflow is logged at most this often.
_WARN_EVERY = 10.0
# The most sets of a round's asks whose JSON the writer keeps, adapted (see _preparer).
_ADAPTED_ASKS = 256
# The database cannot be reached now: rows are kept and retried. Any other error is about the rows.
_UNREACHABLE = (OperationalError, InterfaceError)


class FlushTimeout(RuntimeError):
    """:func:`flush` waited longer than its timeout: the queued rows are not committed."""


#: True where audit rows must be written in the context's own thread-sensitive thread, inside its
#: transaction, before the answer (the in-process test client sets it: rows roll back with its transaction).
inline: contextvars.ContextVar[bool] = contextvars.ContextVar("mcp_django_audit_inline", default=False)


@dataclass
class _Item:
    # None: a flush's item, no row (the writer closes its connection after the batch).
    event: _Event | None
    # Called from the writer thread once the row's batch is committed (or failed).
    done: Callable[[], None] | None = None


def _truncate(value: Any, length: int) -> str:
    if type(value) is str and len(value) <= length and "\x00" not in value:
        return value  # nearly every text of a row: nothing to cut or escape
    text = "" if value is None else str(value)
    if "\x00" in text:
        # PostgreSQL text cannot hold NUL: written as the JSON escape, so the row says what came.
        text = text.replace("\x00", "\\u0000")
    return text[:length]


def row_for(
    event: signals.Event, kind: str | None = None, created: Any = None, *, event_id: uuid.UUID | None = None
) -> dict[str, Any]:
    """The column values of an event: who, what, when; never what was said (only _values_for's fields are read)."""
    return dict(zip(_COLUMNS, _values_for(event, kind, created, event_id), strict=True))


# The columns the writer inserts, in the model's order: _values_for makes a row's values in it.
_COLUMNS = tuple(f.attname for f in AuditEvent._meta.concrete_fields if not f.primary_key)
_USER = _COLUMNS.index("user_id")

# A row to insert: its values in _COLUMNS order (no dict: a twentieth of the writer's CPU a row).
_Row = tuple[Any, ...]
# What the writer makes a row from: the event, its kind, and time.time() at the event.
_Event = tuple[signals.Event, str | None, float]


def _values_for(
    event: signals.Event, kind: str | None, created: Any, event_id: uuid.UUID | int | None
) -> tuple[Any, ...]:
    """row_for's values, in _COLUMNS order (the writer's event id is its UUID's number: _event_numbers)."""
    principal = event.principal
    user = getattr(principal, "user", None)
    label = getattr(principal, "label", None)
    if label is None:
        label = principal if isinstance(principal, str) else ""
    user_id = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    asks = {
        _truncate(key, 200): _truncate(method, 64)
        for key, method in (event.asks or {}).items()
        if isinstance(method, str)
    }
    return (
        created or timezone.now(),
        _truncate(kind or event.kind, 24),
        _truncate(event.reason, 48),
        _truncate(getattr(event, "error", ""), 500),
        _truncate(event.outcome, 16),
        _truncate(event.version, 16),
        _truncate(event.era, 8),
        _truncate(event.transport, 16),
        _truncate(event.method, 64),
        _truncate(event.target, 500),
        user_id,
        _truncate(label, 150),
        # Only a credential that names itself for the log (an MCP token: name and id, never the secret).
        _truncate(str(getattr(getattr(principal, "auth", None), "mcp_credential_label", "") or ""), 150),
        _truncate(event.request_id, 100),
        event.round,
        asks,
        _truncate(event.client_address, 64),
        None if event.duration_ms is None else round(float(event.duration_ms), 3),
        _truncate(getattr(event, "endpoint", ""), 64),
        event_id if event_id is not None else event_ids(1)[0],
    )


# A version 7 UUID's fixed bits (RFC 9562): the version (0111) and the variant (10).
_V7 = (0x7 << 76) | (0x2 << 62)
_RAND_A = 0xFFF << 64
_RAND_B = (1 << 62) - 1


def event_ids(count: int) -> list[uuid.UUID]:
    """``count`` new rows' ``event_id``: version 7 UUIDs (RFC 9562) of this millisecond, ordered by
    time so a batch's ids go in together at the end of the unique index (bench/HISTORY.md)."""
    return [uuid.UUID(int=number) for number in _event_numbers(count)]


def _event_numbers(count: int) -> list[int]:
    """``count`` new event ids as their UUIDs' 128-bit numbers, the random bits read in one call
    (a call a row cost the writer about half a microsecond a row); _preparer writes them."""
    if not count:
        return []  # a batch of rows made elsewhere, or of a flush alone: no system call
    stamp = (time.time_ns() // 1_000_000) << 80 | _V7
    rand = os.urandom(10 * count)
    numbers = []
    for start in range(0, 10 * count, 10):
        bits = int.from_bytes(rand[start : start + 10])
        numbers.append(stamp | ((bits >> 4) & _RAND_A) | (bits & _RAND_B))
    return numbers


class Writer:
    """One daemon thread that inserts queued rows in batches."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Set when a queued row has someone waiting for it (a refusal, a flush).
        self._urgent = threading.Event()
        self._thread: threading.Thread | None = None
        # Rows not committed because the database could not be reached; written first.
        self._kept: list[_Row] = []
        self.breaker = Breaker(
            "the audit log's database", retry=_RETRY_SECONDS, meanwhile="rows are kept and written when it answers"
        )
        # Rows lost: dropped when too many waited; refused by the database one by one.
        self.dropped = 0
        self.rejected = 0
        self._warned = 0.0
        # time.monotonic() when the batch being written was taken, else None (flush's diagnosis).
        self._busy_since: float | None = None
        self._busy_rows = 0

    def waiting(self) -> int:
        """Rows queued or kept, not yet committed."""
        return self._queue.qsize() + len(self._kept)

    def put(self, event: _Event | None, done: Callable[[], None] | None = None) -> None:
        """Queue an event's row, or drop it when too many are waiting."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="mcp-django-audit", daemon=True)
                    self._thread.mcp_unwatched = True  # type: ignore[attr-defined]  # its SQL is never a handler's: no replay guard
                    self._thread.start()
        if event is not None and self._queue.qsize() + len(self._kept) >= mcp_settings.AUDIT["QUEUE_SIZE"]:
            self.dropped += 1
            now = time.monotonic()
            if self.dropped == 1 or now - self._warned >= _WARN_EVERY:
                self._warned = now
                logger.error(
                    "mcp_django: the audit queue is full (%d rows waiting, AUDIT['QUEUE_SIZE']): "
                    "%d row(s) dropped by this process so far",
                    self.waiting(),
                    self.dropped,
                )
            if done is not None:
                done()  # nobody waits for a row that will never be written
            return
        self._queue.put(_Item(event, done))
        if done is not None:
            self._urgent.set()

    def flush(self, timeout: float = 10.0) -> bool:
        """Block until every row queued so far is committed; False when rows are kept
        for an unreachable database. :class:`FlushTimeout` after ``timeout`` seconds (the
        writer stuck in the database, most often on a lock held by an open transaction)."""
        if self._thread is None or not self._thread.is_alive():
            # No writer (yet, or any more): write here.
            items = self._take([], self._queue.qsize())
            if items or self._kept:
                self._write(items, retry_now=True)
            return not self._kept
        written = threading.Event()
        self.put(None, written.set)
        if not written.wait(timeout):
            busy, rows = self._busy_since, self._busy_rows
            doing = (
                f"has been writing a batch of {rows} row(s) for {time.monotonic() - busy:.1f} s"
                if busy is not None
                else "is not writing"
            )
            raise FlushTimeout(
                f"the audit writer did not commit the queued rows within {timeout:g} s: it {doing}, "
                f"{self.waiting()} more waiting. A transaction left open on another connection, "
                "holding a lock the INSERT needs, is the usual cause."
            )
        return not self._kept

    def _run(self) -> None:
        while True:
            try:
                self._step()
            except Exception:
                # The writer must outlive any one failure, or every later row is lost.
                logger.exception("mcp_django: the audit writer hit an error")

    def _step(self) -> None:
        try:
            first = self._queue.get(timeout=_RETRY_SECONDS if self._kept else _IDLE_CLOSE)
        except queue.Empty:
            if self._kept:
                self._write([])  # the database may be back
            else:
                connections.close_all()
            return
        batch = [first]
        if first.done is None and not self._urgent.is_set():
            # Let rows gather: waking the writer for each would cost the loop a GIL hand-off per call.
            self._urgent.wait(_LINGER)
        self._urgent.clear()
        self._write(self._take(batch, mcp_settings.AUDIT["BATCH_SIZE"]))

    def _take(self, batch: list[_Item], size: int) -> list[_Item]:
        """``batch`` with queued items added, up to ``size`` in all."""
        while len(batch) < size:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _write(self, batch: list[_Item], *, retry_now: bool = False) -> None:
        # The rows are made here, off the request path.
        events = [item.event for item in batch if item.event is not None]
        ids = _event_numbers(len(events))
        # timezone.now() as it was at the event, the setting read once a batch, not on each call's path.
        zone = datetime.UTC if settings.USE_TZ else None
        rows = [
            _values_for(event, kind, datetime.datetime.fromtimestamp(stamp, zone), number)
            for (event, kind, stamp), number in zip(events, ids, strict=True)
        ]
        close = any(item.event is None for item in batch)  # a flush is in the batch
        if self._kept:
            rows, self._kept = self._kept + rows, []
        self._busy_since, self._busy_rows = time.monotonic(), len(rows)
        try:
            if rows:
                self._insert_all(rows, retry_now)
        finally:
            self._busy_since = None
            try:
                if close or self.breaker.down_since is not None:
                    connections.close_all()
                else:
                    close_old_connections()
            except Exception:
                logger.exception("mcp_django: could not close the audit writer's connection")
            # Whatever happened, nobody waits forever for this batch.
            for item in batch:
                if item.done is not None:
                    item.done()

    def _insert_all(self, rows: list[_Row], retry_now: bool) -> None:
        # The breaker is asked only while it is open: two calls fewer in every batch.
        if self.breaker.down_since is not None and not self.breaker.admit() and not retry_now:
            self._kept = rows  # not yet: the database was unreachable a moment ago
            return
        size = mcp_settings.AUDIT["BATCH_SIZE"]
        for start in range(0, len(rows), size):
            try:
                self.rejected += _insert(rows[start : start + size])
            except _UNREACHABLE as exc:
                self._kept = rows[start:]
                self.breaker.failed(exc)
                return
        if self.breaker.down_since is not None:
            self.breaker.closed()


def _insert(rows: list[_Row]) -> int:
    """Insert rows; the number the database refused. Raises no error but ``_UNREACHABLE``'s."""
    try:
        _insert_many(rows)
        return 0
    except _UNREACHABLE:
        raise
    except Exception:
        # One bad row must not take the others with it: each is written on its own.
        return sum(_insert_one(row) for row in rows)


def _insert_one(row: _Row) -> int:
    try:
        try:
            _insert_many([row])
        except IntegrityError:
            # Most likely the user was deleted since: the row keeps the label, without the key.
            _insert_many([_without_user(row)])
        return 0
    except _UNREACHABLE:
        raise
    except Exception as exc:
        refused = dict(zip(_COLUMNS, row, strict=True))
        logger.error(
            "mcp_django: the database refused an audit row (%s %s by %r): %s",
            refused.get("kind"),
            refused.get("method"),
            refused.get("principal"),
            exc,
        )
        return 1


def _without_user(row: _Row) -> _Row:
    return (*row[:_USER], None, *row[_USER + 1 :])


class _Statement(NamedTuple):
    sql: str
    # (position, preparation) of the dates, JSON and UUIDs; other values go as they are.
    prepared: tuple[tuple[int, Callable[[Any], Any]], ...]


_SQL_CACHE: dict[str, _Statement] = {}


def _statement(connection: Any) -> _Statement:
    fields = [f for f in AuditEvent._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    # A retried batch whose first COMMIT landed skips the rows already in (event_id is unique);
    # a named target where the backend has one, so no other constraint is waived.
    if connection.features.supports_update_conflicts_with_target:
        insert = "INSERT INTO"
        suffix = " ON CONFLICT ({}) DO NOTHING".format(quote("event_id"))
    elif connection.features.supports_ignore_conflicts:
        insert = connection.ops.insert_statement(on_conflict=OnConflict.IGNORE)
        suffix = connection.ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, [], [])
        suffix = f" {suffix}" if suffix else ""
    else:
        insert, suffix = "INSERT INTO", ""
    sql = "{} {} ({}) VALUES ({}){}".format(
        insert,
        quote(AuditEvent._meta.db_table),
        ", ".join(quote(str(f.column)) for f in fields),
        ", ".join(["%s"] * len(fields)),
        suffix,
    )
    # Text, numbers and the user's key go as they are (get_db_prep_save leaves them so).
    plain = ("CharField", "PositiveIntegerField", "FloatField", "ForeignKey")
    prepared = tuple((i, _preparer(f, connection)) for i, f in enumerate(fields) if f.get_internal_type() not in plain)
    return _Statement(sql, prepared)


def _preparer(field: Any, connection: Any) -> Callable[[Any], Any]:
    """``field.get_db_prep_save`` for ``connection``, shortened for the values _values_for makes, the
    only ones the writer inserts (11-14 % of an async call's instructions: docs/audit.md)."""
    save = functools.partial(field.get_db_prep_save, connection=connection)
    if type(field) is models.DateTimeField:
        adapt_time = connection.ops.adapt_datetimefield_value
        # The backend takes an aware time as it is (PostgreSQL): so does the writer.
        as_is = adapt_time(probe := datetime.datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)) is probe
        # SQLite: a UTC time on a UTC connection is its naive str(), without the utcoffset()
        # calls of is_aware and make_naive (over half of what a row's preparation cost).
        sqlite = connection.vendor == "sqlite"

        def prepare_time(value: Any) -> Any:
            if type(value) is datetime.datetime and value.tzinfo is datetime.UTC:
                if as_is:
                    return value
                if sqlite and connection.timezone is datetime.UTC:
                    return str(value.replace(tzinfo=None))
            if type(value) is datetime.datetime and value.utcoffset() is not None:
                return adapt_time(value)
            return save(value)

        return prepare_time
    if type(field) is models.JSONField:
        # Nearly every row's asks are empty, and a round's are the same few each time:
        # each set is adapted once, up to a bound.
        empty = save({})
        adapted: dict[tuple[tuple[str, str], ...], Any] = {}

        def prepare_json(value: dict[str, str]) -> Any:
            # _values_for's asks: always a dict of text to text, so hashable as its items.
            if not value:
                return empty
            items = tuple(value.items())
            found = adapted.get(items)
            if found is None:
                found = save(value)
                if len(adapted) < _ADAPTED_ASKS:
                    adapted[items] = found
            return found

        return prepare_json
    if type(field) is models.UUIDField:
        native = connection.features.has_native_uuid_field

        def prepare_uuid(value: Any) -> Any:  # a UUID, or its number: what _values_for makes
            if type(value) is uuid.UUID:
                return value if native else value.hex
            # A UUID's number (the writer's ids): what the field makes of it, UUID(int=value).
            return uuid.UUID(int=value) if native else format(value, "032x")

        return prepare_uuid
    return save


def _insert_many(rows: list[_Row]) -> None:
    """One INSERT ... executemany for a batch, in one transaction with the lock on its users
    (not ``bulk_create`` nor multi-row INSERTs: docs/audit.md says why)."""
    alias = router.db_for_write(AuditEvent)
    connection = connections[alias]
    statement = _SQL_CACHE.get(connection.vendor)
    if statement is None:
        statement = _SQL_CACHE[connection.vendor] = _statement(connection)
    with transaction.atomic(using=alias):
        # Without row locks (SQLite) a deletion and a batch cannot interleave: see _hold_users.
        users = (
            {user for row in rows if (user := row[_USER]) is not None}
            if connection.features.has_select_for_update
            else None
        )
        if users:
            live = _hold_users(alias, users)
            if live != users:
                # Deleted since the request: the row keeps the label, not the key.
                rows = [_without_user(row) if row[_USER] in users - live else row for row in rows]
        params: list[list[Any]] = []
        for row in rows:
            values = list(row)
            for i, prepare in statement.prepared:
                values[i] = prepare(values[i])
            params.append(values)
        with connection.cursor() as cursor:
            cursor.executemany(statement.sql, params)


def _hold_users(alias: str, ids: set[Any]) -> set[Any]:
    """The users of ``ids`` that exist, each locked until this transaction ends, so the writer
    and a user's deletion take turns (docs/audit.md, "Deleting a user")."""
    connection = connections[alias]
    user_model = get_user_model()
    if connection.vendor == "postgresql":
        quote = connection.ops.quote_name
        pk = quote(str(user_model._meta.pk.column))
        sql = "SELECT {pk} FROM {table} WHERE {pk} IN ({marks}) ORDER BY {pk} FOR KEY SHARE".format(
            pk=pk, table=quote(user_model._meta.db_table), marks=", ".join(["%s"] * len(ids))
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, sorted(ids))
            return {found for (found,) in cursor.fetchall()}
    # Other backends: the ORM's row lock, taken in key order as the deletion takes its own.
    query = user_model._base_manager.using(alias).select_for_update().filter(pk__in=ids).order_by("pk")
    return set(query.values_list("pk", flat=True))


def _lock_deleted_user(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    """``pre_delete`` of the user model: lock the user's row before Django nulls the
    audit rows' key, so no batch commits a row for the user in between (see _hold_users)."""
    connection = connections[using]
    if connection.features.has_select_for_update and connection.in_atomic_block:
        list(sender._base_manager.using(using).select_for_update().filter(pk=instance.pk).values_list("pk"))


writer = Writer()

_CALL_KINDS = frozenset(str(k) for k in CALL_KINDS)


def flush(timeout: float = 10.0) -> bool:
    """Commit every queued row now (tests, shutdown hooks): see :meth:`Writer.flush`."""
    return writer.flush(timeout)


def stats() -> dict[str, Any]:
    """This process's audit writer: rows waiting, rows lost, and whether the database is unreachable."""
    return {
        "waiting": writer.waiting(),
        "dropped": writer.dropped,
        "rejected": writer.rejected,
        "unreachable": writer.breaker.open,
    }


def _flush_at_exit() -> None:
    try:
        flush(5.0)
    except FlushTimeout as exc:
        # At exit a traceback would say less than this: what is lost, and why.
        logger.error("mcp_django: %s; they are lost with this process", exc)


atexit.register(_flush_at_exit)


def record(event: signals.Event, kind: str | None = None) -> None:
    """Queue an event; the writer thread makes its row. Its time is taken as a number:
    timezone.now() reads settings.USE_TZ, a few microseconds of every call's path."""
    writer.put((event, kind, time.time()))


async def record_now(event: signals.Event, kind: str | None = None, *, wait: float = _COMMIT_WAIT) -> None:
    """Write an event's row and wait, at most ``wait`` seconds (not at all while the database is
    known to be unreachable), for its commit; the row stays queued either way."""
    if inline.get():
        await sync_to_async(_insert, thread_sensitive=True)([_values_for(event, kind, None, None)])
        return
    queued = (event, kind, time.time())
    if writer.breaker.open:
        writer.put(queued)
        return
    committed: concurrent.futures.Future[None] = concurrent.futures.Future()
    writer.put(queued, lambda: committed.set_result(None))
    # wrap_future hands the writer thread's result to this loop (to none once it is closed); wait,
    # unlike wait_for, cancels nothing at the timeout, so the writer's set_result always succeeds.
    await asyncio.wait([asyncio.wrap_future(committed)], timeout=wait)


# -- receivers (connected in MCPDjangoConfig.ready) ---------------------------------------
# Async so ``asend`` runs them on the loop (a sync one costs every call a thread hop). Each
# names the row's kind from its signal, so a sender cannot file an event under another kind.


async def _write(event: signals.Event, kind: str) -> None:
    if mcp_settings.AUDIT["ASYNC_WRITES"] and not inline.get():
        writer.put((event, kind, time.time()))  # record(), without its frame: every call's path
    else:
        await record_now(event, kind, wait=_SYNC_COMMIT_WAIT)


async def on_call_finished(sender: Any, event: signals.Event, **kwargs: Any) -> None:
    audit = mcp_settings.AUDIT
    if audit["ENABLED"] and audit["CALLS"]:
        outcome = event.outcome or event.kind
        if outcome == Kind.CANCELLED and _refusing.get() == _request_of(event):
            _refusing.set(None)
            return
        await _write(event, outcome if outcome in _CALL_KINDS else Kind.FAILED)


# A signal's kind, and the AUDIT switch of its rows besides ENABLED (None: none).
_EVENTS = {
    signals.round_started: (Kind.ROUND, "ROUNDS"),
    signals.ask_finished: (Kind.ASK, "ASKS"),
    signals.replay_unsafe: (Kind.REPLAY_UNSAFE, None),
    # Refusals: the answer waits (a little) for the row's commit.
    signals.state_refused: (Kind.STATE_REFUSED, "REFUSALS"),
    signals.capability_missing: (Kind.MISSING_CAPABILITY, "REFUSALS"),
    signals.call_limited: (Kind.LIMITED, "REFUSALS"),
}

# The refusal being recorded in this context while its commit is awaited: a cancellation
# of the same request meanwhile is already on record as refused, so it is not written twice.
_refusing: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar(
    "mcp_django_audit_refusing", default=None
)


def _request_of(event: signals.Event) -> tuple[str, str, str]:
    return (str(event.request_id), event.method, event.target)


async def on_event(sender: Any, event: signals.Event, signal: Any, **kwargs: Any) -> None:
    kind, part = _EVENTS[signal]
    if not mcp_settings.AUDIT["ENABLED"] or (part is not None and not mcp_settings.AUDIT[part]):
        return
    if part != "REFUSALS":
        await _write(event, kind)
        return
    token = _refusing.set(_request_of(event))
    await record_now(event, kind)
    _refusing.reset(token)  # not reached when cancelled: the cancellation's report is then dropped


def connect() -> None:
    uid = "mcp_django.audit"
    pre_delete.connect(_lock_deleted_user, sender=settings.AUTH_USER_MODEL, dispatch_uid=f"{uid}.user_deleted")
    signals.call_finished.connect(on_call_finished, dispatch_uid=f"{uid}.call")
    for signal, (kind, _part) in _EVENTS.items():
        signal.connect(on_event, dispatch_uid=f"{uid}.{kind}")
