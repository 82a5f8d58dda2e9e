"""Runs lost to their infrastructure (a worker killed, frozen or cut off from the database), started
again up to the tool's ``retries`` or failed (docs/tasks.md); found by the sweep, a poll or the run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from importlib import import_module
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..breaker import Breaker
from ..conf import mcp_settings
from ..protocol.jsonrpc import INTERNAL_ERROR
from ..registry import Registry, registry_named
from . import store
from .models import MCPTask, Status

logger = logging.getLogger("mcp_django.tasks")

TTL_ENDED = "the task's TTL ended before it finished"


def endpoint(name: str) -> Registry | None:
    """The endpoint a task was made at, from any process (a worker's too, which may not have
    imported the module that makes it): the URLconf, where endpoints are routed, imported first."""
    found = registry_named(name)
    if found is None:
        urlconf = getattr(settings, "ROOT_URLCONF", None)
        if isinstance(urlconf, str):
            try:
                import_module(urlconf)
            except Exception:  # a URLconf that cannot load here: the endpoints already made are searched
                logger.warning("the task worker could not import ROOT_URLCONF %r", urlconf, exc_info=True)
        found = registry_named(name)
    return found


def run_lost(
    task_id: str, reason: str, *, enqueue: Callable[[str], None], run: int | None = None, unclaimed: bool = False
) -> str:
    """The task's run was lost (``reason``): run it again, or fail it once its retries are spent.
    ``run``: the lost run's number, when the run says so; else only a run whose lease is over
    counts, or, ``unclaimed``, one that never claimed the task. What was done ("": nothing)."""
    now = timezone.now()
    with transaction.atomic():
        row = MCPTask.objects.select_for_update().filter(pk=task_id, status=Status.WORKING).first()
        if row is None:
            return ""
        if run is not None:
            if row.runs != run:
                return ""  # a later run has the task
        elif unclaimed:
            if row.lease_until is not None:
                return ""
        elif row.lease_until is None or row.lease_until >= now:
            return ""  # its run is alive (or waiting in the queue)
        expired = row.expires is not None and row.expires <= now
        registry = endpoint(row.endpoint or "default")
        tool = registry.tools.get(row.tool) if registry is not None else None
        retries = getattr(tool, "retries", None)  # the tool's own, else the setting
        limit = mcp_settings.TASK_RETRIES if retries is None else int(retries)
        retry = not (expired or row.cancel_requested or row.retried >= limit)
        if retry:
            row.retried += 1
            row.lease_until = None
            row.status_message = f"running again from the start: {reason} (retry {row.retried} of {limit})"[:500]
            row.updated = now
            row.save(update_fields=["retried", "lease_until", "status_message", "updated"])
            store.announce_on_commit(row.pk)
            transaction.on_commit(lambda: enqueue(task_id))
    if retry:
        return "retried"
    if row.cancel_requested or expired:
        message = store.BY_CLIENT if row.cancel_requested else TTL_ENDED
        return (
            "cancelled" if store.finish(task_id, Status.CANCELLED, message=message, only_if=(Status.WORKING,)) else ""
        )
    tries = f" ({row.retried + 1} runs, all lost)" if row.retried else ""
    error: dict[str, Any] = {"code": INTERNAL_ERROR, "message": f"{store.WORKER_LOST}{tries}: {reason}"}
    return "failed" if store.finish(task_id, Status.FAILED, error=error, only_if=(Status.WORKING,)) else ""


def recover(row: MCPTask | store.Polled, enqueue: Callable[[str], None], now: Any = None) -> str | None:
    """A look at a ``working`` task (a poll's, the sweep's): a run whose lease is over, or that the
    backend started and never claimed, is run again or failed (:func:`run_lost`'s answer), else None."""
    if row.status != Status.WORKING:
        return None
    now = now or timezone.now()
    if row.lease_until is not None:
        return run_lost(row.id, store.SILENT, enqueue=enqueue) if row.lease_until < now else None
    if lost_before_claim(row, now):
        return run_lost(row.id, store.UNCLAIMED, enqueue=enqueue, unclaimed=True)
    return None


def lost_before_claim(row: MCPTask | store.Polled, now: Any) -> bool:
    """Whether the backend started the task's run over a lease ago and the run never claimed it (its
    worker killed before the claim); the backend asked at most once a lease (``run_checked``)."""
    since = now - timedelta(seconds=mcp_settings.TASK_LEASE_SECONDS)
    if not row.job_id or row.updated is None or row.updated > since:
        return False
    if row.run_checked is not None and row.run_checked > since:
        return False
    from .framework import TaskResultStatus, task_backends

    MCPTask.objects.filter(pk=row.id, lease_until=None).update(run_checked=now)
    try:
        tasks = task_backends[mcp_settings.TASK_BACKEND]
        if not tasks.supports_get_result:
            return False
        result = tasks.get_result(row.job_id)
    except Exception as exc:
        # A job the backend no longer has (a Redis without persistence forgot RQ's queue): the
        # run is lost. Matched by name: the django_tasks backport (RQ's) raises its own class.
        if type(exc).__name__ == "TaskResultDoesNotExist":
            return True
        logger.debug("the backend could not report MCP task %s's job", row.id[:8], exc_info=True)
        return False
    started = result.started_at
    return result.status == TaskResultStatus.RUNNING and started is not None and started < since


def cause(exc: BaseException) -> str:
    """An error's first line, for a log line (its class when it says nothing)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def outage(what: str, service: str = "the database") -> Breaker:
    """The outage tracker of ``what``, which tries ``service`` again itself: one log line when it
    goes away and one when it is back, not one per try (the one :class:`~mcp_django.breaker.Breaker`)."""
    return Breaker(f"{service}, for {what},", meanwhile=f"{what} tries again until it answers")
