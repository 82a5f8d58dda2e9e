"""Running an MCP task: the job Django's task framework runs, one attempt of the handler on the
replay engine per run, under a lease its heartbeat renews (docs/tasks.md)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.utils import timezone

from .. import content, tracing
from ..asks import guard, replay
from ..asks.call import Call
from ..asks.questions import Ask, MissingCapability, TaskCancelled, escaped
from ..auth import Principal
from ..conf import mcp_settings
from ..lifecycle import HostThread, host_thread
from ..protocol.jsonrpc import INTERNAL_ERROR, MCPError
from ..protocol.revisions import ClientCapabilities, Era
from . import lost, store
from .framework import task
from .models import MCPTask, Status

logger = logging.getLogger("mcp_django.tasks")

# How often a running task's heartbeat reads the cancel flag (seconds): the delay a
# handler's ctx.check_cancelled() may lag behind tasks/cancel.
CANCEL_POLL = 0.25


class TaskBackend(replay.ReplayBackend):
    """The replay backend of a task's attempt: every ask first checks the cancel flag."""

    def _lookup(self, asks: Sequence[Ask], record: bool = True) -> tuple[list[Any], bool]:
        cancelled = self.call.cancelled
        if cancelled is not None and cancelled():
            raise TaskCancelled()
        return super()._lookup(asks, record)


class Heartbeat(threading.Thread):
    """Renews the run's lease, reads the cancel flag and writes the handler's progress, in a thread
    of its own (each beat in the host's thread under one: a test's client, whose transaction holds the row)."""

    def __init__(self, task_id: str, host: HostThread | None, run: int, expires: Any) -> None:
        super().__init__(name=f"mcp-task-{task_id[:8]}", daemon=True)
        self.task_id = task_id
        self.host = host
        self.run_number = run
        self.expires = expires
        self.expired = False
        self.lost = False
        self.outage = lost.outage(f"the heartbeat of MCP task {task_id[:8]}")
        self.cancel = threading.Event()
        self.stopped = threading.Event()
        self.renewed = timezone.now()
        # The handler's last progress report, which the next beat writes as the statusMessage.
        self.progress = ""
        self.written = ""

    def notified(self, message: dict[str, Any]) -> None:
        """The run's ``call.notify``: a progress report becomes the status message (``Counting orders (2/5)``)."""
        if message.get("method") != "notifications/progress":
            return
        params = message.get("params") or {}
        progress, total, text = params.get("progress"), params.get("total"), params.get("message")
        done = "" if not isinstance(progress, int | float) else f"{progress:g}"
        if done and isinstance(total, int | float):
            done = f"{done}/{total:g}"
        if isinstance(text, str) and text:
            done = (f"{text} ({done})" if done else text)[:500]
        self.progress = done

    def beat(self) -> None:
        lease = mcp_settings.TASK_LEASE_SECONDS
        if self.expires is not None and timezone.now() >= self.expires:
            self.expired = True
            self.cancel.set()
        try:
            rows = MCPTask.objects.filter(pk=self.task_id)
            if rows.filter(cancel_requested=True).exists():
                self.cancel.set()
            now = timezone.now()
            progress = self.progress
            if progress != self.written:
                if rows.filter(status=Status.WORKING).update(status_message=progress, updated=now):
                    store.announce_on_commit(self.task_id)  # pushed to the task's listeners
                self.written = progress
            if (now - self.renewed).total_seconds() >= max(lease / 3, CANCEL_POLL):
                # Only while this run holds the lease: once it lapsed, the run was taken for lost
                # and may run again elsewhere, so this one stops and stores nothing.
                kept = rows.filter(status=Status.WORKING, runs=self.run_number, lease_until__gte=now).update(
                    lease_until=now + timedelta(seconds=lease)
                )
                self.renewed = now
                if not kept and rows.exists():  # (a test's uncommitted row is not seen here)
                    self.lost = True
                    self.cancel.set()
            self.outage.closed()
        except Exception as exc:
            # The database away for a moment: tried again next beat (a lease outlasts a few).
            self.outage.failed(exc)
            if self.host is None:
                connection.close_if_unusable_or_obsolete()  # one a restart dropped: replaced next beat

    def run(self) -> None:
        pending: Future[Any] | None = None
        try:
            while not self.stopped.wait(CANCEL_POLL):
                if self.host is None:
                    self.beat()
                elif pending is None or pending.done():  # one beat queued at a time
                    pending = self.host.submit(self.beat)
        finally:
            if self.host is None:
                connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)


@dataclass
class Outcome:
    """What an attempt came to: :func:`.store.finish`'s arguments."""

    status: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    message: str = ""
    asks: dict[str, Any] | None = None  # input_required's fields


