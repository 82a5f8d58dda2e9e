"""Runs lost to their infrastructure: started again from the beginning, or failed.

A run is lost when its worker was killed or frozen past its lease, or lost its database
connection where it could not wait for it. The handler's own error is never a lost run:
it settles the task (``completed`` with ``isError``, or ``failed``) with its real reason.
A lost run starts again, as the replay rule already requires handlers to allow, up to the
tool's ``retries`` (``@mcp.tool(task=..., retries=N)``, default ``TASK_RETRIES``); after
those the task fails, saying how many runs it lost. Found by the workers' sweep
(:mod:`.workers`), by a poll, or by the run itself.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from ..conf import mcp_settings
from ..protocol.jsonrpc import INTERNAL_ERROR
from . import store
from .models import MCPTask, Status

TTL_ENDED = "the task's TTL ended before it finished"


def retries_of(row: MCPTask) -> int:
    """How many lost runs of the row's tool start again (its ``retries``, else the setting)."""
    from .runner import _endpoint  # the worker's lookup: it imports the URLconf if need be

    registry = _endpoint(row.endpoint or "default")
    tool = registry.tools.get(row.tool) if registry is not None else None
    retries = getattr(tool, "retries", None)
    return mcp_settings.TASK_RETRIES if retries is None else int(retries)


def run_lost(task_id: str, reason: str, *, run: int | None = None, unclaimed: bool = False) -> str | None:
    """The task's run was lost (``reason``): run it again, or fail it once its retries are spent.

    ``run``: the lost run's number (the row's ``runs`` when it claimed), when the run itself
    says so; otherwise (a sweep, a poll) only a run whose lease is over counts, or, with
    ``unclaimed``, one the backend started and that never claimed the task. Returns
    ``"retried"``, ``"failed"``, ``"cancelled"``, or None when there was nothing to do (the
    task moved on meanwhile). The new run is enqueued once the change is committed, and every
    ``subscriptions/listen`` stream that named the task hears of it.
    """
    from .runner import enqueue

    now = timezone.now()
    with transaction.atomic():
        row = MCPTask.objects.select_for_update().filter(pk=task_id, status=Status.WORKING).first()
        if row is None:
            return None
        if run is not None:
            if row.runs != run:
                return None  # a later run has the task
        elif unclaimed:
            if row.lease_until is not None:
                return None
        elif row.lease_until is None or row.lease_until >= now:
            return None  # its run is alive (or waiting in the queue)
        expired = row.expires is not None and row.expires <= now
        limit = retries_of(row)
        retry = not (expired or row.cancel_requested or row.retried >= limit)
        if retry:
            row.retried += 1
            row.lease_until = None
            row.status_message = (f"running again from the start: {reason} (retry {row.retried} of {limit})")[:500]
            row.updated = now
            row.save(update_fields=["retried", "lease_until", "status_message", "updated"])
            store.announce_on_commit(row.pk)
            transaction.on_commit(lambda: enqueue(task_id))
    if retry:
        return "retried"
    if row.cancel_requested or expired:
        message = "cancelled by the client" if row.cancel_requested else TTL_ENDED
        return (
            "cancelled" if store.finish(task_id, Status.CANCELLED, message=message, only_if=(Status.WORKING,)) else None
        )
    tries = f" ({row.retried + 1} runs, all lost)" if row.retried else ""
    error: dict[str, Any] = {"code": INTERNAL_ERROR, "message": f"{store.WORKER_LOST}{tries}: {reason}"}
    return "failed" if store.finish(task_id, Status.FAILED, error=error, only_if=(Status.WORKING,)) else None


__all__ = ["TTL_ENDED", "retries_of", "run_lost"]
