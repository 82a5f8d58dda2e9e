"""Run MCP tasks: django-tasks-db's ``db_worker`` loop, which outlives database outages (waiting
with back-off), beside a thread that reports the worker alive and sweeps lost runs.
"""

from __future__ import annotations

import time
from typing import Any
from unittest import mock

from django.core.management.base import CommandError
from django.db import InterfaceError, OperationalError, close_old_connections, connections, router

from mcp_django.tasks.models import MCPTask
from mcp_django.tasks.workers import Pulse, outage

try:
    from django_tasks_db.management.commands import db_worker
    from django_tasks_db.models import DBTaskResult
except ImportError as exc:  # pragma: no cover - the command needs the database backend
    raise CommandError("manage.py mcp_worker runs django-tasks-db's worker: pip install django-tasks-db") from exc

# The back-off between tries while the database is away: from the first to the last, doubling.
FIRST_WAIT = 0.1
LONGEST_WAIT = 2.0


class OutlivingWorker(db_worker.Worker):
    """django-tasks-db's worker whose loop outlives the database going away."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pulse = Pulse(self.worker_id, self.backend_name)
        self.outage = outage("the task worker")

    def run(self) -> None:
        self.pulse.start()
        try:
            while self.running:
                try:
                    super().run()
                    return  # --batch or --max-tasks ended it
                except (OperationalError, InterfaceError) as exc:
                    self.outage.failed(exc)
                    self.startup_delay = False
                    self._wait_for_database()
        finally:
            self.pulse.stop()

    def _wait_for_database(self) -> None:
        wait = FIRST_WAIT
        alias = router.db_for_write(DBTaskResult)
        while self.running:
            close_old_connections()  # the connection the outage broke: a new one is tried
            try:
                connections[alias].ensure_connection()
                # And the tasks' own database, when it is another one.
                connections[router.db_for_write(MCPTask)].ensure_connection()
            except (OperationalError, InterfaceError) as exc:
                self.outage.failed(exc)
                time.sleep(wait)
                wait = min(wait * 2, LONGEST_WAIT)
                continue
            self.outage.closed()
            return

    def run_task(self, db_task_result: DBTaskResult) -> None:
        try:
            super().run_task(db_task_result)
        finally:
            self.pulse.runs += 1


class Command(db_worker.Command):
    help = (
        "Run MCP tasks (and any other django-tasks-db task): db_worker's loop that outlives database "
        "outages, with a heartbeat (manage.py mcp_tasks status) and the sweep that retries lost runs."
    )

    def handle(self, **options: Any) -> None:
        # db_worker's own handle (its options, --reload, signals), making this worker instead of its own:
        # it names its module's Worker class and offers no hook to pass another.
        with mock.patch.object(db_worker, "Worker", OutlivingWorker):
            super().handle(**options)