def _failed(message: str) -> Outcome:
    return Outcome(Status.FAILED, error={"code": INTERNAL_ERROR, "message": message})


def _claim(task_id: str) -> tuple[MCPTask, Principal] | None:
    """Take the task for this run, or None when there is nothing to run (now, or here)."""
    now = timezone.now()
    with transaction.atomic():
        row = MCPTask.objects.select_for_update().filter(pk=task_id).first()
        if row is None or row.status != Status.WORKING:
            return None
        if row.lease_until is not None and row.lease_until > now:
            return None  # a second enqueue of the same run: the first one has it
        if row.expires is not None and row.expires <= now:
            return None
        principal = None if row.cancel_requested else store.principal_of(row)
        if principal is not None:
            row.lease_until = now + timedelta(seconds=mcp_settings.TASK_LEASE_SECONDS)
            row.runs += 1
            if not row.retried:
                row.status_message = ""  # "no worker seen" said while it waited: one runs it now
            row.save(update_fields=["lease_until", "runs", "status_message"])
    if row.cancel_requested:
        store.finish(task_id, Status.CANCELLED, message=store.BY_CLIENT)
        return None
    if principal is None:
        error = {"code": INTERNAL_ERROR, "message": "the task's user no longer exists or changed credentials"}
        store.finish(task_id, Status.FAILED, error=error)
        return None
    return row, principal


async def attempt(
    row: MCPTask,
    principal: Principal,
    cancelled: Callable[[], bool],
    notify: Callable[[dict[str, Any]], None] | None = None,
) -> Outcome:
    """One attempt of the task's handler, and what it came to (its notifications to ``notify``)."""
    registry = lost.endpoint(row.endpoint or "default")
    if registry is None:
        return _failed(
            f"the endpoint {row.endpoint!r} of this task's tool is not loaded in the worker's process "
            "(define its Registry at module level, in a module the worker imports: see docs/tasks.md)"
        )
    tool = registry.tools.get(row.tool)
    if tool is None:
        return _failed(f"Unknown tool: {row.tool}")
    arguments = tool.parameters.convert(dict(row.arguments))
    call = Call(
        method="tools/call",
        # A progress token of the task's own: the handler's reports reach ``notify``.
        params={"name": row.tool, "arguments": row.arguments, "_meta": {"progressToken": row.id}},
        request_id=f"task-{row.id[:8]}",
        version=row.version,
        era=Era.MODERN,
        transport="task",
        capabilities=ClientCapabilities(row.capabilities),
        principal=principal,
        client_info=row.client_info,
        task_id=row.id,
        cancelled=cancelled,
        notify=notify,
        endpoint=registry.settings,
    )
    backend, ctx, finished, value, error = await replay.attempt(
        tool, arguments, call, known=dict(row.answers), state=dict(row.state), backend_class=TaskBackend
    )
    if backend.pending and backend.recorder is not None:
        await guard.report([backend.recorder], call)
    if isinstance(error, TaskCancelled) or (
        isinstance(error, BaseExceptionGroup) and error.subgroup(TaskCancelled) is not None
    ):
        return Outcome(Status.CANCELLED, message=store.BY_CLIENT)
    if backend.error is not None:
        return Outcome(Status.FAILED, error=backend.error.to_error())
    lacking = escaped(error)
    if lacking is not None:
        return Outcome(Status.FAILED, error=MissingCapability(backend.missing or lacking.capabilities).to_error())
    if isinstance(error, MCPError):
        return Outcome(Status.FAILED, error=error.to_error())
    if isinstance(error, content.ToolError):
        return Outcome(Status.COMPLETED, result=content.error_result(str(error)))
    if isinstance(error, (OperationalError, InterfaceError)):
        raise error  # the handler's connection failed under it: the run is lost (arun), not settled
    if error is not None and not (backend.pending and isinstance(error, Exception)):
        if not isinstance(error, Exception):
            raise error
        logger.error("tool %s failed in MCP task %s", row.tool, row.id[:8], exc_info=error)
        return Outcome(Status.COMPLETED, result=content.error_result(f"Error executing tool {row.tool}"))
    if finished and not backend.pending:
        try:
            return Outcome(Status.COMPLETED, result=content.tool_result(value))
        except TypeError as exc:
            return Outcome(Status.COMPLETED, result=content.error_result(f"Error executing tool {row.tool}: {exc}"))
    reused = [key for key in backend.pending if key in row.keys]
    if reused:  # SEP-2663: a key names one request over the task's whole life
        return _failed(f"the handler asked a different question under the key {reused[0]!r}, already used by this task")
    if row.rounds + 1 > mcp_settings.MAX_INPUT_ROUNDS:
        return _failed(f"this task needed more than {mcp_settings.MAX_INPUT_ROUNDS} rounds of input")
    asks = {
        "input_requests": {key: ask.wire() for key, ask in backend.pending.items()},
        "asked": {key: ask.digest for key, ask in backend.pending.items()},
        "answers": backend.carried_answers(),
        "state": dict(ctx.state),
    }
    return Outcome(Status.INPUT_REQUIRED, message="waiting for the client's input", asks=asks)


