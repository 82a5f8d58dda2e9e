"""System checks for MCP tasks, E030 and W030 to W032 (docs/tasks.md), registered by the extension."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError

from ..conf import mcp_settings
from ..registry import endpoints
from . import workers


def _task_tools() -> str:
    """The tools that run as tasks, named for a message ("" when there are none)."""
    if "mcp_django.tasks.methods" not in mcp_settings.EXTENSIONS:
        return ""  # not served
    tools: list[str] = []
    for registry in endpoints():
        # A view registered by dotted path that cannot be built is E015's; the rest count.
        registry.tools.resolve(strict=False)
        tools += (name for name, tool in registry.tools.ready.items() if tool.task is not None)
    tools = sorted(set(tools))
    return ", ".join(tools[:5]) + (", ..." if len(tools) > 5 else "")


# A deployment check that queries (migrate and runserver come before any worker), so Tags.database:
# run only when the command names databases (Django 5.2 calls it with None).
@register(Tags.database, deploy=True)
def check_task_workers(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Any]:
    named = _task_tools()
    if not named or not databases:
        return []
    if not workers.needs_worker():
        return []  # ImmediateBackend runs the task in its request (W030); no backend: E030
    try:
        if workers.alive():
            return []
    except DatabaseError:
        return []  # the table is not made yet, or the database is away: other checks say so
    return [
        Warning(
            f"tools run as MCP tasks ({named}) but no task worker was seen alive in the last "
            f"{workers.alive_within().seconds} s: new tasks wait in the queue",
            hint="Run manage.py mcp_worker under a supervisor (systemd, a container restart policy): docs/tasks.md.",
            id="mcp_django.W032",
        )
    ]


@register()
def check_task_backend(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    named = _task_tools()
    if not named:
        return []
    from .framework import task_backends

    alias = mcp_settings.TASK_BACKEND
    try:
        found = task_backends[alias]
    except Exception as exc:
        return [
            Error(
                f"tools run as MCP tasks ({named}) but the TASKS setting has no usable backend {alias!r}: {exc}",
                hint='Add it to TASKS (for example django_tasks_db.DatabaseBackend), or set MCP_DJANGO["TASK_BACKEND"].',
                id="mcp_django.E030",
            )
        ]
    kind = type(found).__name__
    if kind not in _NO_WORKER or (kind == "ImmediateBackend" and settings.DEBUG):
        return []
    check_id, says, hint = _NO_WORKER[kind]
    return [Warning(f"tools run as MCP tasks ({named}) on {kind}: {says}", hint=hint, id=check_id)]


# The backends that run no task in a worker (ImmediateBackend's warning is left out under DEBUG).
_NO_WORKER = {
    "ImmediateBackend": (
        "mcp_django.W030",
        "each task runs inside the request that creates it, so the client waits for all of it",
        "Use a backend with an out-of-process worker (django_tasks_db.DatabaseBackend and "
        "manage.py mcp_worker, or RQ); see docs/tasks.md.",
    ),
    "DummyBackend": (
        "mcp_django.W031",
        "tasks are stored and never run",
        "Use a backend with a worker; see docs/tasks.md.",
    ),
}
