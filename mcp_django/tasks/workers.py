"""Task workers you can see (each ``manage.py mcp_worker`` keeps its row fresh), and the sweep they
run on the same beat, so a lost run is found when no client polls (docs/tasks.md)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, close_old_connections, connection
from django.db.models import Count, Q
from django.utils import timezone

from ..conf import mcp_settings
from . import store
from .lost import TTL_ENDED, outage, recover
from .models import TERMINAL, MCPTask, MCPWorker, Status

logger = logging.getLogger("mcp_django.tasks")

# The most rows one sweep handles of each kind: a backlog is worked off over a few beats.
SWEEP_BATCH = 100


def beat_seconds() -> float:
    """How often a worker says it is alive (and sweeps): a third of a lease, at most 10 s."""
    return max(min(mcp_settings.TASK_LEASE_SECONDS / 3, 10.0), 0.1)


def alive_within() -> timedelta:
    """A worker not seen for this long is taken for gone: a lease, at least three beats."""
    return timedelta(seconds=max(mcp_settings.TASK_LEASE_SECONDS, 3 * beat_seconds()))


def alive(now: Any = None) -> list[MCPWorker]:
    """The workers seen alive lately, newest first."""
    since = (now or timezone.now()) - alive_within()
    return list(MCPWorker.objects.filter(seen__gte=since))


def queue() -> dict[str, int]:
    """How many tasks wait for a worker (``queued``), run (``running``) or wait for input."""
    return MCPTask.objects.filter(status__in=(Status.WORKING, Status.INPUT_REQUIRED)).aggregate(
        queued=Count("pk", filter=Q(status=Status.WORKING, lease_until__isnull=True)),
        running=Count("pk", filter=Q(status=Status.WORKING, lease_until__isnull=False)),
        input_required=Count("pk", filter=Q(status=Status.INPUT_REQUIRED)),
    )


def needs_worker() -> bool:
    """Whether the task backend's jobs are run by ``mcp_worker``, which reports itself alive:
    django-tasks-db's (other backends' workers report nothing here)."""
    from .framework import task_backends

    try:
        found = task_backends[mcp_settings.TASK_BACKEND]
    except Exception:  # no such backend: E030 says so
        return False
    return type(found).__module__.split(".")[0] == "django_tasks_db"


# A process asks the database at most this often whether a worker is alive (new tasks' message).
_NOTICE_FRESH = 1.0
_notice: tuple[float, str] = (float("-inf"), "")


def no_worker_notice() -> str:
    """A new task's ``statusMessage`` when no worker was seen alive lately, else ``""``."""
    global _notice
    now = time.monotonic()
    if now - _notice[0] < _NOTICE_FRESH:
        return _notice[1]
    message = ""
    if needs_worker():
        with contextlib.suppress(DatabaseError):  # the table not made yet: no verdict
            if not MCPWorker.objects.filter(seen__gte=timezone.now() - alive_within()).exists():
                message = (
                    "queued, but no task worker has been seen alive lately (manage.py mcp_worker): "
                    "it runs when one starts"
                )
    _notice = (now, message)
    return message


def sweep(now: Any = None) -> dict[str, int]:
    """One sweep: lost runs started again or failed, tasks past their TTL asked to stop or cancelled."""
    from .runner import enqueue  # deferred: Django's task framework is loaded by the first task

    now = now or timezone.now()
    done = {"retried": 0, "failed": 0, "cancelled": 0, "asked_to_stop": 0}
    working = MCPTask.objects.filter(status=Status.WORKING)
    # Lost runs: a lease over, or started by the backend and never claimed (asked of the backend).
    since = now - timedelta(seconds=mcp_settings.TASK_LEASE_SECONDS)
    quiet = Q(lease_until__isnull=True, updated__lt=since) & ~Q(job_id="")
    quiet &= Q(run_checked__isnull=True) | Q(run_checked__lt=since)
    lost = working.filter(Q(lease_until__lt=now) | quiet)
    for row in lost.only("pk", "status", "lease_until", "job_id", "updated", "run_checked")[:SWEEP_BATCH]:
        found = recover(row, enqueue, now)
        if found:
            done[found] += 1
    # Past its TTL, as tasks/cancel does: a running task asked to stop (its run settles it as
    # cancelled), a waiting one (queued, or for input) cancelled here.
    expired = MCPTask.objects.filter(expires__lte=now).exclude(status__in=TERMINAL)
    asked = Q(status=Status.WORKING, lease_until__isnull=False, cancel_requested=True)
    for row in expired.exclude(asked).only("pk", "status", "lease_until")[:SWEEP_BATCH]:
        running = row.status == Status.WORKING and row.lease_until is not None
        if store.cancel(row.pk, TTL_ENDED):
            done["asked_to_stop" if running else "cancelled"] += 1
    return done


def logged_sweep(now: Any = None) -> None:
    """:func:`sweep`, and a log line when it did something."""
    found = sweep(now)
    if any(found.values()):
        logger.info("the task sweep: %s", ", ".join(f"{k} {v}" for k, v in found.items() if v))


def sweep_forever(every: float) -> None:
    """Sweep every ``every`` seconds until the process is stopped, through database outages."""
    _repeat("the task sweep", logged_sweep, lambda: time.sleep(every))


def _repeat(what: str, job: Callable[[], None], wait: Callable[[], bool | None]) -> None:
    """``job()``, again after each ``wait()`` until it says to stop, through database outages."""
    away = outage(what)
    while True:
        try:
            job()
            away.closed()
        except DatabaseError as exc:
            away.failed(exc)
            close_old_connections()  # a connection the outage broke: a fresh one next time
        except Exception:
            logger.exception("%s failed", what)
        if wait():
            return


class Pulse(threading.Thread):
    """The worker's heartbeat and sweep, in a thread (and database connection) of its own."""

    def __init__(self, worker_id: str, backend: str) -> None:
        super().__init__(name="mcp-worker-pulse", daemon=True)
        self.worker_id = worker_id
        self.backend = backend
        self.stopped = threading.Event()
        self.started_at = timezone.now()
        self.runs = 0  # counted by the worker (a plain int: one writer)

    def beat(self) -> None:
        now = timezone.now()
        MCPWorker.objects.update_or_create(
            pk=self.worker_id,
            defaults={"seen": now, "tasks_run": self.runs},
            create_defaults={
                "seen": now,
                "tasks_run": self.runs,
                "started": self.started_at,
                "host": socket.gethostname()[:200],
                "pid": os.getpid(),
                "backend": self.backend[:64],
            },
        )
        logged_sweep(now)

    def run(self) -> None:
        try:
            _repeat("the task worker's heartbeat", self.beat, lambda: self.stopped.wait(beat_seconds()))
            with contextlib.suppress(DatabaseError):  # else its row ages out
                MCPWorker.objects.filter(pk=self.worker_id).delete()  # stopped cleanly: no longer alive
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)
