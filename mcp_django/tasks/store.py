"""The task rows: creating, finding (for its principal only), answering and cancelling a task,
and the wire shapes of SEP-2663. Sync code, run in worker threads and by the task runner."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, router, transaction
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from .. import audit, resource_updates
from ..asks.call import Call
from ..auth import Principal
from ..conf import mcp_settings
from ..models import AuditEvent, Kind
from ..protocol.jsonrpc import INTERNAL_ERROR, InvalidParams
from ..protocol.revisions import Era
from ..signals import Event
from .models import TERMINAL, MCPTask, Status

# The same answer for a task that never existed, has expired, or belongs to another
# principal: a task id must not tell a stranger anything.
NOT_FOUND = "Failed to retrieve task: Task not found"
WORKER_LOST = "the worker running this task stopped before it finished"
SILENT = "its worker went silent for a whole lease (killed, frozen or cut off)"
UNCLAIMED = "its worker stopped as the run began"
BY_CLIENT = "cancelled by the client"


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z")


def announce_on_commit(task_id: str) -> None:
    """Tell every instance's ``subscriptions/listen`` streams of the task's change, once committed."""
    transaction.on_commit(lambda: resource_updates.announce_task_soon(task_id))


def envelope(row: MCPTask | Polled) -> dict[str, Any]:
    """The ``Task`` fields every task answer carries (CreateTaskResult, tasks/get)."""
    out: dict[str, Any] = {
        "taskId": row.id,
        "status": row.status,
        "createdAt": _iso(row.created),
        "lastUpdatedAt": _iso(row.updated),
        "ttlMs": row.ttl_ms,
    }
    if not row.is_terminal:
        out["pollIntervalMs"] = mcp_settings.TASK_POLL_INTERVAL_MS
    if row.status_message:
        out["statusMessage"] = row.status_message
    return out


def detailed(row: MCPTask | Polled) -> dict[str, Any]:
    """``tasks/get``: the task with, by status, its result, its error or its pending inputRequests."""
    out = envelope(row)
    if row.status == Status.COMPLETED:
        # The CallToolResult exactly as the tools/call would have answered it (SEP-2663), which
        # on 2026-07-28 says it is complete (the ext-tasks client's schema requires it).
        out["result"] = {**(row.result or {"content": []}), "resultType": "complete"}
    elif row.status == Status.FAILED:
        out["error"] = row.error or {"code": INTERNAL_ERROR, "message": row.status_message or "failed"}
    elif row.status == Status.INPUT_REQUIRED:
        out["inputRequests"] = row.input_requests
    return out


def record(row: MCPTask, kind: str, principal: Principal | str, *, reason: str = "") -> None:
    """The audit log's row for a change of a task's status (queued; never blocks)."""
    settings = mcp_settings.AUDIT
    if not settings["ENABLED"]:
        return
    if isinstance(principal, str) and row.user_id is not None:
        # Known by its label only (a worker's change): the row still points at the user, through
        # an unsaved instance that carries the key (no query).
        principal = Principal(get_user_model()(pk=row.user_id), None, principal)
    event = Event(
        kind=kind,
        era=Era.MODERN,
        transport="task",
        method="tools/call",
        target=row.tool,
        principal=principal,
        request_id=row.id[:12],
        version=row.version,
        round=row.rounds or None,
        asks={key: request.get("method", "") for key, request in row.input_requests.items()},  # only while it asks
        reason=reason[:48],
        endpoint=row.endpoint,
    )
    if settings["ASYNC_WRITES"] and not audit.inline.get():
        audit.record(event, kind)  # the writer thread inserts it; nothing waits here
    else:
        AuditEvent.objects.create(**audit.row_for(event, kind))


def create(
    call: Call,
    tool: str,
    enqueue: Callable[[str], None],
    answers: dict[str, dict[str, Any]] | None,
    state: dict[str, str] | None,
    notice: str,
) -> MCPTask:
    """Store the call's new task (of its endpoint) and, once committed, ``enqueue(task_id)`` its first
    run: both done on return (SEP-2663's durable create). ``notice``: its first ``statusMessage``."""
    now = timezone.now()
    ttl = mcp_settings.TASK_TTL_MS
    principal = call.principal
    user = principal.user if not principal.is_anonymous else None
    with transaction.atomic():
        row = MCPTask.objects.create(
            tool=tool,
            endpoint=call.registry.name,
            arguments=call.params.get("arguments") or {},
            version=call.version,
            capabilities=dict(call.capabilities.raw),
            client_info=call.client_info,
            user=user if user is not None and user.pk is not None else None,
            principal=principal.label,
            principal_digest=binding(principal),
            created=now,
            updated=now,
            ttl_ms=ttl,
            expires=None if ttl is None else now + timedelta(milliseconds=ttl),
            answers=answers or {},
            keys=list(answers or {}),
            state=state or {},
            status_message=notice,
        )
        transaction.on_commit(lambda: enqueue(row.id))
    record(row, Kind.TASK_CREATED, principal)
    row.refresh_from_db()
    return row


def finish(
    task_id: str,
    status: str,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    message: str = "",
    asks: dict[str, Any] | None = None,
    only_if: tuple[str, ...] = (Status.WORKING, Status.INPUT_REQUIRED),
    run: int | None = None,
) -> bool:
    """Move a task to a terminal status or, with ``asks`` (:class:`.runner.Outcome`'s), to
    ``input_required`` (cancelled if asked to stop), unless it left ``only_if`` or, given ``run``,
    that run no longer has it. Whether it moved."""
    with transaction.atomic():
        rows = MCPTask.objects.select_for_update().filter(pk=task_id, status__in=only_if)
        row = (rows if run is None else rows.filter(runs=run)).first()
        if row is None:
            return False
        if asks is not None and row.cancel_requested:
            status, message, asks = Status.CANCELLED, BY_CLIENT, None
        row.status = status
        row.result = result
        row.error = error
        row.status_message = (message or (error or {}).get("message", ""))[:500]
        row.input_requests = {}
        row.asked = {}
        if asks is not None:
            row.input_requests = asks["input_requests"]
            row.asked = asks["asked"]
            row.keys = [*row.keys, *row.asked]  # keys are unique over a task's life
            row.answers = asks["answers"]
            row.state = asks["state"]
            row.rounds += 1
        row.lease_until = None
        row.updated = timezone.now()
        row.save()
        announce_on_commit(row.pk)
    # Kind.TASK_COMPLETED, ...; the audit gives a reason for a terminal status only.
    record(row, Kind(f"task_{status}"), row.principal, reason=row.status_message if row.is_terminal else "")
    return True


def binding(principal: Principal) -> str:
    """The keyed hash (``SECRET_KEY``'s: a task outlives the request-state key) of the principal's
    binding (id, join date, password hash) a task is bound to; kept on the principal."""
    secret = settings.SECRET_KEY
    found = principal.__dict__.get("_task_binding")
    if found is None or found[0] is not secret:
        digest = salted_hmac("mcp_django.tasks.principal", principal.binding, algorithm="sha256").hexdigest()
        found = principal.__dict__["_task_binding"] = (secret, digest)
    return found[1]


def _bound(row: MCPTask | Polled, principal: Principal) -> bool:
    return row.principal == principal.label and constant_time_compare(row.principal_digest, binding(principal))


def principal_of(row: MCPTask) -> Principal | None:
    """The principal the task runs as, or None when it no longer is the one that created it."""
    user = None
    if row.user_id is not None:
        user = get_user_model()._default_manager.filter(pk=row.user_id).first()
        if user is None:
            return None
    principal = Principal(user)
    return principal if _bound(row, principal) else None


class _Columns(NamedTuple):
    """The columns a poll reads, in the model's order (the JSON ones as the database sent them)."""

    id: str
    tool: str
    endpoint: str
    status: str
    status_message: str
    raw_result: Any
    raw_error: Any
    raw_input_requests: Any
    principal: str
    principal_digest: str
    created: Any
    updated: Any
    ttl_ms: int | None
    expires: Any
    lease_until: Any
    job_id: str
    run_checked: Any
    decode: Callable[[int, Any], Any] | None = None


class Polled(_Columns):
    """What a poll reads of a task, in one query (:func:`_polled`). Not a model instance, whose
    ``Model.from_db`` cost a poll more than its query; :func:`envelope` and :func:`detailed` take
    either. A status answers with at most one of the JSON columns, so each is decoded when it is
    read (``decode``: the ORM's converters)."""

    __slots__ = ()

    def _read(self, index: int) -> Any:
        value = self[_FIRST_JSON + index]
        return value if self.decode is None else self.decode(index, value)

    result = property(lambda self: self._read(0))
    error = property(lambda self: self._read(1))
    input_requests = property(lambda self: self._read(2))
    is_terminal = property(lambda self: self.status in TERMINAL)


# The model's names of the columns, and of the JSON ones among them.
_POLLED = tuple(name.removeprefix("raw_") for name in _Columns._fields[:-1])
_READ_DECODED = ("result", "error", "input_requests")
_FIRST_JSON = _POLLED.index("result")


class _PollQuery:
    """The poll's query, compiled once per thread and connection (building the SQL cost a poll more
    than the rest of it), its rows through the compiler's converters. Unless something observes the
    connection's queries, it runs on the DB-API cursor (Django's wrapper cost as much as the query).

    Kept because it pays: through the ORM (``.defer(...).filter(pk=...).first()``) a poll took
    600 µs of CPU against 58 µs, 3,175,468 instructions a ``tasks/get`` against 637,601
    (docs/tasks.md, "The cost of a poll")."""

    def __init__(self, alias: str) -> None:
        self.connection = connections[alias]
        queryset = MCPTask.objects.using(alias).only(*_POLLED).filter(pk="").order_by()
        compiler = queryset.query.get_compiler(alias)
        sql, params = compiler.as_sql()
        self.sql: str | None = None
        self.eager: list[tuple[int, Any, Any]] = []
        self.json: list[Any] = []
        if list(params) == [""] and [column[0].target.attname for column in compiler.select] == list(_POLLED):
            self.sql = sql
            converters = compiler.get_converters([column[0] for column in compiler.select[: compiler.col_count]])
            self.eager = [(pos, *pair) for pos, pair in converters.items() if _POLLED[pos] not in _READ_DECODED]
            self.json = [converters.get(_POLLED.index(name)) for name in _READ_DECODED]
            # sqlite3's own placeholder is "?"; the other DB-APIs Django supports take "%s".
            sqlite = self.connection.vendor == "sqlite" and "%" not in sql.replace("%s", "")
            self.native = sql.replace("%s", "?") if sqlite else None

    def decode(self, index: int, value: Any) -> Any:
        """The value of the ``index``-th of ``_READ_DECODED`` as the ORM gives it."""
        found = self.json[index]
        if found is not None:
            converters, expression = found
            for converter in converters:
                value = converter(value, expression, self.connection)
        return value

    def row(self, values: Any) -> Polled:
        """A DB-API row through the compiler's converters (``SQLCompiler.apply_converters``)."""
        row = list(values)
        connection = self.connection
        for pos, converters, expression in self.eager:
            value = row[pos]
            for converter in converters:
                value = converter(value, expression, connection)
            row[pos] = value
        row.append(self.decode if any(self.json) else None)
        return Polled._make(row)

    def rows(self, task_id: str) -> Any:
        """The rows for ``task_id``, or None when the query is not one this class can run."""
        connection = self.connection
        if self.sql is None:
            return None
        if connection.queries_logged or any(
            getattr(wrapper, "__module__", None) != _GUARD for wrapper in connection.execute_wrappers
        ):
            with connection.cursor() as cursor:
                cursor.execute(self.sql, [task_id])
                return cursor.fetchall()
        connection.validate_no_broken_transaction()
        connection.close_if_health_check_failed()
        connection.ensure_connection()
        with connection.wrap_database_errors:
            if self.native is not None:
                return connection.connection.execute(self.native, (task_id,)).fetchall()
            cursor = connection.create_cursor()
            try:
                cursor.execute(self.sql, (task_id,))
                return cursor.fetchall()
            finally:
                cursor.close()


# The replay guard's execute wrapper looks for a replayed handler's writes: a poll may pass it by.
_GUARD = "mcp_django.asks.guard"
_compiled = threading.local()


def _polled(task_id: str) -> Polled | None:
    """The task ``task_id`` with only the columns a poll reads: one query by primary key."""
    alias = router.db_for_read(MCPTask)
    cache: dict[str, _PollQuery] = _compiled.__dict__
    query = cache.get(alias)
    if query is None or query.connection is not connections[alias]:
        query = cache[alias] = _PollQuery(alias)
    rows = query.rows(task_id)
    if rows is None:  # a backend whose SQL is not this simple: the ORM's own way
        row = MCPTask.objects.using(alias).only(*_POLLED).filter(pk=task_id).first()
        return None if row is None else Polled(*(getattr(row, name) for name in _POLLED))
    return query.row(rows[0]) if rows else None


def find(task_id: Any, principal: Principal, registry: str) -> Polled:
    """The caller's live task ``task_id`` of ``registry``, or -32602 (unknown, expired, foreign,
    or another endpoint's, alike)."""
    if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
        raise InvalidParams("params.taskId must be a task id (a string)")
    if "\x00" in task_id:
        # No task id has one, and PostgreSQL refuses a NUL in a query's text (a DataError).
        raise InvalidParams(NOT_FOUND)
    row = _polled(task_id)
    if row is None or row.endpoint != registry or not _bound(row, principal):
        raise InvalidParams(NOT_FOUND)
    if row.expires is not None and row.expires <= timezone.now():
        raise InvalidParams(NOT_FOUND)
    return row


def update(task_id: str, responses: dict[str, Any], enqueue: Callable[[str], None]) -> None:
    """``tasks/update``: the answers to pending asks taken (others ignored); none pending, run again."""
    with transaction.atomic():
        row = MCPTask.objects.select_for_update().filter(pk=task_id, status=Status.INPUT_REQUIRED).first()
        if row is None or not (taken := [key for key in responses if key in row.asked]):
            return
        for key in taken:
            row.answers[key] = {"q": row.asked.pop(key), "a": responses[key]}
            row.input_requests.pop(key, None)
        if not row.asked:
            row.status = Status.WORKING
            row.status_message = ""
            announce_on_commit(row.pk)
            transaction.on_commit(lambda: enqueue(row.pk))
        row.updated = timezone.now()
        row.save()


def cancel(task_id: str, message: str = BY_CLIENT) -> bool:
    """``tasks/cancel`` and the admin's action: a task no worker runs is cancelled, a running one asked
    to stop. Whether it did either."""
    with transaction.atomic():
        row = MCPTask.objects.select_for_update().filter(pk=task_id).first()
        if row is None or row.is_terminal:
            return False
        if row.status == Status.WORKING and row.lease_until is not None:
            row.cancel_requested = True
            row.updated = timezone.now()
            row.save(update_fields=["cancel_requested", "updated"])
            return True
    return finish(task_id, Status.CANCELLED, message=message)


def purge(now: Any = None) -> int:
    """Delete the tasks whose TTL is over; returns how many."""
    deleted, _ = MCPTask.objects.filter(expires__lte=now or timezone.now()).delete()
    return deleted
