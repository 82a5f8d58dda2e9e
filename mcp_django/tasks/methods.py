"""The tasks extension's side of dispatch: a tools/call becoming a task, and ``tasks/*`` (SEP-2663),
plugged in on the core's public points by :func:`register`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError

from .. import extensions, lifecycle
from ..asks.call import Call
from ..asks.invoke import run_in_thread
from ..asks.questions import StartTask
from ..asks.replay import Outcome
from ..auth import Principal
from ..handlers import Handler, Tool
from ..lifecycle import database_down
from ..limits import stage as limits
from ..protocol.jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    InvalidParams,
    MCPError,
    Unavailable,
)
from ..protocol.revisions import Era
from ..registry import Registry, registry_named
from ..resource_updates import TASK_CHANGED
from . import EXTENSION, lost, store, workers
from .models import TERMINAL, MCPTask

HandlerNext = Callable[[Handler, dict[str, Any], Call], Awaitable[Outcome]]


def register() -> None:
    """Plug the extension in: its methods, and the extension declared on 2026-07-28."""
    from django.apps import apps

    from . import checks  # noqa: F401 - registers the tasks' system checks

    if apps.is_installed("django.contrib.admin"):
        from . import admin  # noqa: F401 - registers the tasks' ModelAdmin (admin.site)

    # 2026-07-28 only: legacy revisions run every tool synchronously, and their tasks/* is a
    # -32601 that says which revision has it (_task_id).
    for name, method in (("tasks/get", get), ("tasks/update", update), ("tasks/cancel", cancel)):
        extensions.add_method(name, method)
    extensions.declare_extension(EXTENSION, eras={Era.MODERN})
    # subscriptions/listen's notifications.taskIds: a task's changes pushed as tasks/get shows it.
    extensions.add_listen_topic(
        "taskIds", agree=listened, push=pushed, notification="notifications/tasks", kind=TASK_CHANGED
    )
    extensions.add_handler_stage(
        run_as_task,
        methods={"tools/call"},
        eras={Era.MODERN},
        applies=lambda tool: getattr(tool, "task", None) is not None,
    )
    # A harness that runs tasks itself (the test client) runs them with this, importing nothing of ours.
    lifecycle.run_queued_task = run_queued
    limits.count_open_tasks(open_tasks)


def run_as_task(next: HandlerNext, handler: Any, arguments: dict[str, Any], call: Call) -> Awaitable[Outcome]:
    """The handler stage of the tools with ``task=``: a tools/call the client asked to run as a task
    becomes one, at once or at ``ctx.start_task()`` after its own rounds."""
    if requested(call):
        return _as_task(next, handler, arguments, call)
    if handler.task == "required":
        raise missing_capability(f"tool {handler.name!r} runs only as a task: it")
    return next(handler, arguments, call)  # not a stage of this call: no frame of its own


async def _as_task(next: HandlerNext, handler: Any, arguments: dict[str, Any], call: Call) -> Outcome:
    if not handler.input_first:
        return Outcome(result=await create(call, handler))
    # The asks before ctx.start_task() are this request's own rounds.
    call.may_start_task = True
    try:
        return await next(handler, arguments, call)
    except StartTask as start:
        return Outcome(result=await create(call, handler, answers=start.answers, state=start.state))


T = TypeVar("T")

logger = logging.getLogger("mcp_django.tasks")


async def stored(work: Callable[[], T]) -> T:
    """The task store's ``work``, in a worker thread; the database away is a 503, logged once per outage."""
    try:
        return await run_in_thread(work)
    except (OperationalError, InterfaceError) as exc:
        if not database_down():
            logger.warning("MCP tasks could not reach the database (%s)", type(exc).__name__)
        raise Unavailable("the database") from None


def requested(call: Call) -> bool:
    """Whether this request's client opted in to tasks (per request, in ``_meta``)."""
    return extensions.client_extension(call, EXTENSION) is not None


async def open_tasks(call: Call, handler: Handler) -> int | None:
    """``LIMITS["MAX_OPEN_TASKS"]``'s count: the caller's unfinished tasks when the call would create one."""
    if call.method != "tools/call" or getattr(handler, "task", None) is None or not requested(call):
        return None
    label = call.principal.label
    return await run_in_thread(lambda: MCPTask.objects.filter(principal=label).exclude(status__in=TERMINAL).count())