def enqueue(task_id: str) -> None:
    """Hand the task's next run to ``MCP_DJANGO["TASK_BACKEND"]``; one that cannot take it fails the task."""
    try:
        result = run_task.using(backend=mcp_settings.TASK_BACKEND).enqueue(task_id)
    except Exception as exc:
        logger.exception("MCP task %s could not be enqueued", task_id[:8])
        error = {"code": INTERNAL_ERROR, "message": f"could not enqueue the task: {exc}"}
        store.finish(task_id, Status.FAILED, error=error, only_if=(Status.WORKING,))
        return
    MCPTask.objects.filter(pk=task_id).update(job_id=str(getattr(result, "id", ""))[:100])


# How long a run's claim or settle keeps trying while the database is away (seconds), and its
# longest wait between tries. Past it the run gives up: its lease runs out, and the sweep starts
# it again (or fails it) once the database answers.
OUTAGE_PATIENCE = 300.0
OUTAGE_LONGEST_WAIT = 2.0


def _through_outages(what: str, task_id: str, job: Callable[[], Any]) -> Any:
    """``job()`` (a claim, a settle), tried again with back-off while the database is away."""
    deadline = time.monotonic() + OUTAGE_PATIENCE
    wait = 0.05
    away = lost.outage(f"MCP task {task_id[:8]} ({what})")
    while True:
        try:
            result = job()
            away.closed()
            return result
        except (OperationalError, InterfaceError) as exc:
            if connection.in_atomic_block or time.monotonic() + wait > deadline:
                raise  # a test's transaction (nothing to reconnect), or patience spent
            away.failed(exc)
            close_old_connections()
            time.sleep(wait)
            wait = min(wait * 2, OUTAGE_LONGEST_WAIT)


async def arun(task_id: str) -> None:
    """One run of the task ``task_id``: claim it, one attempt, store what it came to (the database
    work in Django's thread-sensitive thread)."""
    claimed = await sync_to_async(_through_outages)("claiming its run", task_id, lambda: _claim(task_id))
    if claimed is None:
        return
    row, principal = claimed
    beat = Heartbeat(task_id, host_thread.get(), row.runs, row.expires)
    beat.start()
    cut_off: BaseException | None = None
    try:
        outcome = await tracing.task_attempt(
            row.id, principal.label, row.tool, row.rounds, attempt(row, principal, beat.cancel.is_set, beat.notified)
        )
    except (OperationalError, InterfaceError) as exc:
        cut_off = exc
        outcome = Outcome(Status.FAILED)
    except Exception as exc:
        logger.exception("MCP task %s failed", task_id[:8])
        outcome = _failed(f"the task failed: {exc}")
    finally:
        await sync_to_async(beat.stop, thread_sensitive=False)()
    if beat.lost:
        logger.warning("MCP task %s: run %d lost its lease, so its outcome is not stored", task_id[:8], row.runs)
        return
    if beat.expired:
        outcome = Outcome(Status.CANCELLED, message=lost.TTL_ENDED)
    elif cut_off is not None:
        reason = f"its database connection failed ({lost.cause(cut_off)[:120]})"
        await sync_to_async(_through_outages)(
            "starting it again", task_id, lambda: lost.run_lost(task_id, reason, enqueue=enqueue, run=row.runs)
        )
        return
    # Stored unless the task moved on meanwhile: it was failed, or this run was taken for lost.
    settle = functools.partial(store.finish, task_id, **vars(outcome), only_if=(Status.WORKING,), run=row.runs)
    await sync_to_async(_through_outages)("storing its outcome", task_id, settle)


@task()
def run_task(task_id: str) -> None:
    """The job: one run of an MCP task (enqueued at its creation and after each answer)."""
    close_old_connections()
    try:
        async_to_sync(arun)(task_id)
    finally:
        close_old_connections()


@task()
def purge_expired_tasks() -> int:
    """Delete the MCP tasks whose TTL is over (schedule it, or run ``manage.py mcp_tasks_purge``)."""
    return store.purge()