def missing_capability(what: str) -> MCPError:
    return MCPError(
        MISSING_CAPABILITY,
        f"{what} needs the client capability extensions[{EXTENSION!r}], which this request did not declare",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


async def create(
    call: Call, tool: Tool, answers: dict[str, dict[str, Any]] | None = None, state: dict[str, str] | None = None
) -> dict[str, Any]:
    """Store the task (of the request's endpoint, which alone answers for it): ``CreateTaskResult``."""
    registry: Registry = call.registry
    if registry_named(registry.name) is not registry:
        # A worker finds the tool's endpoint by its name: an unnamed registry would run another's tool.
        raise MCPError(
            INTERNAL_ERROR,
            f"tool {tool.name!r} cannot run as a task: its Registry has no name of its own "
            "(make it Registry('name') at module level: see docs/endpoints.md)",
        )
    row = await stored(lambda: store.create(call, tool.name, enqueue, answers, state, workers.no_worker_notice()))
    return {"resultType": "task", **store.envelope(row)}


def enqueue(task_id: str) -> None:
    """The task's next run, to Django's task framework (:func:`.runner.enqueue`)."""
    from .runner import enqueue as enqueue_run  # deferred: Django's task framework is loaded by the first task

    enqueue_run(task_id)


async def run_queued(task_id: str) -> None:
    """The task's next run, now, in this thread (:func:`.runner.arun`), as a worker would run it."""
    from .runner import arun  # deferred: Django's task framework is loaded by the first task

    await arun(task_id)


def _task_id(call: Call) -> str:
    if call.era != Era.MODERN:
        raise MCPError(
            METHOD_NOT_FOUND,
            f"Method not found: {call.method} (tasks are the {EXTENSION} extension of MCP 2026-07-28; "
            f"this connection speaks {call.version})",
        )
    if not requested(call):
        raise missing_capability(call.method)
    task_id = call.params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParams("params.taskId must be a string")
    return task_id


def _found(task_id: str, principal: Principal, registry: str) -> store.Polled:
    # A lost run (:func:`.lost.recover`) is restarted or failed first: a poll finds a dead
    # worker's task even when no sweep runs.
    row = store.find(task_id, principal, registry)
    return row if lost.recover(row, enqueue) is None else store.find(task_id, principal, registry)


async def _row(call: Call, task_id: str) -> store.Polled:
    """The caller's task, or the unknown id's answer: the tool's permissions are checked on every call."""
    registry = call.registry
    row = await stored(lambda: _found(task_id, call.principal, registry.name))
    tool = registry.tools.get(row.tool) if row.endpoint == registry.name else None
    if tool is None or not await extensions.allowed(call, tool):
        raise InvalidParams(store.NOT_FOUND)
    return row


async def get(call: Call) -> dict[str, Any]:
    return store.detailed(await _row(call, _task_id(call)))


def listened(call: Call, task_ids: Any) -> list[str]:
    """``subscriptions/listen``'s ``notifications.taskIds``: the ids agreed to (any: each push checks)."""
    if not isinstance(task_ids, list) or not all(isinstance(t, str) and 0 < len(t) <= 64 for t in task_ids):
        raise InvalidParams("params.notifications.taskIds must be a list of task ids")
    if not requested(call):
        raise missing_capability("notifications.taskIds")
    return list(dict.fromkeys(task_ids))


async def pushed(call: Call, task_id: str) -> dict[str, Any] | None:
    """The task as ``tasks/get`` shows it to this listener, or None when it may not (or cannot now)."""
    try:
        return store.detailed(await _row(call, task_id))
    except (InvalidParams, Unavailable):
        return None


async def update(call: Call) -> dict[str, Any]:
    task_id = _task_id(call)
    responses = call.params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams("params.inputResponses must be an object")
    await _row(call, task_id)
    await stored(lambda: store.update(task_id, responses, enqueue))
    return {}


async def cancel(call: Call) -> dict[str, Any]:
    task_id = _task_id(call)
    await _row(call, task_id)
    await stored(lambda: store.cancel(task_id))
    return {}
